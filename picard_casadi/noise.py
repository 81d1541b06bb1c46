"""The noise of an output: its distribution and its standard deviation.

A :class:`Noise` says, for one output, how a measurement scatters about the
model's value.  ``estimate(..., noise=...)`` takes one for every output (a
single one for all, a sequence, or a mapping by output name)::

    pc.Noise()                          # normal, sigma unknown: estimated
    pc.Noise(sigma=0.05)                # normal, sigma known
    pc.Noise(sigma="data")              # each measurement's sigma from Experiment(sigma=...)
    pc.Noise(sigma="s_conc")            # a noise parameter, shared by every output naming it
    pc.Noise("log-normal")              # log(y) normal, sigma estimated on the log scale

    a, b, g = ca.SX.sym("a"), ca.SX.sym("b"), ca.SX.sym("g")
    pc.Noise(sigma=a + b * g, output=g,  # a noise formula (PEtab's noiseFormula):
             parameters={"a": 0.1, "b": 0.05})  # g the model's output, a and b estimated

The distributions are PEtab's: ``"normal"`` (PEtab's ``lin``/``normal``),
``"log-normal"`` (``log``/``normal``: ``log y`` is normal with standard
deviation ``sigma``) and ``"log10-normal"`` (``log10``/``normal``).  The
likelihood's terms, with their constants as PEtab writes them, are in
``docs/likelihood.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import casadi as ca

if TYPE_CHECKING:
    from .model import Model

__all__ = ["Noise", "DISTRIBUTIONS", "LOG_FLOOR", "log_scaled_model", "output_scales"]

#: the smallest model value a log-normal output takes the logarithm of (a
#: measured value below it misfits by hundreds of noise levels).  Its square's
#: reciprocal is finite: at 1e-300 the exact Hessian at a floored value,
#: -1/m**2 times fmax's zero derivative, was -inf * 0 = NaN, and IPOPT
#: stopped at its start (Invalid_Number_Detected) wherever a first guess
#: dipped below 0 (a reservoir's storage in a dry spell)
LOG_FLOOR = 1e-150

#: the supported noise distributions and the scale on which each is normal
DISTRIBUTIONS = {"normal": "lin", "log-normal": "log", "log10-normal": "log10"}


@dataclass(frozen=True, eq=False)
class Noise:
    """The noise model of one output.

    Parameters
    ----------
    distribution : {"normal", "log-normal", "log10-normal"}
        ``"normal"``: ``y = g + e``; ``"log-normal"``: ``log y = log g + e``;
        ``"log10-normal"``: ``log10 y = log10 g + e``; ``e`` normal with
        standard deviation ``sigma`` (on the log scale for the last two, so
        ``sigma = 0.1`` is about 10 % of the value).  The data and the output
        must then be positive.
    sigma : None, float, str or casadi.SX
        ``None`` (default): unknown, estimated with the parameters by
        maximum likelihood.  A positive number: known.  ``"data"``: each
        measurement's own, from the experiments' ``sigma`` arrays
        (``Experiment(..., sigma=...)``).  Any other string names a noise
        parameter: estimated, one value shared by every output whose noise
        names it.  A CasADi SX expression: a noise formula of the noise
        parameters (symbols named in ``parameters``) and of ``output``, the
        model's value of this output (on the noise's scale); it must be
        positive.
    bounds : (float, float)
        Bounds of an estimated ``sigma`` (default ``(0, inf)``), and of
        each noise parameter of a formula.
    output : casadi.SX, optional
        The symbol that stands for the model's output in a formula.
    parameters : mapping of str to float, optional
        A formula's noise parameters, by the names of their symbols, with
        their starting values.  A parameter named by several outputs'
        formulas (or as another output's ``sigma``) is one parameter.

    Raises
    ------
    ValueError
        For an unknown distribution (naming those supported), a ``sigma``
        that is not positive and finite, or bounds out of order.
    """

    distribution: str = "normal"
    sigma: float | str | None = None
    bounds: tuple[float, float] = (0.0, math.inf)
    output: Any = None
    parameters: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"Noise: distribution {self.distribution!r} is not supported; use one of "
                f"{', '.join(repr(d) for d in DISTRIBUTIONS)} (a Laplace or other "
                "distribution: not yet)")
        s = self.sigma
        if isinstance(s, (ca.SX, ca.MX)):
            self._check_formula()
        elif self.output is not None or self.parameters:
            raise ValueError("Noise: `output` and `parameters` belong to a noise formula; "
                             "give `sigma` as a CasADi SX expression of them")
        if isinstance(s, (ca.SX, ca.MX)):
            pass
        elif s is not None and not isinstance(s, str):
            try:
                value = float(s)
            except (TypeError, ValueError):
                raise ValueError(f"Noise: `sigma` must be None, a positive number or a name, "
                                 f"got {s!r}") from None
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"Noise: `sigma` must be positive and finite, got {s!r}; "
                                 "use sigma=None to estimate it")
            object.__setattr__(self, "sigma", value)
        elif isinstance(s, str) and not s.strip():
            raise ValueError("Noise: `sigma` as a name must not be empty")
        try:
            lo, hi = (float(b) for b in self.bounds)
        except (TypeError, ValueError):
            raise ValueError(f"Noise: `bounds` must be two numbers (lower, upper), got "
                             f"{self.bounds!r}") from None
        if not (lo >= 0 and hi > lo) or math.isnan(hi):
            raise ValueError(f"Noise: `bounds` must satisfy 0 <= lower < upper, got "
                             f"{self.bounds!r}")
        object.__setattr__(self, "bounds", (lo, hi))

    def _check_formula(self) -> None:
        """A formula's symbols: ``output`` and the named parameters, nothing else."""
        s = self.sigma
        if not isinstance(s, ca.SX) or s.numel() != 1:
            raise ValueError("Noise: a noise formula `sigma` must be a scalar CasADi SX "
                             "expression")
        out = self.output
        if out is not None and not (isinstance(out, ca.SX) and out.is_symbolic()
                                    and out.numel() == 1):
            raise ValueError("Noise: `output` must be one CasADi SX symbol (ca.SX.sym('g'))")
        try:
            starts = {str(k): float(v) for k, v in dict(self.parameters).items()}
        except (TypeError, ValueError):
            raise ValueError("Noise: `parameters` must map each noise parameter's name to "
                             f"its starting value, got {self.parameters!r}") from None
        bad = [k for k, v in starts.items() if not math.isfinite(v)]
        if bad:
            raise ValueError(f"Noise: the start of noise parameter(s) {bad} is not finite")
        names = set()
        for sym in ca.symvar(s):
            if out is not None and sym.element_hash() == out.element_hash():
                continue
            if sym.name() not in starts:
                raise ValueError(
                    f"Noise: the noise formula {s} uses symbol {sym.name()!r}, which is "
                    "neither `output` nor one of `parameters` "
                    f"({sorted(starts) or 'none given'}); name it in parameters={{...}} with "
                    "its start")
            names.add(sym.name())
        unused = sorted(set(starts) - names)
        if unused:
            raise ValueError(f"Noise: parameters {unused} do not appear in the formula {s}")
        object.__setattr__(self, "parameters", starts)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle support: a formula travels as one ``casadi.Function`` (SX does not
        pickle on its own), as :class:`~picard_casadi.model.Model` does."""
        state = dict(self.__dict__)
        if self.is_formula:
            syms = [v for v in ca.symvar(self.sigma)
                    if self.output is None or v.element_hash() != self.output.element_hash()]
            out = self.output if self.output is not None else ca.SX.sym("output")
            state["sigma"] = ca.Function("noise_formula", [out, *syms], [self.sigma],
                                         ["output", *[v.name() for v in syms]], ["sigma"])
            state["output"] = self.output is not None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        f = state.get("sigma")
        if isinstance(f, ca.Function):
            syms = f.sx_in()
            state["sigma"] = f.call(syms)[0]
            state["output"] = syms[0] if state["output"] else None
        for k, v in state.items():
            object.__setattr__(self, k, v)

    @property
    def is_formula(self) -> bool:
        """Whether ``sigma`` is a formula (a CasADi expression)."""
        return isinstance(self.sigma, ca.SX)

    @property
    def scale(self) -> str:
        """The scale on which the noise is normal: ``"lin"``, ``"log"`` or ``"log10"``."""
        return DISTRIBUTIONS[self.distribution]

    @property
    def estimated(self) -> bool:
        """Whether ``sigma`` is estimated (unknown, or a noise parameter)."""
        return (self.sigma is None or self.is_formula
                or (isinstance(self.sigma, str) and self.sigma != "data"))

    def describe(self) -> str:
        """One phrase: the distribution and where sigma comes from."""
        if self.is_formula:
            where = f"sigma = {self.sigma} (a formula)"
        elif self.sigma is None:
            where = "sigma estimated"
        elif self.sigma == "data":
            where = "sigma per measurement (the data's)"
        elif isinstance(self.sigma, str):
            where = f"sigma = noise parameter {self.sigma!r}"
        else:
            where = f"sigma = {self.sigma:g} (known)"
        return f"{self.distribution}, {where}"


def log_scaled_model(model: Model, scales: Sequence[str]) -> Model:
    """``model`` with each output on its scale (``"lin"``, ``"log"``,
    ``"log10"``), named ``log(C)``: what a log-normal output's fit solves and
    predicts (:meth:`~picard_casadi.EstimationResult.from_json` rebuilds it
    from the names)."""
    y = model.y
    outs, names = [], []
    for k, s in enumerate(scales):
        if s == "lin":
            outs.append(y[k])
            names.append(model.y_names[k])
        else:
            # floored: the outputs are evaluated at every sample slot, also
            # where this one is not measured (a state 0 at t = 0), and a first
            # guess may put 0 where it is (Schwen's): log 0 would make the
            # objective NaN or infinite before the fit moves; a measured value
            # still at the floor at the estimate is said (floored_measurement)
            g = ca.fmax(y[k], LOG_FLOOR)
            outs.append(ca.log(g) if s == "log" else ca.log10(g))
            names.append(f"{s}({model.y_names[k]})")
    return model.with_outputs(ca.vertcat(*outs), y_names=names, scales=list(scales))


def output_scales(fitted_names: Sequence[str], names: Sequence[str]) -> list[str]:
    """Each output's scale in a fit from its name there (``log(C)`` of the
    model's ``C``, as :func:`log_scaled_model` names it): ``"log"``,
    ``"log10"`` or ``"lin"``; all ``"lin"`` where the counts differ."""
    if len(fitted_names) != len(names):
        return ["lin"] * len(names)
    return [next((sc for sc in ("log", "log10") if fitted == f"{sc}({name})"), "lin")
            for fitted, name in zip(fitted_names, names)]
