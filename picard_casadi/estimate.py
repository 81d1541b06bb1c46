"""``estimate``: one entry point for every method.

The driver checks the user's input once
(:mod:`picard_casadi.estimation.arguments`), builds the shared
:class:`~picard_casadi.transcription.problem.Setup`
(:mod:`picard_casadi.estimation.setup`), and then, until the answer is
certified or the budget is spent (:mod:`picard_casadi.estimation.refinement`):

1. runs the chosen method, re-running it while ``weights="auto"``
   re-estimates the noise levels;
2. certifies the converged solution against an accurate integration of the
   model (:mod:`picard_casadi.analysis.certificate`); where the certificate fails and
   ``refine`` allows, bisects the intervals it marks
   (:mod:`picard_casadi.transcription.mesh`), carries the solution onto the new mesh and
   goes back to 1.

Where the run fails, the default path's second runs (another start, IPOPT,
shooting; :mod:`picard_casadi.estimation.fallbacks`) follow.  The result
(:class:`~picard_casadi.result.EstimationResult`,
:mod:`picard_casadi.estimation.assembly`) carries the estimate, the
certificate, the final mesh, the uncertainty and the timings.
"""

from __future__ import annotations

import contextvars
import inspect
import time
from collections.abc import Callable, Sequence
import dataclasses
from dataclasses import asdict
from typing import Any

import numpy as np

from .analysis.interval_information import chain_growth, iterate_growth
from .analysis.wrapped_angles import wrapped_angle_note
from .errors import ConvergenceError, FitWarning, SimulationError, StartNotFiniteError
from .estimation.aliasing import aliased_estimate_note, aliased_start_note
from .estimation.arguments import MAX_REFINEMENTS, as_bounds, check_arguments, options_of
from .estimation.assembly import (applicable_advice, assemble, attach_noise,
                                  given_weights_note, growing_noise_notes, judge,
                                  noise_bound_note, pooled_noise_note, unfinite_start)
from .estimation.diagnosis import (check_fit, clip_intervals_to_bounds, declare_plateau,
                                   diagnose_open_gaps, diagnose_stuck_step,
                                   note_bounds_reached, unstable_departure)
from .estimation.experiment_spread import note_spread_between_experiments
from .estimation.multistart import LOG_BASES
from .estimation.call_notes import close_call
from .estimation.known_starts import note_noisy_known_starts
from .estimation.input_notes import (jump_notes, jumping_inputs, kinked_inputs,
                                     note_copied_rows, note_staircase_inputs)
from .estimation.fallbacks import (ITERATION_LIMITS, NOISE_NOT_POSITIVE, OUTPUT_NOT_POSITIVE,
                                   STALLED, DefaultPath, restarts_allowed, run_limit,
                                   second_runs, single_shooting_instead)
from .estimation.refinement import CVODES_METHODS, FitProblem, solve_and_refine
from .estimation.noise_formula import NoiseFormula
from .estimation.noise_plan import floored_at_start, floored_measurement
from .estimation.preequilibration import stiff_in_settling_only
from .estimation.statement import in_table_terms, state_problem
from .estimation.setup import (build_setup, simulated_ssr, start_weights, state_sizes, x0_mask,
                               x0_setting)
from .estimation.valleys import note_converged_ran_off, ran_off_message
from .estimation.wald_ends import note_flat_wald_ends
from .experiment import Experiment
from .methods import get_method
from .methods.base import IterationRecord
from .model import Model
from .parameters import number_mapping, values_by_name
from .result import EstimationResult
from .runtime.executors import stop_in_a_starting_worker
from .runtime.interrupts import interruptible_call
from .runtime.threads import with_solver_threads
from .runtime.user_warnings import SPELLING, warn_user
from .transcription.guess import RUNAWAY_HEAD
from .transcription.mesh import default_T, search_time_scale, transfer_solution

__all__ = ["estimate", "build_setup", "default_T", "MAX_REFINEMENTS"]

DEFAULT_METHOD = "picard-gn"


# ---------------------------------------------------------------------- estimate
#: set while ``estimate`` runs a second run of its own (``rerun``): the
#: result's warnings are shown once, by the call the user made (PEtab's
#: Elowitz showed each near-singular information matrix twice)
_SECOND_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("second_run", default=False)


