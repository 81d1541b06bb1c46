"""The discretisation certificate: is the estimate one of the ODE, or of its discretisation?

Every Picard method and IPOPT fit the collocation solution on the mesh, not
the ODE.  After a run converges, the fitted trajectory is held against an
accurate integration of the model (CVODES, ``rtol = 1e-10``) started on
every interval from the estimated interval start with the estimated ``p``
(:class:`~picard_casadi.transcription.interval_integration.IntervalIntegrator`):

* ``e`` : collocation output minus the accurate output at each sample
  (the local defect), ``d`` : the same at each interval's end;
* the end defects are carried along each experiment by the exact interval
  sensitivities ``E_j = d x_end,j / d x_j``: the model's own solution from
  the estimated ``x0`` differs from the fitted one at the start of interval
  ``j`` by ``D_j``, ``D_{j+1} = E_j D_j - d_j``, so the fitted outputs differ
  from the model's by ``delta = e - (d y / d x_j) D_j`` (first order);
* ``discretisation_error`` is the largest ``|delta|`` over the samples, in
  units of each output's noise level ``sigma_k`` (the fit's residual
  standard deviation, or ``1 / sqrt(w_k)`` when the weights are given or
  ``"auto"``; never below ``NOISE_FLOOR`` (1e-6) of the output's RMS, so
  exact data ask for a discretisation accurate to 1e-7, well above the
  accuracy of the reference integration, not for an exact one);
* the estimate's shift to the ODE's optimum: with ``r`` the weighted
  residuals and ``J = d r / d theta`` (``theta``: the parameters and the
  estimated initial states), replacing the fitted outputs by the model's
  moves the least-squares optimum by ``Delta = -(J^T J)^-1 J^T sqrt(w) delta``;
  ``parameter_shift`` is its length in standard errors,
  ``|J Delta| / s`` (the Mahalanobis distance under the estimate's own
  covariance ``s^2 (J^T J)^-1``).

* ``stopped_short``: how far the method's answer is from the optimum of
  what it fitted (:func:`.remaining_step.remaining_shift`, the Gauss-Newton
  step on the fitted residuals kept in the bounds, in standard errors): a method whose
  convergence test passed where its objective still falls.

* Once those pass, for a collocation method's answer, the model's own
  solution from the estimated initial states (:func:`model_check`, CVODES
  through each whole experiment with its sensitivities): ``model_error``,
  its departure from the fitted outputs in noise levels, and
  ``model_short``, how far its own objective falls along its own
  Gauss-Newton step, in standard errors.  They catch a fitted trajectory
  that every interval agrees with but no solution from ``x0`` follows.

* Along a model unstable along the data (the chained sensitivities grow
  past :data:`~.interval_information.GROWTH_LIMIT`), the end defects are not
  carried from ``x0``, where they grow with the model's modes: the shift and
  the model's nearest solution come from the linearised problem with every
  interval start an unknown, held by the continuity constraints
  (:func:`~.interval_information.interval_shift`), and the model's own
  solution from ``x0`` is not checked.

The certificate holds when ``discretisation_error <= DEFECT_THRESHOLD`` and
``parameter_shift <= SHIFT_THRESHOLD`` (both 0.1), and ``stopped_short <=
STOPPED_SHORT_THRESHOLD`` (5: a safety net for gross false stops, between the
largest value a legitimate answer of the test suite showed and a false stop's;
docs/certificate.md), and, where measured, ``model_error`` is at most
``max(DEFECT_THRESHOLD, MODEL_MARGIN * discretisation_error)``
(:func:`model_departs`) and ``model_short`` at most
``STOPPED_SHORT_THRESHOLD``.  Why 0.1: a shift of 0.1
standard errors leaves the coverage of a 95 % confidence interval at
94.9 % (``P(|Z + 0.1| < 1.96)``) and raises the ODE's sum of squares at the
estimate above its optimum by ``0.01 s^2``, a relative ``0.01 / (m - n)``:
1e-4 for 100 measurements, far below what the noise changes between data
sets.  A defect of 0.1 noise levels at the samples moves no fitted curve
visibly and changes the expected sum of squares by at most 1 %.

Where it fails, every interval gets an indicator (normalised by the
thresholds, so 1 means "alone enough to fail"): its largest local output
defect, the effect of its end defect on the next samples, and its own
contribution to ``Delta`` (``J_j^T e_j + L_{j+1}^T d_j``, with ``L`` the
adjoint of the propagation, in standard errors).  The mesh refinement
(:mod:`picard_casadi.transcription.mesh`) bisects the intervals whose indicator is at
least a tenth of the largest.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..transcription.interval_integration import interval_integrator
from ..transcription.predict import sample_outputs
from ..transcription.problem import Setup
from .interval_information import GROWTH_LIMIT, IntervalShift, chain_growth, interval_shift
from .remaining_step import best_step, remaining_shift
from .uncertainty import SolutionSensitivity, integrated_residuals, measured_rows

__all__ = ["Certificate", "certify", "certify_at", "resolution_check", "noise_levels",
           "MODEL_CHECK",
           "integrated_outputs", "stiffness_bound", "model_check", "model_departs",
           "short_of_optimum", "ADAMS_MAX_STIFFNESS", "DEFECT_THRESHOLD", "SHIFT_THRESHOLD",
           "STOPPED_SHORT_THRESHOLD", "TIGHTEST_RTOL", "NOISE_FLOOR", "MARK_FRACTION"]

DEFECT_THRESHOLD = 0.1  # noise levels
SHIFT_THRESHOLD = 0.1  # standard errors
#: the method's answer at most this many standard errors from the optimum of
#: what it fitted (:func:`.remaining_step.remaining_shift`); see the module doc
STOPPED_SHORT_THRESHOLD = 5.0
NOISE_FLOOR = 1e-6  # relative to each output's RMS
MARK_FRACTION = 0.1  # bisect intervals whose indicator is this fraction of the largest
RTOL = 1e-10
#: the reference integration is tightened (:func:`certify`) down to this
#: where its own error fails the certificate
TIGHTEST_RTOL = 1e-14
#: the accurate integration takes CVODES' Adams method (fewer, cheaper steps
#: at rtol 1e-10) where every interval's length times a bound of ``f_x``'s
#: spectral radius at its nodes (:func:`stiffness_bound`) is at most this;
#: BDF otherwise, where Adams fails, and on the sparse path (whose
#: sensitivities come without ``f_x``; docs/performance.md)
ADAMS_MAX_STIFFNESS = 20.0
#: Adams' step limit per output (BDF's is 100000): a model stiffer between the
#: nodes than at them reaches it soon and is integrated by BDF instead
ADAMS_MAX_STEPS = 5000
#: relative tolerance of the model's own solution and sensitivities in
#: :func:`model_check`: the accurate integration's.  Through a whole
#: experiment of an unstable model CVODES' errors grow with the solution's
#: modes (the book's unstable aircraft: 0.14 noise levels off the fitted
#: outputs at 1e-8, 0.043 at 1e-10, 0.042 at 1e-12); a departure above the
#: threshold is measured again at a hundredth of it, and counts only where
#: the two agree to MODEL_AGREEMENT
MODEL_RTOL = RTOL
MODEL_AGREEMENT = 0.1
#: a departure of the model's own solution fails the certificate where it is
#: above DEFECT_THRESHOLD and this many times the discretisation error the
#: interval measures carried to first order: it says that carrying missed
#: something, not that a defect just under the threshold came out just above
#: it (docs/certificate.md, measured over the test suite)
MODEL_MARGIN = 2.0
#: the most states of the sensitivity ODE (the model's states times one plus
#: the parameters and estimated initial states) :func:`model_check` solves;
#: beyond it the model's own solution is not checked, and the certificate says so
MODEL_MAX_STATES = 2000


@dataclass
class Certificate:
    """How far the estimate is from the ODE's, as the discretisation makes it.

    Attributes
    ----------
    passed : bool
        The three measures below their thresholds, and the model's own
        solution from ``x0`` within its own (:attr:`model_failed`).
    discretisation_error : float
        Largest ``|fitted output - model output|`` over the samples, in noise
        levels (model: accurate integration from the estimated ``x0``, ``p``).
    parameter_shift : float
        Estimated distance from the estimate to the ODE's optimum, in
        standard errors (``p`` and the estimated initial states together).
    p_shift : ndarray (np,)
        Estimated shift of ``p`` to the ODE's optimum.
    p_shift_se : ndarray (np,)
        The same in standard errors of each parameter.
    stopped_short : float
        How far the optimum of what the method fitted is from its answer, in
        standard errors (:func:`.remaining_step.remaining_shift`): a method
        that stopped before its own optimum, whatever its convergence test said.
    model_error : float
        The largest departure of the model's own solution from the
        estimated initial states (through each whole experiment) from the
        fitted outputs, in noise levels (:func:`model_check`); NaN where it
        was not measured (the message says why, or another measure failed).
    model_short : float
        How far the model's own objective falls from the answer along the
        Gauss-Newton step of its own derivatives, in standard errors
        (:func:`model_check`): a fixed point of the discretisation that is
        not one of the ODE, however close their values there; NaN where not
        measured.
    noise_level : ndarray (ny,)
        The ``sigma_k`` the defects are measured in (a value with its own
        ``sigma_i``, ``Experiment(sigma=...)``: ``sigma_k sigma_i``).
    ssr_model, weighted_ssr_model : float
        Sum of squared residuals (plain, and with the run's weights) of the
        model's own solution from the estimated ``x0`` and ``p`` (the
        accurate integration, with the end defects carried to first order).
    ssr_fitted : float
        The same of the solution the method fitted (the collocation solution).
    ssr_model_per_output : ndarray (ny,)
        ``ssr_model`` output by output, each value weighted by its own
        ``1 / sigma_i^2`` where the experiment gives one (the likelihood's
        noise levels).
    worst : str
        Where the largest defect is (experiment, time, output).
    indicator : ndarray (J,)
        Per interval, its defects over the thresholds (see the module doc).
    thresholds : dict
    message : str
    """

    passed: bool
    discretisation_error: float
    parameter_shift: float
    p_shift: np.ndarray
    p_shift_se: np.ndarray
    noise_level: np.ndarray
    ssr_model: float
    weighted_ssr_model: float
    ssr_fitted: float
    ssr_model_per_output: np.ndarray
    worst: str
    indicator: np.ndarray = field(repr=False)
    thresholds: dict[str, float] = field(default_factory=dict)
    message: str = ""
    stopped_short: float = 0.0
    model_error: float = np.nan
    model_short: float = np.nan
    #: how much the chained state sensitivities grow where the model is
    #: unstable along the data (the intervals held by continuity); 1 elsewhere
    unstable_growth: float = 1.0

    @property
    def model_failed(self) -> bool:
        """The model's own solution from the estimated initial states is not
        the fitted one, or its objective still falls (:func:`model_check`):
        the mesh resolves each interval, the answer is not the ODE's."""
        return bool(model_departs(self.model_error, self.discretisation_error)
                    or short_of_optimum(self.model_short))

    @property
    def discretisation_passed(self) -> bool:
        """The discretisation's two measures below their thresholds (the mesh
        resolves the model at the estimate); ``passed`` asks the method's own
        convergence too."""
        return bool(self.discretisation_error <= DEFECT_THRESHOLD
                    and self.parameter_shift <= SHIFT_THRESHOLD)

    def marked(self) -> np.ndarray:
        """Intervals to bisect: indicator at least ``MARK_FRACTION`` of the largest."""
        top = float(np.max(self.indicator, initial=0.0))
        if not np.isfinite(top):
            return ~np.isfinite(self.indicator) | (self.indicator >= 1.0)
        return self.indicator >= MARK_FRACTION * top

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (without the per-interval indicator)."""
        d = asdict(self)
        d.pop("indicator")
        return d


def noise_levels(setup: Setup, info: SolutionSensitivity, from_weights: bool) -> np.ndarray:
    """Each output's noise level ``sigma_k`` (see the module doc)."""
    disc = setup.disc
    with np.errstate(all="ignore"):
        if from_weights:
            sigma = 1.0 / np.sqrt(setup.tr.weights)
        else:
            count = disc.mask.sum(axis=(0, 2))
            dof = np.maximum(count - setup.free_p.sum() / max(disc.model.ny, 1), 1.0)
            sigma = np.sqrt(disc.weighted_ssr_per_output(info.sens["G"]) / dof)
    floor = NOISE_FLOOR * np.maximum(disc.output_rms(), 1e-300)
    return np.where(np.isfinite(sigma), np.maximum(sigma, floor), np.inf)


