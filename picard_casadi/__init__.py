"""picard_casadi: parameter estimation for nonlinear ODEs by Picard iteration.

Models are written with CasADi SX expressions; the Picard maps of the
Talitckii-Peet method are built as CasADi function graphs, mapped over
intervals and experiments, and optionally compiled to C.

Public names (see the README and ``docs/api.md``)::

    Model, Experiment, estimate, EstimationResult, IterationRecord, simulate,
    simulate_experiment, measure, problem, problems, describe_problems,
    register_problem, Problem, PicardError, SimulationError, ConvergenceError,
    StartNotFiniteError, CodegenError, DiscretisationWarning, FitWarning, profile, Profile, compare,
    read_columns, Columns, read_csv_experiments, Noise, Parameter, export_c, read_petab,
    PetabProblem, Preequilibration, prediction_band, PredictionBand

Layout: the user's vocabulary at the top (``model``, ``experiment``,
``noise``, ``parameters``, ``simulate``, ``estimate``, ``result``, ``errors``) and wings beneath, each
importing only from the layers below it (``tests/test_layout.py``)::

    cli -> studies -> io -> estimate -> estimation -> result -> methods
        -> analysis -> transcription -> simulate -> runtime
        -> model, experiment, noise, parameters, errors
"""

from .errors import (CodegenError, ConvergenceError, DiscretisationWarning, FitWarning,
                     PicardError, SimulationError, StartNotFiniteError)
from .studies.compare import compare
from .estimate import estimate
from .io.columns import Columns, read_columns
from .io.csv_experiments import read_csv_experiments
from .io.export import export_c
from .io.petab import PetabProblem, read_petab
from .analysis.prediction_band import PredictionBand, prediction_band
from .experiment import Experiment, Preequilibration
from .methods.base import IterationRecord
from .model import Model
from .noise import Noise
from .parameters import Parameter
from .studies.profile import Profile, profile
from .studies.registry import Problem, describe_problems, problem, problems, register_problem
from .result import EstimationResult
from .runtime.progress import Progress
from .simulate import measure, simulate, simulate_experiment

__version__ = "0.1.0"

__all__ = [
    "Model", "Experiment", "estimate", "EstimationResult", "IterationRecord", "simulate",
    "simulate_experiment", "measure", "problem", "problems", "describe_problems",
    "register_problem", "Problem", "PicardError", "SimulationError",
    "ConvergenceError", "StartNotFiniteError", "CodegenError", "DiscretisationWarning", "FitWarning", "profile",
    "Profile",
    "compare", "read_columns", "Columns", "read_csv_experiments", "Noise", "Parameter", "export_c", "read_petab", "PetabProblem",
    "Preequilibration", "prediction_band", "PredictionBand", "Progress", "__version__",
]