@interruptible_call  # Ctrl-C in any phase ends as KeyboardInterrupt (interrupts.py)
@with_solver_threads
def estimate(
    model: Model,
    experiments: Experiment | Sequence[Experiment],
    p0: Any,
    method: str | None = None,
    *,
    p_bounds: tuple[Any, Any] | None = None,
    x0_bounds: tuple[Any, Any] | None = None,
    estimate_x0: bool | Sequence[bool] = True,
    T: float | None = None,
    n: int | None = None,
    lam: float = 10.0,
    nodes: int | None = None,
    scheme: str | None = None,
    weights: Any = None,
    noise: Any = None,
    refine: bool | int = True,
    codegen: bool | str = "auto",
    x_scale: Any = None,
    p_scale: Any = None,
    guess: str = "auto",
    warm_start: EstimationResult | None = None,
    uncertainty: bool = True,
    multistart: int | None = None,
    seed: int | None = 0,
    executor: Any = None,
    n_jobs: int | None = None,
    callback: Callable[[IterationRecord], Any] | None = None,
    raise_on_failure: bool = False,
    max_intervals: int | None = None,
    parameter_scale: Any = None,
    per_experiment: Any = None,
    **options: Any,
) -> EstimationResult:
    """Estimate parameters (and initial states) of an ODE model from data.

    Parameters
    ----------
    model : Model
    experiments : Experiment or sequence of Experiment
        They share ``p``; each has its own ``x0`` and inputs.
    p0 : array_like (np,), dict or sequence of Parameter
        Starting parameter values (in the order of ``model.p_names``, or a
        dict ``{name: value}`` over them); or a parameter table (``pc.Parameter``:
        name, start, bounds, scale, whether estimated), which then also
        gives the bounds and scales (and names the parameters that
        experiments introduce, ``Experiment(parameters=...)``).
    method : {"picard-gn", "picard", "ipopt", "shooting"}, optional
        ``"picard-gn"`` (default): the Picard iteration with Gauss-Newton
        steps on the exact fixed-point derivatives, continuity as linearised
        constraints.  Left unset, a ``picard-gn`` run whose step lost all
        precision on a model that is unstable along the trajectory (its
        own solution finite) is repeated with ``"ipopt"`` on the same
        discretisation, and one that reaches no certified answer otherwise
        (but a stop by the callback or by a ``max_iter`` you set) with
        ``"shooting"`` from ``p0``; the result says so
        (:mod:`picard_casadi.estimation.fallbacks`).  ``"picard"``: the paper's Algorithm 4 (projected
        gradient steps with line search and relaxed Picard updates).
        ``"ipopt"``: IPOPT on the collocation NLP of the same discretisation.
        ``"shooting"``: CVODES multiple shooting solved by IPOPT.
    p_bounds : (array_like, array_like), optional
        Box for ``p``; ``None`` entries or infinities are unbounded.  Equal
        bounds hold a parameter fixed.  A bound given as one number (not in
        a list) applies to every parameter.  ``p0`` must lie in the box.
    x0_bounds : (array_like, array_like), optional
        Box for every interval start ``x_j`` (the paper's ``X``), including
        each ``x0``; intersected with ``model.x_domain``.  An experiment's
        given ``x0`` must lie in it; one built from the data is clipped into it.
    estimate_x0 : bool or sequence of bool (nx,)
        False holds every experiment's ``x0`` at its given value; one entry
        per state holds the states marked False at each experiment's given
        ``x0`` and estimates the others (a fed-batch's known start volume).
        States whose initial value the model gives as an expression of the
        parameters (``Model(x0=...)``) are never estimated: they follow it.
    T : float, optional
        Length of the first mesh's intervals; default from the data's and
        the model's time scales (:func:`~picard_casadi.transcription.mesh.default_T`).
        Left unset, a start where the model is stiff on that mesh is
        searched by ``picard-gn`` on the data's time scale (a mesh up to
        eight times coarser) and the search's solution continued on it
        (:func:`~picard_casadi.transcription.mesh.search_time_scale`).
    n : int, optional
        Order of the Picard composition ``P^n`` in the loss; default 1 with
        Radau collocation (a stiff model's ``P^2`` amplifies the fixed
        point's round-off), the paper's 2 with the others.
    lam : float
        Initial continuity penalty ``lambda``.
    nodes : int, optional
        Nodes per interval (default 9; 21 trapezoid).
    scheme : {"auto", "chebyshev", "radau", "trapezoid"}, optional
        The collocation of each interval
        (:class:`~picard_casadi.transcription.quadrature.Quadrature`).
        ``"chebyshev"``: the paper's Chebyshev-Lobatto nodes, only A-stable
        (a fast decaying mode is carried from interval to interval with its
        sign flipping); ``"radau"``: the interval start and the Radau IIA
        points, L-stable, for stiff models (fast kinetics); ``"trapezoid"``:
        uniform nodes, second order.  Default ``"auto"``: Chebyshev, and
        Radau from the point where the model is stiff on the mesh (``h
        |Re lambda|`` of ``f_x`` above 300 at a node: at the start, at a
        solution, or at the last iterate of a run that failed, which then
        starts again from ``p0``; :mod:`picard_casadi.transcription.stiffness`);
        the result's ``settings["scheme"]`` and notes say which.
    weights : None, "auto", "none" or array_like (ny,)
        The noise of the outputs.  ``"auto"``: each output's noise variance
        is unknown and estimated with the parameters (maximum likelihood for
        Gaussian noise: the output-error method's ``det R`` criterion,
        reached by re-weighting with ``1 / sigma_k^2`` until the variances
        settle); ``"none"``: the paper's unweighted sum of squares; an array:
        known inverse noise variances, one per output.  ``None`` (default) is
        ``"auto"`` for a model with several outputs and ``"none"`` for one
        (whose estimate is the likelihood's too).  The result reports the
        noise (``noise_sigma``), ``nllh``, ``det_R``, ``aic`` and ``bic``.
        Experiments with per-measurement ``sigma`` weigh each value by
        ``1 / sigma_i^2`` in every mode.
    noise : Noise, sequence of Noise, or dict of output name to Noise, optional
        The noise model of each output (:class:`~picard_casadi.noise.Noise`):
        normal, log-normal or log10-normal; ``sigma`` known, per measurement
        from the data, estimated, or a noise parameter shared by outputs.  A
        single one applies to every output; a dict's missing outputs get
        ``Noise()`` (normal, estimated); a string is a distribution, and
        ``"correlated"`` estimates the outputs' full noise covariance ``R``
        (every output normal, measured at every sample time).  Not
        together with ``weights``.  The default (``None``): each output's
        noise estimated where it has several outputs, known where the
        experiments give ``sigma``.  A log-normal output is fitted on its log
        scale (the result's outputs, plots and predictions are ``log(y)``).
    refine : bool or int
        After a collocation method converges, check the estimate against an
        accurate integration of the model (the discretisation certificate,
        :mod:`picard_casadi.analysis.certificate`) and, where it fails, bisect the
        intervals with the largest defects and solve again, at most
        ``MAX_REFINEMENTS`` (5) times, or the given number of times.  A
        result whose certificate still fails has ``success=False``.
        ``False`` keeps the first mesh: the certificate is still reported,
        and a failing one is a warning.
    codegen : bool or "auto"
        Generate and compile C for the iteration's functions (``True``), use
        CasADi's virtual machine (``False``), or generate when a C compiler
        is found (``"auto"``).
    x_scale, p_scale : array_like, optional
        Nominal magnitudes of states and parameters (default from the data,
        the start and ``p0``).
    guess : {"auto", "simulation", "anchored", "shooting"}
        How the states start (see :mod:`picard_casadi.transcription.guess`): measured
        states from the data and the others from a simulation with ``p0``
        (``"simulation"``), or propagated interval by interval from the data
        (``"anchored"``), or every state from the simulation (a continuous
        start).  ``"auto"`` (default): ``"simulation"``, and where that run
        of ``picard-gn`` ends at ``max_iter`` with its continuity gaps still
        open (the trajectory never joined up), a second run from
        ``"anchored"``, and where the run from the data's states ends
        (``max_iter`` or ``step_failed``) with its gaps open, one from
        ``"shooting"``; each returned if it converges (a note says so; the
        callback sees every run).
    warm_start : EstimationResult, optional
        Start from this result's solution (interval starts, node values,
        ``p``) instead of ``p0`` and the guess; it must come from a run on the
        same experiments.  Without ``T`` the run starts on that result's
        final mesh; otherwise its solution is carried onto the new one.  The
        method's options are the caller's (a warm start may be the answer
        of another loss: from the weighted answer, the unweighted F/A-18
        loss needs ``mu0``'s damping).
    uncertainty : bool
        Compute standard errors and confidence intervals of the estimate.
    multistart : int, optional
        Run from this many starts (``p0`` and Latin-hypercube samples of
        ``p_bounds``, uniform in ``log |p|`` where a range of one sign spans
        two decades or more) and return the best; all are kept in
        ``result.starts``.
    seed : int, optional
        Seed of the multistart sampling.
    executor : concurrent.futures.Executor, optional
        Run the multistart starts on it (a process pool, a Dask client's
        ``get_executor()``); same seed, same result as serial
        (:mod:`picard_casadi.runtime.executors`: what must pickle).
    n_jobs : int, optional
        The multistart starts on a local pool of this many processes
        (``-1``: one per core).
    callback : callable, optional
        Called with an :class:`~picard_casadi.methods.base.IterationRecord`
        after each iteration of every method; returning True stops (status
        ``"stopped"``).  For ``"ipopt"`` and ``"shooting"`` once per IPOPT
        iteration, from iteration 0 (the start): the objective, the largest
        scaled constraint violation as ``gap``, and ``p``; the fields IPOPT
        does not expose (``grad_norm``, ``misfit``, ...) are NaN.
    raise_on_failure : bool
        Raise :class:`~picard_casadi.ConvergenceError` instead of returning a
        result with ``success=False``.
    max_intervals : int, optional
        The most Picard intervals accepted (the resource guard,
        :func:`~picard_casadi.transcription.problem_size.check_problem_size`): by default 100,000,
        or fewer where their estimated memory would exceed 4 GB.  A larger
        problem is refused with a ValueError before anything is built.
    parameter_scale : {"lin", "log", "log10"} or sequence of them, optional
        The scale on which each parameter is estimated (PEtab's
        ``parameterScale``); ``p0`` and ``p_bounds`` stay on the linear
        scale (a log scale needs positive bounds).  The result reports both
        (``p``, ``p_std``, ``p_ci``; ``p_scaled``, ``p_scaled_std``).  Not
        ``p_scale``, which gives typical magnitudes.
    per_experiment : str or sequence of str, optional
        Model parameters estimated separately in each experiment (a bias per
        maneuver): parameter ``b`` becomes ``b[name]`` of each experiment
        (``b[0]``, ``b[1]``, ... by position where names repeat), starting at
        ``b``'s ``p0`` with its bounds, unless the experiment sets it
        (``Experiment(parameters=...)``).
    **options
        Method options (``max_iter``, ``sigma``, ``gap_tol``, ...; IPOPT
        options as ``ipopt_options={...}``).  Unknown names are an error
        listing the valid ones.

    Returns
    -------
    EstimationResult

    Raises
    ------
    ValueError, TypeError
        On bad input, naming the argument.
    StartNotFiniteError
        (a ``ValueError``) Where the model cannot be evaluated at the start
        (``p0`` and the states' initial guess); with ``multistart`` only for
        the caller's own ``p0`` (a sampled start is listed as failed).  Where
        the model simulated with ``p0`` is finite and only the collocation's
        start is not, the default path (``method`` unset) runs
        ``"single-shooting"`` from ``p0`` instead, and the shooting methods
        start there; a collocation method named raises.
    ConvergenceError
        When ``raise_on_failure`` and the run did not converge.
    """
    stop_in_a_starting_worker("estimate")
    _warn_unused_parameters(model, experiments)  # (no local: the delays take locals())
    if isinstance(model, Model) and number_mapping(p0):
        # {name: start}: the model's order; a constant every experiment sets
        # needs no start (its entry is not used)
        p0 = values_by_name(model.p_names, p0, _set_by_every_experiment(experiments))
    if isinstance(model, Model) and model.has_delays and _experiments_given(experiments):
        # outputs measured late, inputs acting late: rounds of ordinary fits
        rest = {k: v for k, v in locals().items()
                if k not in ("model", "experiments", "p0", "options")}
        from .estimation.delays import estimate_with_delays

        return estimate_with_delays(
            estimate, model, _listed(experiments), p0, {**rest, **options})
    t_start = time.perf_counter()
    statement = (state_problem(model, _listed(experiments), p0, p_bounds, parameter_scale,
                               per_experiment, estimate_x0)
                 if isinstance(model, Model) and _experiments_given(experiments)
                 else None)
    if statement is not None and not statement.trivial:
        # the restated problem (log scales, experiment parameters, x0 from
        # parameters), solved as any other, its answer in the user's terms
        if p_scale is not None:
            raise ValueError("`p_scale` (typical magnitudes) cannot be given with "
                             "parameter scales or experiment parameters: leave it unset")
        if x0_bounds is not None and (statement.shifted.any() or statement.reset):
            lb, ub = (np.array(b, float) for b in as_bounds(x0_bounds, model.nx, "x0_bounds"))
            lb[statement.shifted], ub[statement.shifted] = -np.inf, np.inf
            # a reset state's second copy: the same box
            x0_bounds = (np.r_[lb, lb[statement.reset]], np.r_[ub, ub[statement.reset]])
        if warm_start is not None and getattr(warm_start, "p_scaled", None) is not None:
            warm_start = dataclasses.replace(warm_start, p=np.asarray(warm_start.p_scaled))
        if statement.priors:
            if weights is not None:
                raise ValueError("`weights` cannot be given with parameter priors (a prior is "
                                 "a term of the likelihood): leave it unset")
            noise = statement.noise_with_priors(noise, model, _listed(experiments))
        spelt = SPELLING.set(in_table_terms) if statement.bounds_in_table else None
        bases = LOG_BASES.set(np.array([{"log": np.e, "log10": 10.0}.get(q.scale, 0.0)
                                        for q in statement.table]))

        def solve(stated: Any, phi0: Any, **again: Any) -> EstimationResult:
            kw = {**dict(warm_start=warm_start, multistart=multistart, executor=executor,
                         n_jobs=n_jobs), **again}
            return estimate(stated.model, stated.experiments, phi0, method,
                            p_bounds=(stated.phi_lb, stated.phi_ub), x0_bounds=x0_bounds,
                            estimate_x0=stated.estimate_x0, T=T, n=n, lam=lam, nodes=nodes,
                            scheme=scheme, weights=weights, noise=noise, refine=refine,
                            codegen=codegen, x_scale=x_scale, guess=guess,
                            uncertainty=uncertainty, seed=seed, callback=callback,
                            raise_on_failure=raise_on_failure, max_intervals=max_intervals,
                            **kw, **options)
        try:
            inner = solve(statement, statement.phi0)
            if inner.success and statement.unsettled(inner, timed_only=True):
                # the settling timed at the start is too short at the estimate
                # (a slow binding, fast at p0: Kd 5 standard errors off, a
                # warning only): timed there, and solved again from it
                statement = state_problem(
                    model, _listed(experiments), p0, p_bounds, parameter_scale, per_experiment,
                    estimate_x0, settle_at=np.asarray(inner.p, float))
                first = inner
                inner = solve(statement, np.asarray(inner.p, float), warm_start=None,
                              multistart=None, executor=None, n_jobs=None)
                inner.starts = first.starts
                inner.warnings.insert(0, "the preequilibrations, timed at the start, had not "
                                      "settled at its estimate: timed there and solved again "
                                      "from it")
        except ConvergenceError as err:
            if getattr(err, "result", None) is not None:
                statement.user_result(err.result)
            raise
        finally:
            LOG_BASES.reset(bases)
            if spelt is not None:
                SPELLING.reset(spelt)
        inner.wall_time, inner._model = time.perf_counter() - t_start, model  # (the user's)
        return note_spread_between_experiments(statement.user_result(inner),
                                               _listed(experiments))
    method_chosen = method is not None
    method = DEFAULT_METHOD if method is None else method
    n_given, scheme_given = n, scheme  # as the user gave them, for second runs
    T_given = T
    (exps, p0, p_lb, p_ub, x_lb, x_ub, n, scheme, scheme_auto, nodes, max_refinements,
     mesh_of_warm_start, T, lam,
     seed, uncertainty, raise_on_failure, spec, opts, weights_mode, w, plan) = check_arguments(
        model, experiments, p0, method, p_bounds, x0_bounds, estimate_x0, T, n, lam, nodes,
        scheme, weights, noise, refine, codegen, guess, warm_start, uncertainty, multistart,
        seed, callback, raise_on_failure, max_intervals, options, ESTIMATE_ARGUMENTS)

    if multistart is not None and multistart > 1:
        from .estimation.multistart import run_multistart

        # each start as this call: the default path where no method was named
        return run_multistart(
            estimate, model, exps, p0, method if method_chosen else None, multistart, seed,
            dict(p_bounds=(p_lb, p_ub), x0_bounds=x0_bounds, estimate_x0=estimate_x0,
                 T=T_given, n=n_given, lam=lam, nodes=nodes, scheme=scheme_given, weights=weights,
                 noise=noise, refine=refine, codegen=codegen, x_scale=x_scale, p_scale=p_scale,
                 guess=guess, uncertainty=uncertainty, callback=callback,
                 raise_on_failure=raise_on_failure, max_intervals=max_intervals, **options),
            executor=executor, n_jobs=n_jobs,
        )

    user_model, user_exps = model, exps
    if plan is not None:  # each output on the scale where its noise is normal
        model, exps = plan.model, plan.experiments
    prob = FitProblem(model=model, experiments=exps, spec=spec, opts=opts, T=float(T), n=n,
                    lam=float(lam), nodes=nodes, scheme=scheme, p_bounds=(p_lb, p_ub),
                    x_bounds=(x_lb, x_ub), estimate_x0=x0_mask(estimate_x0, model.nx),
                    weights_mode=weights_mode, codegen=codegen,
                    guess="simulation" if guess == "auto" else guess,
                    callback=callback, max_intervals=max_intervals,
                    noise=None if plan is None else plan.groups,
                    formula=None if plan is None else plan.formula,
                    data=None if plan is None else plan.data,
                    scheme_auto=scheme_auto, n_auto=n_given is None,
                    iteration_budget=None if restarts_allowed() else run_limit(opts),
                    # the default path (a second run names its method)
                    limit_continuations=(not method_chosen and "max_iter" not in options
                                         and warm_start is None))
    def rerun(run_method: str, run_guess: str, max_iter: int | None,
              warm_start: EstimationResult | None = None,
              ipopt_options: dict[str, Any] | None = None,
              x0_estimated: np.ndarray | None = None) -> EstimationResult:
        """This call again with another method or start (a failure, not raised),
        stopped after ``max_iter`` iterations unless the user set a limit, or
        continued from ``warm_start``; ``ipopt_options`` under the user's own;
        ``x0_estimated`` another mask of estimated initial states."""
        run_options = dict(options if run_method == method
                           else options_of(get_method(run_method), options))
        if max_iter is not None:
            run_options.setdefault("max_iter", max_iter)
        if ipopt_options:
            run_options["ipopt_options"] = {**ipopt_options,
                                            **(run_options.get("ipopt_options") or {})}
        token = _SECOND_RUN.set(True)
        try:
            return estimate(user_model, experiments, p0, run_method, p_bounds=p_bounds,
                            x0_bounds=x0_bounds, T=T, n=n_given,
                            estimate_x0=(estimate_x0 if x0_estimated is None
                                         else [bool(v) for v in x0_estimated]),
                            lam=lam, nodes=nodes, scheme=scheme_given, weights=weights,
                            noise=noise, refine=refine, codegen=codegen, x_scale=x_scale,
                            p_scale=p_scale, guess=run_guess, warm_start=warm_start,
                            uncertainty=uncertainty, seed=seed, callback=callback,
                            raise_on_failure=False, max_intervals=max_intervals,
                            **run_options)
        finally:
            _SECOND_RUN.reset(token)

    start = None
    if warm_start is not None:
        from .transcription.discretisation import Discretisation

        mesh = Discretisation(model, exps, prob.T, nodes, scheme, mesh_of_warm_start)
        start = transfer_solution(warm_start._disc, warm_start._X, warm_start._U, mesh)
        p0 = np.clip(np.asarray(warm_start.p, float), p_lb, p_ub)
    setup = prob.setup(p0, w, x_scale=x_scale, p_scale=p_scale,
                       boundaries=mesh_of_warm_start, start=start)
    found = prob.stiff_on(setup, setup.U0, setup.p0)
    if start is None and not _SECOND_RUN.get():
        for note in filter(None, (aliased_start_note(setup),
                                  wrapped_angle_note(user_exps, user_model.y_names))):
            prob.notes.append(note)
            warn_user(note)
        runaway = [n for n in prob.notes if n.startswith(RUNAWAY_HEAD)]
        if runaway:  # the first, and how many more
            warn_user(runaway[0] + f" ({len(runaway) - 1} more experiment(s) likewise)" * (
                len(runaway) > 1))
    if found is not None and start is not None:
        # a warm start where the model has grown stiff on its mesh (a profile pushing a
        # fast equilibrium's rate up: Chebyshev's nodes on 794 intervals, picard-gn
        # failing): Radau's nodes on the same intervals, from the warm start's solution
        from .transcription.discretisation import Discretisation

        prob.use_radau(found, "at the warm start", setup.disc)
        mesh = Discretisation(model, exps, prob.T, prob.nodes, prob.scheme,
                              setup.disc.boundaries)
        start = transfer_solution(warm_start._disc, warm_start._X, warm_start._U, mesh)
        setup = prob.setup(p0, w, x_scale=x_scale, p_scale=p_scale,
                           boundaries=setup.disc.boundaries, start=start)
    elif found is not None:  # stiff at the start: Radau's nodes from the outset
        prob.use_radau(found, "at the start", setup.disc)
        # (not where a settling's clock alone is stiff: a MAPK cascade's search astray)
        search_T = (search_time_scale(exps, prob.T) if T_given is None and spec.name ==
                    "picard-gn" and not stiff_in_settling_only(setup, found) else None)
        if search_T is not None:  # the search on the data's time scale
            prob.polish_T, prob.T = prob.T, search_T
            prob.user_scales = {"x_scale": x_scale, "p_scale": p_scale}
        setup = prob.setup(p0, w, x_scale=x_scale, p_scale=p_scale,
                           boundaries=None if search_T is not None else setup.disc.boundaries)
    if start is None and spec.name in ("picard", "picard-gn"):
        # whose steps need the start's fixed points
        setup = prob.settled_start(setup, w, x_scale=x_scale, p_scale=p_scale)
    if weights_mode == "auto":
        # a warm start of a likelihood fit starts from its noise levels (its
        # weights); any other from the residuals of the model simulated from
        # the start (the output-error method's first R)
        continued = (warm_start is not None and warm_start.settings.get("weights") == "auto"
                     and np.size(warm_start.weights) == model.ny
                     and np.all(np.asarray(warm_start.weights, float) > 0))
        w = (np.asarray(warm_start.weights, float).copy() if continued
             else start_weights(setup, prob.noise))
        setup.tr.set_weights(w)
    # the outputs and end states of the start (what the residuals are made of),
    # from a function every method compiles anyway
    _, Ys0, xend0 = setup.tr.trajectory(setup.X0, setup.U0, setup.p0)
    if not (np.all(np.isfinite(Ys0)) and np.all(np.isfinite(xend0))):
        # the collocation's start, its nodes mapped by the Picard map; a
        # shooting method needs only the model simulated with p0
        simulates = simulated_ssr(model, exps, [setup.X0[sl.start] for sl in
                                                setup.disc.intervals_of], setup.p0) is not None
        not_finite = StartNotFiniteError(
            "the objective is not finite at the starting point: the model cannot be "
            "evaluated at p0 and the initial guess of the states (check p0, the "
            "experiments' x0 and x0_bounds)" + unfinite_start(model, exps, p0))
        if not simulates:
            raise not_finite
        if spec.name not in CVODES_METHODS:
            if method_chosen or warm_start is not None:
                raise StartNotFiniteError(
                    f"{not_finite}; the model simulated with p0 is finite: the collocation's "
                    "start leaves the model's domain where an interval's fixed point does not "
                    "settle (a fast transient): method='single-shooting' starts there, as "
                    "the default method (method unset) does where this happens")
            return _raised_on_failure(single_shooting_instead(rerun, not_finite, guess, t_start),
                                      spec.name, raise_on_failure)
    if plan is not None:
        result_noise = {"noise_model": plan.describe(user_model.y_names),
                        "noise_parameters": list(plan.groups.names)}
    else:
        result_noise = {}
    initial_intervals = setup.disc.n_intervals

    run = solve_and_refine(prob, setup, w, p0, max_refinements)
    setup, solved, cert, info = run.setup, run.solved, run.certificate, run.info
    records, iterations, refinements = run.records, run.iterations, run.refinements

    if prob.formula:
        # the result on the data themselves, with the noise formulas' sigma_i
        prob.experiments = NoiseFormula.unshifted(prob.experiments, prob.data)
        setup.disc.replace_data(prob.experiments)
        setup.tr.set_weights(setup.tr.weights)
        result_noise["noise_parameter_values"] = dict(
            zip(prob.formula.names, prob.formula.theta.tolist()))
        note = noise_bound_note(prob.formula.names, prob.formula.theta, prob.formula.lower,
                                prob.formula.upper)
        if note:
            prob.notes.append(note)
    outcome = solved.outcome
    mesh = setup.disc.mesh_summary()
    prob.notes += jump_notes(prob.model, prob.experiments, cert is not None and cert.passed,
                             refinements, mesh["intervals"])
    result, fitted = assemble(prob, setup, outcome, solved.weights, records, iterations, dict(
        T=prob.T, n=prob.n, lam=float(lam), nodes=nodes, scheme=prob.scheme, weights=weights_mode,
        weight_rounds=solved.weight_rounds,
        estimate_x0=x0_setting(prob.estimate_x0),
        intervals=mesh["intervals"], shortest_interval=mesh["shortest"],
        longest_interval=mesh["longest"], initial_intervals=initial_intervals,
        scheme_auto=bool(prob.scheme_auto), n_auto=bool(prob.n_auto),
        refinements=refinements, refine=max_refinements, codegen=str(codegen),
        # what codegen="auto" did: False where it ran on CasADi's virtual
        # machine (no compiler, or no usable cache), which only a warning said
        compiled=bool(setup.compiled),
        options=asdict(opts), p_bounds=[p_lb.tolist(), p_ub.tolist()],
        x0_bounds=[x_lb.tolist(), x_ub.tolist()], noise_given=noise is not None,
        **result_noise,
    ))
    result._noise, result._model = (None if plan is None else plan.noise), user_model
    not_positive = prob.formula.not_positive(prob.data, fitted) if prob.formula else ""
    if not_positive and result.success:
        # its likelihood is not finite: proportional error b*g where the model's
        # output is 0 at a measured value (a pre-dose sample) kept b at its
        # start and returned success without standard errors
        result.success, result.status = False, NOISE_NOT_POSITIVE
        result.message = (f"the likelihood is not finite, so the estimate is no fit: "
                          f"{not_positive}")
    result._continuation_stopped = outcome.continuation_stopped
    if prob.ran_off and cert is None and not result.success:  # (at its iteration limit)
        result._ran_off = True
        result.message = ran_off_message(spec.name, result.p, None, prob.ran_off)
    if cert is not None:
        judge(result, cert, refinements, max_refinements, spec.name,
               kinked_inputs(prob.model, prob.experiments),
               jumping_inputs(prob.model, prob.experiments) if not cert.passed else (),
               growth=(chain_growth(setup, info.sens) if not cert.passed and info is not None
                       and "dend" in info.sens else 1.0))
        if prob.ran_off and not cert.passed:
            result._ran_off = True
            result.message = ran_off_message(spec.name, result.p, cert.message, prob.ran_off)
        if cert.passed:
            # the likelihood of the ODE's own solution: CVODES from the estimated
            # x0 (the certificate's linearised carry-forward where that fails)
            simulated = simulated_ssr(prob.model, prob.experiments, result.x0, result.p,
                                      setup.disc, state_sizes(outcome.U))
            departs = unstable_departure(cert, simulated)
            if departs:
                # held by continuity, the model's own solution from x0 far off
                # it: the likelihood is the fitted trajectory's (a car's yaw
                # inertia fitted negative: noise levels 1.8e8 beside an SSR of 21)
                result.warnings.append(departs)
                simulated = None
            if simulated is not None:
                attach_noise(result, setup, weights_mode, simulated[0], prob.noise)
            elif not prob.formula:
                attach_noise(result, setup, weights_mode, cert.ssr_model_per_output,
                             prob.noise)
    if plan is not None and plan.correlated and result.success:
        correlated_likelihood(result, prob)
    # (at a converged run's answer only: a failed run's collocation states may be
    # negative where the model's are not, a logistic from r = 40, K = 1e6)
    floored = (floored_measurement(prob.model, prob.experiments, fitted, user_model.y_names)
               if outcome.success else "")
    floored_by_statement = True
    if floored:
        # the logarithm of 0, finite by its floor only: the floor's residual
        # set the output's noise level (a species known to start at 0 reported
        # at a detection limit: sigma 207 for 0.05 and Ea 131 for 80, success)
        result.success, result.status = False, OUTPUT_NOT_POSITIVE
        floored_by_statement = floored_at_start(
            prob.model, prob.experiments, [e.x0_guess(prob.model, p0) for e in prob.experiments],
            p0, user_model.y_names)
        result.message = (f"the likelihood is not finite, so the estimate is no fit: the "
                          f"model's {floored}. " + (
                              "Check that experiment's constants and initial states (a dose "
                              "of 0?), or leave such values out (NaN)" if floored_by_statement
                              else "At the start (p0) the model's output was positive there: "
                              "the run went where it crosses 0 (a poor local optimum, or a "
                              "model whose states can go negative); another start, method or "
                              "bounds that keep it positive"))
    # where every state is an output, both starts take every state from the data
    every_state_measured = set(model.output_state_index) >= set(range(model.nx))
    outliers = None
    if result.success:
        outliers = check_fit(result, prob.experiments, fitted, prob.model, prob.estimate_x0)
        weighed = given_weights_note(result, prob.experiments, fitted)
        if weighed:
            result.warnings.insert(0, weighed)  # (the likelier cause of what follows)
            warn_user(weighed)
    elif result.status in ITERATION_LIMITS + STALLED:
        diagnose_open_gaps(result, prob.model, prob.experiments)
        result.message = applicable_advice(
            result.message, weights_mode, model.ny,
            # where every state is an output, "anchored" starts as the default does
            "anchored" if every_state_measured else guess)
    unstable = (not result.success
                and diagnose_stuck_step(result, prob.model, prob.experiments))
    if (uncertainty and outcome.success and info is not None and not not_positive
            and not floored):
        t_unc = time.perf_counter()
        from .analysis.uncertainty import attach_uncertainty

        if spec.name in CVODES_METHODS:  # its own model's derivatives, not the mesh's
            from .methods.shooting import shooting_sensitivity
            from .runtime.interrupts import is_interrupt

            try:
                info = shooting_sensitivity(setup, prob.opts, outcome.X, outcome.p)
            except RuntimeError as err:  # CVODES failed at the estimate
                if is_interrupt(err):
                    raise KeyboardInterrupt from None
                result.warnings.append(
                    "shooting: standard errors from the collocation mesh (its CVODES "
                    f"sensitivities failed at the estimate: {str(err).splitlines()[-1][:200]})")
        correlated = bool(plan is not None and plan.correlated and prob.formula)
        attach_uncertainty(result, setup, info,
                           noise_covariance=prob.formula.R if correlated else None,
                           noise_formula=prob.formula if prob.formula and not correlated
                           else None)
        prob.timings["uncertainty"] = time.perf_counter() - t_unc
        declare_plateau(result, fitted)
        pooled = pooled_noise_note(result) if weights_mode == "none" else ""
        result.warnings += [pooled] * bool(pooled)
        if weights_mode != "given" and result.success:
            result.warnings += growing_noise_notes(result, prob.experiments, fitted, outliers)
        note_flat_wald_ends(result)
    if run.plateau_reach is not None and result.success:
        # a stiff start's search converged on a plateau and stopped there
        # (estimation/refinement.py): no certificate, the search's reach
        result.settings["parameter_reach"] = run.plateau_reach
        declare_plateau(result)
    aliased = aliased_estimate_note(setup, outcome.U, outcome.p) if result.success else ""
    if aliased:
        result.warnings.append(aliased)
        warn_user(aliased, FitWarning)
    if result.success:
        note_bounds_reached(result, p_lb, p_ub, (x_lb, x_ub, prob.estimate_x0, model))
        note_converged_ran_off(result, p0, setup.p_scale, model.p_names)
        clip_intervals_to_bounds(result, p_lb, p_ub)
    note_staircase_inputs(result, model, prob.experiments)
    note_copied_rows(result, prob.experiments)
    result.wall_time = time.perf_counter() - t_start

    result = second_runs(result, DefaultPath(
        method=spec.name, method_chosen=method_chosen, guess=guess,
        warm_start=warm_start is not None, every_state_measured=every_state_measured,
        some_state_measured=any(i is not None for i in model.output_state_index),
        unstable=unstable, max_iter_given="max_iter" in options,
        floored_by_statement=floored_by_statement,
        growth=(iterate_growth(setup, outcome.X, outcome.U, outcome.p)
                if spec.name == "picard-gn" and result.status == "max_iter"
                and outcome.X is not None else 1.0)), rerun, t_start)
    if not _SECOND_RUN.get():
        close_call(result, prob.experiments, model, user_model, user_exps, p0,
                   (p_lb, p_ub, x_lb, x_ub), ~prob.estimate_x0)
        note_noisy_known_starts(result, user_model, user_exps, ~prob.estimate_x0,
                                lambda mask: rerun(method, guess, None, result, None, mask))
        # the call's whole time, failed second runs included (a start had 119 s of 273)
        result.wall_time = time.perf_counter() - t_start
    return _raised_on_failure(result, spec.name, raise_on_failure)