#: how a certificate whose accurate integration failed begins its message
INTEGRATION_FAILED = "the accurate integration of the intervals failed"


def _thresholds() -> dict[str, float]:
    """A certificate's thresholds, by the measure each applies to."""
    return {"discretisation_error": DEFECT_THRESHOLD, "parameter_shift": SHIFT_THRESHOLD,
            "stopped_short": STOPPED_SHORT_THRESHOLD}


def integration_failed(setup: Setup, info: SolutionSensitivity, from_weights: bool,
                       err: BaseException, sigma: np.ndarray | None = None) -> Certificate:
    """The failed certificate of an estimate whose intervals CVODES could not
    integrate (``err``: its error; Ctrl-C raises ``KeyboardInterrupt``);
    ``sigma``: the noise levels where known (:func:`noise_levels`)."""
    from ..runtime.interrupts import is_interrupt

    if is_interrupt(err):
        raise KeyboardInterrupt from None
    disc = setup.disc
    reason = str(err).strip().splitlines()[-1][:200] if str(err).strip() else "failed"
    return Certificate(
        passed=False, discretisation_error=np.inf, parameter_shift=np.inf,
        p_shift=np.full(disc.model.np, np.nan), p_shift_se=np.full(disc.model.np, np.nan),
        noise_level=noise_levels(setup, info, from_weights) if sigma is None else sigma,
        ssr_model=np.nan, weighted_ssr_model=np.nan,
        ssr_model_per_output=np.full(disc.model.ny, np.nan), ssr_fitted=np.nan, worst="",
        indicator=np.full(disc.n_intervals, np.inf), thresholds=_thresholds(),
        stopped_short=np.nan,
        message=f"{INTEGRATION_FAILED} ({reason})")


