"""The estimation methods, one configuration each, behind one registry.

Every method receives the same :class:`~picard_casadi.methods.base.Setup`
(discretisation, transcription, bounds, scales, starting point), so a
comparison is a change of the ``method`` argument only.

Where each piece lives:

* ``base``: the setup every method receives, and the shared Picard
  iteration loop (``run_picard_iteration``) that takes a step rule;
* ``picard``: the paper's Algorithm 4, projected gradient steps
  (``method="picard"``);
* ``picard_gn``: ``method="picard-gn"``'s options, and the
  Levenberg-Marquardt step on the penalised residuals
  (``continuity="multiplier"``);
* ``condensed``: ``picard-gn``'s default step, Gauss-Newton with continuity
  as linearised constraints: the linearisation, the trust-region loop, the
  second-order correction; its parts:

  - ``condensing``: the continuity conditions eliminate the interval
    starts, leaving a small problem in ``(dp, dx0)``;
  - ``least_squares``: the dense bounded least-squares pieces (row
    compression, feasible start, working-set step, the active-set solve,
    stationarity);
  - ``newton_switch``: exact second derivatives, and when they replace
    Gauss-Newton's model;
  - ``pattern_move``: extrapolation along a valley crossed in a zigzag;
* ``single_shooting``: CVODES single shooting by a bounded Levenberg-Marquardt
  loop (the field's route, and the default path's fallback where the
  collocation's step fails far from the data);
* ``ipopt``, ``shooting``: the IPOPT comparisons on the same discretisation;
  the collocation NLP's parts:

  - ``collocation_layout``: its unknowns, and its data as NLP parameters;
  - ``collocation_derivatives``: its Hessian and constraint Jacobian,
    written interval by interval (generated code and the virtual machine);
* ``registry``: ``MethodSpec`` and ``register``, the table of methods;
* ``breakdown``: numerical failures inside a step or solve turned into an
  honest result.

May import: ``analysis``, ``transcription``, ``simulate``, ``runtime``,
``model``, ``experiment``, ``errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from .base import LoopOptions, LoopOutcome, Setup, run_picard_iteration
from .condensed import ConstrainedGaussNewtonStep
from .matrix_free import MatrixFreeGaussNewtonStep, use_cg
from .picard import PicardOptions, ProjectedGradientStep
from .picard_gn import CONTINUING_PENALTY, LevenbergMarquardtStep, PicardGNOptions
from .registry import METHODS, MethodSpec, register
from ..errors import closest

__all__ = ["METHODS", "MethodSpec", "get_method", "method_options"]


def _solve_picard(setup: Setup, opts: PicardOptions, callback=None) -> LoopOutcome:
    rule = ProjectedGradientStep(setup, opts.initial_step, opts.armijo, opts.max_backtracks)
    return run_picard_iteration(setup, rule, opts, callback)


def _solve_picard_gn(setup: Setup, opts: PicardGNOptions, callback=None) -> LoopOutcome:
    # a solve that continues a converged one starts with its penalty and its
    # step's model (Setup.penalty, Setup.newton)
    rho0 = max(2.0 * opts.lam, min(setup.penalty, CONTINUING_PENALTY))
    rules: list[ConstrainedGaussNewtonStep] = []

    def constrained() -> ConstrainedGaussNewtonStep:
        rule = ConstrainedGaussNewtonStep(setup, opts.mu0, opts.max_tries, rho0=rho0,
                                          radius0=opts.radius0, hessian=opts.hessian)
        if rules and rules[-1].switch.newton:
            rule.switch.newton = True  # rebuilt within the solve: the model it had
        rules.append(rule)
        return rule

    rebuilt = None  # the rule rebuilt where the states' scales grow (grown_scales)
    if opts.continuity == "constrained" and use_cg(opts, setup):
        rule = MatrixFreeGaussNewtonStep(setup, opts.mu0, opts.max_tries, rho0=rho0,
                                         radius0=opts.radius0)
        rules.append(rule)
    elif opts.continuity == "constrained":
        rule, rebuilt = constrained(), constrained
    else:
        rule = LevenbergMarquardtStep(setup, opts.mu0, opts.max_tries, opts.jacobian, opts.radius0)
    outcome = run_picard_iteration(setup, rule, opts, callback, rebuilt)
    if rules and outcome.success:
        setup.penalty = rules[-1].rho
        # every rule is a ConstrainedGaussNewtonStep (the matrix-free one subclasses it)
        setup.newton = rules[-1].switch.newton
    note = rule.fallback_note() if isinstance(rule, MatrixFreeGaussNewtonStep) else ""
    if note:
        outcome.notes.append(note)
    return outcome


register(MethodSpec(
    "picard", PicardOptions, _solve_picard,
    "the paper's Alg. 3/4: projected gradient steps with line search, relaxed Picard updates",
))
register(MethodSpec(
    "picard-gn", PicardGNOptions, _solve_picard_gn,
    "Picard iteration with structured Levenberg-Marquardt steps on (p, x_j)",
))


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; ValueError listing the valid names."""
    _load_optional_methods()
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(
            f"unknown method {name!r}; valid methods are: {', '.join(sorted(METHODS))}"
        )
    return METHODS[name]


def method_options(spec: MethodSpec, given: dict[str, Any], caller: str = "",
                   caller_names: Sequence[str] = ()) -> Any:
    """Build the method's options object, rejecting unknown names.

    ``caller`` and ``caller_names``: the function the options were passed to
    and its own arguments; an unknown name is then reported with both lists
    and the nearest valid name of either (``weight`` -> ``weights``).
    """
    valid = sorted(f.name for f in fields(spec.options))
    unknown = sorted(set(given) - set(valid))
    if unknown:
        hints = []
        for name in unknown:
            near = closest(name, [*caller_names, *valid])
            if near:
                hints.append(f"{name!r}: did you mean {near!r}?")
        hint = f" ({'; '.join(hints)})" if hints else ""
        if caller:
            raise TypeError(
                f"{caller}() got unknown option(s) {unknown}{hint}; {caller}'s own arguments "
                f"are: {', '.join(caller_names)}; method {spec.name!r} also takes: "
                f"{', '.join(valid)}")
        raise TypeError(f"method {spec.name!r} got unknown option(s) {unknown}{hint}; valid "
                        f"options are: {', '.join(valid)}")
    opts = spec.options(**given)
    opts.validate()
    return opts


_loaded = False


def _load_optional_methods() -> None:
    """Import the modules that register more methods (IPOPT, shooting, single shooting)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import importlib

    for mod in ("ipopt", "shooting", "single_shooting"):
        try:
            importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{mod}":
                raise


__all__ += ["LoopOptions", "Setup", "register"]