def _raised_on_failure(result: EstimationResult, method: str,
                       raise_on_failure: bool) -> EstimationResult:
    """``result``, or :class:`ConvergenceError` carrying it where it failed and
    ``raise_on_failure``."""
    if raise_on_failure and not result.success:
        raise ConvergenceError(f"{method} did not converge: {result.message}", result)
    return result


def correlated_likelihood(result: EstimationResult, prob: FitProblem) -> None:
    """The likelihood with the outputs' full covariance (``noise="correlated"``):
    ``nllh``, ``det R`` and each output's sigma of the ODE's own solution (the
    held weights gave the diagonal likelihood)."""
    try:
        fitted = [result.predict(e) for e in range(len(prob.experiments))]
    except (SimulationError, RuntimeError, ValueError):
        return
    nllh, det_R, sigma = prob.formula.likelihood(prob.data, fitted)
    if np.isfinite(nllh):
        shift = 2.0 * (nllh - result.nllh)
        result.aic, result.bic = result.aic + shift, result.bic + shift
        result.nllh, result.det_R, result.noise_sigma = nllh, det_R, sigma
        result.settings["noise"] = "estimated"


def _warn_unused_parameters(model: Any, experiments: Any) -> None:
    """Warn of the parameters the model uses nowhere (:attr:`Model.unused_parameters`)
    that no experiment sets, once per call the user made."""
    if not isinstance(model, Model) or _SECOND_RUN.get():
        return
    unused = sorted(set(model.unused_parameters) - _set_by_every_experiment(experiments))
    if unused:
        warn_user(f"parameter(s) {', '.join(unused)} appear in none of the model's rhs, y, "
                  "initial states (Model(x0=...)) or delays: no data determine them, and "
                  "their standard errors will be inf; an expression left out?")


def _set_by_every_experiment(experiments: Any) -> set[str]:
    """The model parameters every experiment sets to a number (its
    ``parameters``): constants whose ``p0`` entry is not used."""
    exps = _listed(experiments) if _experiments_given(experiments) else []
    sets = [{k for k, v in (e.parameters or {}).items() if not isinstance(v, str)}
            for e in exps]
    return set.intersection(*sets) if sets else set()


def _listed(experiments: Any) -> list[Experiment]:
    """One Experiment or a sequence of them, as a list."""
    return [experiments] if isinstance(experiments, Experiment) else list(experiments)


def _experiments_given(experiments: Any) -> bool:
    """Whether ``experiments`` is one Experiment or a sequence of them (else the
    argument checks say what is wrong)."""
    if isinstance(experiments, Experiment):
        return True
    return (isinstance(experiments, (list, tuple)) and len(experiments) > 0
            and all(isinstance(e, Experiment) for e in experiments))


#: estimate's own argument names (not method options), for the unknown-name message
ESTIMATE_ARGUMENTS = tuple(name for name, prm in inspect.signature(estimate).parameters.items()
                            if prm.kind is not prm.VAR_KEYWORD)