#: whether the certificate checks the model's own solution from x0 (its
#: costliest part: 41 % of an estimated delay's fit, whose intermediate rounds
#: skip it, estimation/delays.py)
MODEL_CHECK: ContextVar[bool] = ContextVar("model_check", default=True)


def certify(setup: Setup, X: np.ndarray, p: np.ndarray, info: SolutionSensitivity, *,
            from_weights: bool, fitted: tuple[np.ndarray, np.ndarray] | None = None,
            rtol: float = RTOL) -> Certificate:
    """The discretisation certificate of a converged solution, its reference
    integration tightened where that, not the solution, fails it.

    Where the discretisation's measures fail at ``rtol``, they are measured
    again with a reference 100 times tighter, and again while each round
    lowers ``discretisation_error`` tenfold (the reference's own error, which
    scales with its tolerance), down to :data:`TIGHTEST_RTOL`; the last
    round's certificate is returned.  An orbit over six revolutions (range-rate
    noise 1 mm/s): at 1e-10 CVODES drifts 30 m along the track, and a fit on
    80 intervals exact to the millimetre was "9.0 noise levels, 41 standard
    errors" off; 1.6 at 1e-11, 0.16 at 1e-12, 0.013 at 1e-13 (certified).
    Parameters and returns as :func:`certify_at`.
    """
    cert = certify_at(setup, X, p, info, from_weights=from_weights, fitted=fitted, rtol=rtol)
    while (not cert.discretisation_passed and np.isfinite(cert.discretisation_error)
           and rtol > TIGHTEST_RTOL * (1.0 + 1e-9)):
        rtol = max(rtol * 1e-2, TIGHTEST_RTOL)
        tighter = certify_at(setup, X, p, info, from_weights=from_weights, fitted=fitted,
                             rtol=rtol)
        reference_bound = tighter.discretisation_error <= 0.1 * cert.discretisation_error
        cert = tighter
        if not reference_bound:
            break
    return cert


def certify_at(setup: Setup, X: np.ndarray, p: np.ndarray, info: SolutionSensitivity, *,
               from_weights: bool, fitted: tuple[np.ndarray, np.ndarray] | None = None,
               rtol: float = RTOL) -> Certificate:
    """The discretisation certificate of a converged solution, its reference
    integrated at ``rtol``.

    Parameters
    ----------
    setup : Setup
        The run's problem (its discretisation and weights).
    X, p : ndarray
        Interval starts ``(J, nx)`` and parameters of the solution.
    info : SolutionSensitivity
        The solution's sensitivities (:func:`~picard_casadi.analysis.uncertainty.solution_sensitivity`).
    from_weights : bool
        Noise levels from the weights (given or ``"auto"``) instead of the residuals.
    fitted : (outputs (J, ny, M), end states (J, nx)), optional
        What the method fitted, when it is not the collocation solution
        (``method="shooting"``: its own integration).
    rtol : float
        Relative tolerance of the accurate integration.

    Returns
    -------
    Certificate
    """
    disc = setup.disc
    model = disc.model
    J, nx = disc.n_intervals, model.nx
    sens = info.sens
    G_fit, xend_fit = (sens["G"], sens["xend"]) if fitted is None else fitted
    sigma = noise_levels(setup, info, from_weights)
    thresholds = _thresholds()
    try:
        # f_x at the nodes comes with the dense path's sensitivities; the sparse
        # path's large models would pay as much for it as Adams saves: BDF there
        Fx = info.sens.get("Fx")
        method = ("adams" if Fx is not None
                  and stiffness_bound(setup, Fx) <= ADAMS_MAX_STIFFNESS else "bdf")
        try:
            G_ode, xend_ode = integrated_outputs(
                setup, X, p, rtol, method=method,
                **({"max_steps": ADAMS_MAX_STEPS} if method == "adams" else {}))
        except RuntimeError:
            if method == "bdf":
                raise
            G_ode, xend_ode = integrated_outputs(setup, X, p, rtol)  # BDF after all
    except RuntimeError as err:
        return integration_failed(setup, info, from_weights, err, sigma)
    mask = disc.mask > 0
    e = np.where(mask, G_fit - G_ode, 0.0)  # (J, ny, M)
    d = xend_fit - xend_ode  # (J, nx)
    dGx = sens["dG"][..., :nx]  # (J, M, ny, nx): outputs' derivative in x_j
    E = sens["dend"][:, :, :nx]  # (J, nx, nx)

    # the residual standard deviation (never below the noise floor's)
    Jt = info.Jt
    nth = Jt.shape[1]
    m_meas = Jt.shape[0]
    s2_fit = float(info.r @ info.r) / max(m_meas - nth, 1)
    counts = mask.sum(axis=(0, 2))
    s2_floor = float(np.sum(setup.tr.weights * (NOISE_FLOOR * disc.output_rms()) ** 2 * counts)
                     ) / max(m_meas, 1)
    s = np.sqrt(max(s2_fit, s2_floor, 1e-300))

    # the model's solution from the estimated x0: end defects carried forward
    # (along a model unstable along the data, interval by interval instead)
    growth = chain_growth(setup, sens)
    held = _held_by_continuity(setup, X, info, xend_fit, e, d, s, growth)
    if held is not None:
        delta = held.delta
    else:
        delta = np.empty_like(e)
        for sl in disc.intervals_of:
            D = np.zeros(nx)
            for j in range(sl.start, sl.stop):
                delta[j] = e[j] - np.einsum("moa,a->om", dGx[j], D)
                D = E[j] @ D - d[j]
        delta = np.where(mask, delta, 0.0)
    own_w = disc.sample_weights
    sample_sigma = disc.sample_sigma(sigma)  # each value's own noise level
    scaled = np.abs(delta) / sample_sigma
    if not np.all(np.isfinite(scaled)):
        scaled = np.where(np.isfinite(scaled), scaled, np.inf)
    defect = float(np.max(scaled, initial=0.0))
    j_w, k_w, s_w = np.unravel_index(int(np.argmax(scaled)), scaled.shape)
    worst = (f"experiment {disc.experiments[disc.exp_of[j_w]].name!r}, t = "
             f"{disc.sample_times[j_w, s_w]:.6g}, output {model.y_names[k_w]!r}")

    # the shift of the least-squares estimate, and each interval's part of it
    # the SVD of Jt's triangular factor: the same singular values and right
    # singular vectors, without the SVD's work on Jt's many rows (not taken
    # where the intervals held by continuity measured the shift)
    chained = bool(nth) and held is None
    _, sv, Vt = (np.linalg.svd(Jt.triangular() if m_meas > nth else Jt.dense(),
                               full_matrices=False) if chained else (None, np.zeros(0), None))
    keep = sv > 1e-12 * float(sv.max(initial=0.0)) if chained else np.zeros(0, bool)
    Vk = Vt[keep] if chained else np.zeros((0, nth))

    def in_standard_errors(g: np.ndarray, cols: np.ndarray | None = None,
                           V_cols: np.ndarray | None = None) -> float:
        """``sqrt(g^T (J^T J)^+ g) / s`` for ``g = J^T (residual change)``; where
        ``g`` is zero outside ``cols``, on those columns only (``V_cols``: the
        kept right singular vectors' entries there): an interval's own part
        touches its experiment's columns, and its cost no longer grows with
        the number of experiments (28 of 36 s of a 60-experiment certificate)."""
        if not nth:
            return 0.0
        proj = Vk @ g if cols is None else V_cols @ g[cols]
        return float(np.linalg.norm(proj / sv[keep])) / s

    grad = np.zeros(nth)
    g_fit = np.zeros(nth)  # the gradient of what the method fitted (stopped_short)
    for j in range(J):
        g_fit += Jt.rows_transposed(j, measured_rows(setup, j, (disc.y[j] - G_fit[j]).T))
    own = np.zeros(J)
    for ex, sl in enumerate(disc.intervals_of if held is None else ()):
        cols = Jt.columns[ex]  # the experiment's rows touch these columns only
        V_cols = Vk[:, cols]
        # adjoint of the propagation, after the experiment's end (on its columns)
        L = np.zeros((nx, cols.size))
        for j in range(sl.stop - 1, sl.start - 1, -1):
            g_j = Jt.rows_transposed(j, measured_rows(setup, j, e[j].T))
            g_j[cols] += L.T @ d[j]
            grad += g_j
            own[j] = in_standard_errors(g_j, cols, V_cols)
            L = measured_rows(setup, j, dGx[j]).T @ Jt.blocks[j] + E[j].T @ L
    # (through the chain on either route: held by continuity, the precision
    # floor hid how far an answer whose states blew up is from its optimum,
    # the unstable oscillator over 24 s from p0: 1.5 standard errors, where
    # the chain's 21.8 fails it)
    stopped_short = remaining_shift(setup, X, p, info, g_fit, s)
    if held is not None:
        shift, Delta = held.shift, held.theta_shift
        se_theta = held.theta_se
    else:
        shift = in_standard_errors(grad)
        Delta = -Vk.T @ ((Vk @ grad) / sv[keep] ** 2) if nth else np.zeros(0)
        se_theta = (s * np.sqrt(np.sum((Vk / sv[keep, None]) ** 2, axis=0)) if nth
                    else np.zeros(0))
    p_shift = np.zeros(model.np)
    p_shift_se = np.zeros(model.np)
    for k, (kind, _, i) in enumerate(info.columns):
        if kind == "p":
            p_shift[i] = Delta[k]
            p_shift_se[i] = abs(Delta[k]) / se_theta[k] if se_theta[k] > 0 else 0.0

    # where to refine: local defects, end defects at the next samples, own shift
    local, ahead = _local_indicators(disc, e, d, dGx, E, sample_sigma)
    with np.errstate(invalid="ignore"):
        indicator = np.maximum(np.maximum(local, ahead) / DEFECT_THRESHOLD,
                               own / SHIFT_THRESHOLD)
    indicator = np.where(np.isnan(indicator), np.inf, indicator)

    residual = np.where(mask, disc.y - G_fit + delta, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):  # (a diverging model: inf, said)
        squares = own_w * residual ** 2
        ssr_model = float(np.sum(residual ** 2))
        weighted_ssr_model = float(np.sum(setup.tr.weights[None, :, None] * squares))
    ssr_fitted = float(np.sum(np.where(mask, disc.y - G_fit, 0.0) ** 2))
    short = short_of_optimum(stopped_short)
    passed = bool(defect <= DEFECT_THRESHOLD and shift <= SHIFT_THRESHOLD and not short)
    message = (
        f"discretisation error {defect:.2g} noise levels (largest at {worst}), estimated "
        f"shift to the ODE's optimum {shift:.2g} standard errors; thresholds "
        f"{DEFECT_THRESHOLD:g} and {SHIFT_THRESHOLD:g}"
    )
    if short:
        message = (
            f"the method stopped short of its own optimum: the Gauss-Newton step from its "
            f"answer still moves it by {stopped_short:.3g} standard errors in the directions "
            f"the data determine (threshold {STOPPED_SHORT_THRESHOLD:g}), so its convergence "
            f"test was met where the objective still falls; {message}")
    model_error, model_short = np.nan, np.nan
    if held is not None:
        # from x0 round-off grows with the model's modes: the intervals held
        # by continuity are the check (docs/certificate.md)
        message += (f"; the model is unstable along the data (its sensitivities grow by "
                    f"{growth:.1e}): each interval was held to the model, joined by "
                    "continuity, and its own solution from x0 was not checked")
    elif passed and fitted is None and not MODEL_CHECK.get():
        message += "; the model's own solution from x0 was not checked (an intermediate round)"
    elif passed and fitted is None:
        # each interval agrees with the model: does the whole trajectory, and
        # do the derivatives? (a collocation method's)
        model_error, model_where, model_short, why_not = model_check(
            setup, X, p, info, s, G_fit, sample_sigma, defect, method)
        if model_departs(model_error, defect):
            passed = False
            message = (
                f"the model's own solution from the estimated initial states (CVODES through "
                f"each experiment) departs from the fitted one by {model_error:.2g} noise "
                f"levels (largest at {model_where}), though each interval agrees with it: "
                f"the fitted trajectory is not the model's; {message}")
        elif short_of_optimum(model_short):
            passed = False
            message = (
                f"the model's own objective (CVODES from the estimated initial states) falls "
                f"from the answer by {model_short:.3g} standard errors along the "
                f"Gauss-Newton step of its own derivatives (threshold "
                f"{STOPPED_SHORT_THRESHOLD:g}): the answer is a fixed point of the "
                f"discretisation, not of the ODE; {message}")
        elif why_not:
            message += f"; {why_not}"
    return Certificate(passed=passed, discretisation_error=defect, parameter_shift=shift,
                       p_shift=p_shift, p_shift_se=p_shift_se, noise_level=sigma,
                       ssr_model=ssr_model, weighted_ssr_model=weighted_ssr_model,
                       ssr_fitted=ssr_fitted,
                       ssr_model_per_output=squares.sum(axis=(0, 2)),
                       worst=worst, indicator=indicator,
                       thresholds=thresholds, message=message,
                       stopped_short=stopped_short, model_error=model_error,
                       model_short=model_short,
                       unstable_growth=float(growth) if held is not None else 1.0)


def _held_by_continuity(setup: Setup, X: np.ndarray, info: SolutionSensitivity,
                        xend_fit: np.ndarray, e: np.ndarray, d: np.ndarray, s: float,
                        growth: float) -> IntervalShift | None:
    """Where the chained sensitivities grow past :data:`GROWTH_LIMIT` (a model
    unstable along the data), the certificate's shift and the model's nearest
    solution interval by interval (:func:`interval_shift`); else None."""
    if not growth > GROWTH_LIMIT:
        return None
    n = setup.disc.n_intervals
    blocks = [measured_rows(setup, j, info.sens["dG"][j]) for j in range(n)]
    e_rows = [measured_rows(setup, j, e[j].T) for j in range(n)]
    gaps = np.zeros_like(d)
    gaps[:-1] = np.asarray(xend_fit, float)[:-1] - np.asarray(X, float)[1:]
    return interval_shift(setup, info.sens, blocks, info.columns, e, e_rows, d, gaps, s)


def model_check(setup: Setup, X: np.ndarray, p: np.ndarray, info: SolutionSensitivity,
                s: float, G_fit: np.ndarray, sample_sigma: np.ndarray, defect: float = 0.0,
                method: str = "bdf") -> tuple[float, str, float, str]:
    """The model's own solution from the estimated initial states, held
    against the fitted one: its departure, and how far its objective falls.

    The certificate's own measures integrate each interval from its fitted
    start and carry the end defects along to first order.  A collocation
    solution can pass them where the model's solution through the whole
    experiment is not the fitted one, or where their values agree and their
    derivatives in ``theta`` do not: a fed-batch's substrate fitted below
    ``-K_s``, the pole of its Monod rate, crossed between the nodes (each
    interval within 0.011 noise levels, the model from ``x0`` 2.1 noise levels
    off at the last samples, its objective 507 lower at its optimum).  Each
    experiment is integrated by CVODES from its estimated initial states
    with its forward sensitivities
    (:func:`~picard_casadi.analysis.uncertainty.integrated_residuals`):

    * ``model_error``: the largest departure of its outputs from the fitted
      ones, in noise levels (the certificate's ``discretisation_error``
      without the first-order carrying); it fails the certificate above
      ``max(DEFECT_THRESHOLD, MODEL_MARGIN * defect)``;
    * ``model_short``: the Gauss-Newton step of its own objective, kept in
      the box (:func:`.remaining_step.best_step`), integrated again: the
      measured decrease ``f(theta) - f(theta + d)`` as ``sqrt(2 decrease) /
      s``, in :func:`.remaining_step.remaining_shift`'s units.

    Parameters
    ----------
    setup : Setup
    X, p : ndarray
        The solution's interval starts and parameters.
    info : SolutionSensitivity
        The collocation's sensitivities (their rows and columns).
    s : float
        The residual standard deviation.
    G_fit : ndarray (J, ny, M)
        The fitted outputs.
    sample_sigma : ndarray (J, ny, M)
        Each value's noise level.
    defect : float
        The certificate's ``discretisation_error``.
    method : {"bdf", "adams"}
        CVODES' method first tried (BDF after it where it fails).

    Returns
    -------
    (float, str, float, str)
        ``model_error``, where it is largest, ``model_short`` and why they
        were not measured (NaN then, "" where they were).
    """
    disc = setup.disc
    m = disc.model
    firsts = [sl.start for sl in disc.intervals_of]
    x0 = np.asarray(X, float)[firsts]
    states = m.nx * (1 + m.np + int(setup.free_x[firsts].any(axis=0).sum()))
    if m.has_delays:
        return np.nan, "", np.nan, "the model's own solution was not checked (a model with delays)"
    if states > MODEL_MAX_STATES:
        return np.nan, "", np.nan, (
            f"the model's own solution was not checked (with its sensitivities, an ODE of "
            f"{states} states, more than {MODEL_MAX_STATES})")

    def integrate(x0_: np.ndarray, p_: np.ndarray, rtol: float = MODEL_RTOL
                  ) -> tuple[Any, ...] | None:
        atol = rtol * 1e-2 * float(np.min(setup.x_scale))
        with np.errstate(all="ignore"):
            for tried in dict.fromkeys((method, "bdf")):
                try:
                    G, r, J = integrated_residuals(
                        setup, x0_, p_, info.Jt, rtol, atol,
                        ADAMS_MAX_STEPS if tried == "adams" else 100000, tried)
                except RuntimeError:
                    continue
                if np.all(np.isfinite(r)) and all(np.all(np.isfinite(b)) for b in J.blocks):
                    return G, r, J
        return None

    at = integrate(x0, p)
    if at is None:
        return np.nan, "", np.nan, ("the model's own solution was not checked (CVODES failed "
                                    "from the estimated initial states)")
    G, r, J = at
    mask = disc.mask > 0

    def departure(G_model: np.ndarray) -> np.ndarray:
        return np.where(mask, np.abs(G_model - G_fit) / sample_sigma, 0.0)

    off = departure(G)
    error = float(np.max(off, initial=0.0))
    j_w, k_w, s_w = np.unravel_index(int(np.argmax(off)), off.shape)
    where = (f"experiment {disc.experiments[disc.exp_of[j_w]].name!r}, t = "
             f"{disc.sample_times[j_w, s_w]:.6g}, output {m.y_names[k_w]!r}")
    if model_departs(error, defect):
        tighter = integrate(x0, p, MODEL_RTOL * 1e-2)
        again = np.nan if tighter is None else float(np.max(departure(tighter[0]), initial=0.0))
        if not abs(again - error) <= MODEL_AGREEMENT * error:
            return np.nan, "", np.nan, (
                "the model's own solution was not checked (through the whole experiment it "
                "depends on CVODES' tolerance: an unstable model)")
        return error, where, np.nan, ""
    g = np.zeros(J.n)
    for j, rows in enumerate(info.rows):
        g += J.rows_transposed(j, r[rows])
    _, d = best_step(setup, X, p, replace(info, Jt=J), g)
    if not (d.size and np.all(np.isfinite(d)) and np.any(d)):
        return error, where, 0.0, ""
    p_new, x0_new = np.array(p, float), x0.copy()
    for k, (kind, e, i) in enumerate(info.columns):
        if kind == "p":
            p_new[i] += d[k]
        else:
            x0_new[e, i] += d[k]
    there = integrate(x0_new, p_new)
    if there is None:
        return error, where, 0.0, ""  # the step leaves where CVODES integrates: no descent seen
    decrease = 0.5 * float(r @ r) - 0.5 * float(there[1] @ there[1])
    return error, where, float(np.sqrt(2.0 * max(decrease, 0.0))) / s, ""


def model_departs(model_error: float, defect: float) -> bool:
    """Whether the model's own solution from ``x0`` departs from the fitted
    one (``model_error``, :func:`model_check`) by more than the certificate
    allows: above :data:`DEFECT_THRESHOLD` and :data:`MODEL_MARGIN` times
    the interval measures' ``defect``.  NaN (not measured) does not."""
    return bool(model_error > max(DEFECT_THRESHOLD, MODEL_MARGIN * defect))


def short_of_optimum(stopped_short: float) -> bool:
    """Whether a certificate's ``stopped_short`` fails it (above
    :data:`STOPPED_SHORT_THRESHOLD`): the one test of :func:`certify`, of the
    estimate's verdict and of its plateau diagnosis.  NaN, a certificate whose
    accurate integration failed (it says so instead), is not."""
    return bool(stopped_short > STOPPED_SHORT_THRESHOLD)


def _local_indicators(disc: Any, e: np.ndarray, d: np.ndarray, dGx: np.ndarray,
                      E: np.ndarray, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per interval, in noise levels (``sigma`` each value's, ``(J, ny, M)``): its
    largest output defect, and its end defect's effect on the next samples of
    its experiment."""
    mask = disc.mask > 0
    local = np.max(np.abs(e) / sigma, axis=(1, 2))
    ahead = np.zeros(disc.n_intervals)
    for sl in disc.intervals_of:
        for j in range(sl.start, sl.stop - 1):
            D = -d[j]
            for k in range(j + 1, sl.stop):
                if mask[k].any():
                    ahead[j] = float(np.max(np.abs(np.einsum("moa,a->om", dGx[k], D))
                                            * mask[k] / sigma[k]))
                    break
                D = E[k] @ D
    return local, ahead


def stiffness_bound(setup: Setup, Fx: np.ndarray) -> float:
    """``max_j h_j max_k |D^-1 f_x(u_jk) D|_inf``, ``D = diag(x_scale)``, from
    ``f_x`` at the nodes ``Fx`` ``(J, K, nx, nx)``: an upper bound of each
    interval's length times the spectral radius of ``f_x`` at its nodes (in
    the scaled states, where the bound is tighter; on the paper's models 3-16
    times the radius).  ``inf`` where not finite."""
    xs = setup.x_scale
    with np.errstate(all="ignore"):
        rows = np.matmul(np.abs(Fx), xs) / xs  # (J, K, nx): the row sums of |D^-1 f_x D|
        bound = float(np.max(setup.disc.h * rows.max(axis=(1, 2))))
    return bound if np.isfinite(bound) else np.inf


def integrated_outputs(setup: Setup, X: np.ndarray, p: np.ndarray, rtol: float,
                       atol: float | None = None, max_steps: int = 100000,
                       method: str = "bdf") -> tuple[np.ndarray, np.ndarray]:
    """Outputs at the samples ``(J, ny, M)`` and end states ``(J, nx)`` of a
    CVODES integration of every interval from ``X`` with ``p``.

    ``atol`` defaults to ``rtol / 100`` of the smallest state scale;
    ``method``: CVODES' ``"bdf"`` or ``"adams"``
    (:class:`~picard_casadi.transcription.interval_integration.IntervalIntegrator`).

    Raises
    ------
    RuntimeError
        When CVODES fails.
    """
    disc = setup.disc
    if atol is None:
        atol = rtol * 1e-2 * float(np.min(setup.x_scale))
    with np.errstate(all="ignore"):
        Xs, xend = interval_integrator(disc, rtol, atol, max_steps, method)(X, p)
        return sample_outputs(disc, Xs, p), xend


def resolution_check(setup: Setup, X: np.ndarray, U: np.ndarray, p: np.ndarray,
                     sigma: np.ndarray) -> tuple[np.ndarray | None, float]:
    """Does the mesh resolve the model at a point that is not a solution?

    After a method fails, the local defects (as in :func:`certify`, without
    the propagation and the shift, which need a solution) say whether the
    mesh is too coarse for the model at the last iterate.

    Parameters
    ----------
    setup : Setup
    X, U, p : ndarray
        The last iterate.
    sigma : ndarray (ny,)
        Noise levels (from the data, :func:`~picard_casadi.estimation.setup.initial_weights`).

    Returns
    -------
    marked : ndarray (J,) of bool, or None
        Intervals to bisect; ``None`` when the mesh resolves the model (or the
        accurate integration fails: the model, not the mesh, is the problem).
    largest : float
        The largest local defect, in noise levels.
    """
    disc = setup.disc
    nx = disc.model.nx
    with np.errstate(all="ignore"):
        sens = setup.tr.interval_sensitivities(X, setup.tr.nodes_np(U), p)
    try:
        G_ode, xend_ode = integrated_outputs(setup, X, p, RTOL)
    except RuntimeError:
        return None, np.inf
    e = np.where(disc.mask > 0, sens["G"] - G_ode, 0.0)
    local, ahead = _local_indicators(disc, e, sens["xend"] - xend_ode, sens["dG"][..., :nx],
                                     sens["dend"][:, :, :nx], disc.sample_sigma(sigma))
    indicator = np.maximum(local, ahead) / DEFECT_THRESHOLD
    indicator = np.where(np.isfinite(indicator), indicator, np.inf)
    top = float(np.max(indicator, initial=0.0))
    if top <= 1.0:
        return None, top * DEFECT_THRESHOLD
    marked = indicator >= (MARK_FRACTION * top if np.isfinite(top) else np.inf)
    return marked, top * DEFECT_THRESHOLD
