"""Figures: fit versus data, convergence history, the method comparison, profiles.

All functions draw with matplotlib's non-interactive ``Agg`` backend and
return the figure; pass ``path`` to save it as PNG.
"""

from __future__ import annotations

import re
import textwrap

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from ..analysis.significant_digits import digits_beside, shown as shown_to  # noqa: E402
from ..experiment import Experiment  # noqa: E402
from ..model import Model  # noqa: E402
from ..noise import output_scales  # noqa: E402
from ..result import EstimationResult  # noqa: E402

__all__ = ["plot_fit", "plot_convergence", "plot_comparison", "plot_profile", "plot_prediction"]


def _label(name: str, unit: str) -> str:
    return f"{name} [{unit}]" if unit else name


def _on_scale(values: np.ndarray, scale: str) -> np.ndarray:
    """``values`` on ``scale`` (NaN where a log scale has no value)."""
    if scale == "lin":
        return values
    positive = np.where(values > 0, values, np.nan)
    return np.log(positive) if scale == "log" else np.log10(positive)


def _limit_to(ax: plt.Axes, values: np.ndarray) -> None:
    """The y axis of ``ax`` around the finite ``values``, with a margin."""
    values = values[np.isfinite(values)]
    if values.size:
        lo, hi = float(values.min()), float(values.max())
        pad = 0.1 * (hi - lo) if hi > lo else 0.5
        ax.set_ylim(lo - pad, hi + pad)


def _far_beyond(line: np.ndarray, anchor: np.ndarray) -> bool:
    """Whether the finite ``line`` leaves the range of the finite ``anchor`` by
    more than that range (or than 1 where the range is 0)."""
    line, anchor = line[np.isfinite(line)], anchor[np.isfinite(anchor)]
    if not (line.size and anchor.size):
        return False
    lo, hi = float(anchor.min()), float(anchor.max())
    pad = hi - lo if hi > lo else 1.0
    return bool(line.min() < lo - pad or line.max() > hi + pad)


def _grid(n: int) -> tuple[int, int]:
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    return int(np.ceil(n / cols)), cols


def _short(message: str, limit: int = 90) -> str:
    """The first clause of a message (up to ``:``, ``;`` or ``.``), at most ``limit``
    characters."""
    text = " ".join(str(message).split())
    cuts = [text.find(stop) for stop in (": ", "; ", " (see ", ". ")]
    cuts = [c for c in cuts if c > 15]
    if cuts and min(cuts) <= limit:
        return text[:min(cuts)]
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def plot_fit(result: EstimationResult, model: Model, experiments: Sequence[Experiment],
             experiment: int | Sequence[int] | None = None, path: str | Path | None = None,
             title: str | None = None, dense: int = 400, residuals: bool = True,
             columns: int = 4, inputs: bool = True, band: bool = True) -> plt.Figure:
    """Measured outputs (dots), the fitted model's outputs (lines) and the residuals.

    One column per experiment (at most ``columns`` side by side, spread evenly
    over the rows of panels they need), and for each output it measures
    (every output, where it measures none) a panel of data and fit with,
    below it, a panel of the residuals ``data - fit`` at the sample times.
    The lines are CVODES simulations from the estimated ``x0`` with the
    estimated ``p``.  A model with inputs gets, at the foot of each
    experiment's column, panels of the inputs that drove the fit, as the
    estimation reads them (samples held or interpolated as the experiment
    says, a callable as it returns): inputs of one unit and a like size
    share a panel; inputs that stay zero are left out.  The title gives the
    verdict: a result with ``success`` False is titled ``FAILED: <message>``
    in red.  Each panel's ``gid`` is ``"fit:<e>:<k>"``,
    ``"residual:<e>:<k>"`` (experiment index, output index) or
    ``"input:<e>:<g>"`` (its ``g``-th panel of inputs), for scripts and tests.

    Parameters
    ----------
    result : EstimationResult
    model : Model
    experiments : sequence of Experiment
    experiment : int or sequence of int, optional
        Which experiments to draw (default: every one).
    path : str or Path, optional
        Save as PNG here.
    title : str, optional
        The first title line (default: model, method and verdict).
    dense : int
        Points of the simulated line.
    residuals : bool
        Draw the residual panels.
    columns : int
        Most experiments side by side (5 experiments: 3 and 2).
    inputs : bool
        Draw the input panels (a model with inputs only).
    band : bool
        Shade the fit's 95 % confidence band (:func:`~picard_casadi.prediction_band`)
        where the result has one (standard errors, every quantity determined).
    """
    if experiment is None:
        chosen = list(range(len(experiments)))
    elif isinstance(experiment, (int, np.integer)):
        chosen = [int(experiment)]
    else:
        chosen = [int(e) for e in experiment]
    # each experiment's panels: the outputs it measures (all, where it measures
    # none), top down; PEtab's Bruno measures one to three of its five outputs
    # per condition, and 19 of its 30 panels had no data
    measured = {e: [k for k in range(model.ny) if np.any(np.isfinite(experiments[e].y[:, k]))]
                or list(range(model.ny)) for e in chosen}
    every = all(len(ks) == model.ny for ks in measured.values())
    # as few strips of panels as ``columns`` allows, the experiments spread evenly
    strips = max(1, int(np.ceil(len(chosen) / max(1, int(columns)))))
    cols = max(1, int(np.ceil(len(chosen) / strips)))
    # each strip as many panels high as its experiments need
    tall = [max(len(measured[e]) for e in chosen[b * cols:(b + 1) * cols])
            for b in range(strips)]
    per_output = 2 if residuals else 1
    # the inputs' panels close each strip, below its tallest column: inputs of
    # one unit and a like size share a panel (_input_groups)
    with_inputs = bool(inputs) and model.nu > 0
    # each experiment's dense time grid (with its samples): the fit's line and the inputs
    t_dense = {e: np.union1d(np.linspace(experiments[e].t0, experiments[e].t_end, dense),
                             experiments[e].t) for e in chosen}
    groups = {e: _input_groups(model, experiments[e], t_dense[e]) if with_inputs else None
              for e in chosen}
    input_rows = [max(len(groups[e][1]) for e in chosen[b * cols:(b + 1) * cols])
                  if with_inputs else 0 for b in range(strips)]
    strip_rows = [h * per_output + k for h, k in zip(tall, input_rows)]
    first_row = np.concatenate([[0], np.cumsum(strip_rows)[:-1]]).astype(int)
    ratios: list[float] = []
    for h, k in zip(tall, input_rows):
        ratios += ([2.2, 1.0] if residuals else [2.2]) * h + [1.0] * k
    fit_h, res_h = (1.9, 0.85) if max(tall) <= 3 else (1.5, 0.7)
    height = (sum(tall) * (fit_h + (res_h if residuals else 0.0)) + 0.95 * sum(input_rows)
              + 1.4)
    fig = plt.figure(figsize=(max(6.4, 3.9 * cols + 0.6), height), layout="constrained")
    grid = fig.add_gridspec(len(ratios), cols, height_ratios=ratios)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # a log-normal output's fit is its logarithm, log(C): the data drawn so too
    scales = output_scales(list(result.y_names or []), model.y_names)
    noise_models = [str(m) for m in result.settings.get("noise_model") or []]
    noise_models += [""] * (model.ny - len(noise_models))
    failed_sim = []
    banded = False
    for n, e in enumerate(chosen):
        exp = experiments[e]
        strip, col = divmod(n, cols)
        t_all = t_dense[e]
        why = ""
        try:
            Y_all = result.predict(e, t_all)
        except Exception as err:  # a simulation can fail far from the optimum
            Y_all = None
            failed_sim.append(exp.name)
            # the reason in the panel (an empty panel gave none anywhere)
            reason = re.sub(r"^simulation of model '[^']*' ", "", " ".join(str(err).split()))
            why = "\n".join(textwrap.wrap(textwrap.shorten(reason, 160), 44))
        at_samples = np.searchsorted(t_all, exp.t)
        # the band's half-width (None: no band)
        spread = _band(result, model, e, t_all) if band and Y_all is not None else None
        # measured at its steady state only (t = t0 after a preequilibration)
        steady = exp.t_end == exp.t0
        fit_ax = None
        last = len(measured[e]) - 1
        labelled = col == 0 or not every  # each panel names its output where they differ
        for i, k in enumerate(measured[e]):
            row = int(first_row[strip]) + i * per_output
            fit_ax = fig.add_subplot(grid[row, col], sharex=fit_ax)
            fit_ax.set_gid(f"fit:{e}:{k}")
            colour = colours[k % len(colours)]
            data = _on_scale(exp.y[:, k], scales[k])
            fit_ax.plot(exp.t, data, "o", ms=2.8, color=colour, alpha=0.6, label="data")
            if Y_all is not None and steady:  # one time: the fit a level across
                fit_ax.axhline(Y_all[0, k], lw=1.5, color="0.15", label="fit")
            elif Y_all is not None:
                fit_ax.plot(t_all, Y_all[:, k], "-", lw=1.5, color="0.15", label="fit")
            if spread is not None and not steady:
                banded = True
                fit_ax.fill_between(t_all, Y_all[:, k] - spread[:, k], Y_all[:, k] + spread[:, k],
                                    color="0.15", alpha=0.18, lw=0,
                                    label="95 % confidence band")
            if Y_all is not None and not steady:
                # the log of a state starting at 0 (an oral dose's central
                # compartment; a PEtab log-normal observable, measured from
                # t = 2 on) dives towards -690 where it is not measured: far
                # beyond the data, the data's range sets the axis (with a band
                # or without: a lag fit's, which has none, reached -345)
                anchor = np.r_[data, Y_all[at_samples[np.isfinite(data)], k]]
                if _far_beyond(Y_all[:, k], anchor):
                    _limit_to(fit_ax, anchor)
            if i == 0:
                fit_ax.set_title(exp.name, fontsize=9)
            if labelled:
                shown = _label(model.y_names[k], model.y_units[k])
                fit_ax.set_ylabel(shown if scales[k] == "lin" else f"{scales[k]}({shown})",
                                  fontsize=8)
            fit_ax.tick_params(labelsize=7, labelbottom=not residuals and i == last
                               and not with_inputs)
            fit_ax.grid(alpha=0.3)
            if Y_all is None:
                fit_ax.text(0.5, 0.5, "simulation failed" + (f":\n{why}" if why else ""),
                            transform=fit_ax.transAxes, ha="center", va="center", color="C3",
                            fontsize=7)
            if residuals:
                res_ax = fig.add_subplot(grid[row + 1, col], sharex=fit_ax)
                res_ax.set_gid(f"residual:{e}:{k}")
                res_ax.axhline(0.0, color="0.3", lw=0.8)
                if Y_all is not None:
                    r = data - Y_all[at_samples, k]
                    res_ax.plot(exp.t, r, "o", ms=2.2, color=colour, alpha=0.8,
                                label="residual (data - fit)")
                if labelled:
                    # (a noise formula's sigma differs by sample: no one value)
                    sigma = (f"\n\u03c3 {result.noise_sigma[k]:.3g}"
                             if result.noise_sigma is not None
                             and k < np.size(result.noise_sigma)
                             and "(a formula)" not in noise_models[k] else "")
                    res_ax.set_ylabel((_label("residual", model.y_units[k]) if scales[k] == "lin"
                                       else f"residual ({scales[k]})") + sigma, fontsize=8)
                res_ax.tick_params(labelsize=7, labelbottom=i == last and not with_inputs)
                res_ax.grid(alpha=0.3)
                bottom = res_ax
            else:
                bottom = fit_ax
            if i == last and not with_inputs:
                bottom.set_xlabel("at the steady state" if steady else
                                  _label("time", model.t_unit), fontsize=8)
        if with_inputs:
            values, sets = groups[e]
            below = int(first_row[strip]) + tall[strip] * per_output
            for g, shown in enumerate(sets):
                ax = fig.add_subplot(grid[below + g, col], sharex=fit_ax)
                _input_panel(ax, model, e, g, t_all, values, shown, labelled=col == 0,
                             colours=colours, silent=None if g < len(sets) - 1 else [
                                 j for j in range(model.nu) if not any(j in c for c in sets)])
    dot = colours[0] if model.ny == 1 else "0.45"  # several outputs: each its own colour
    handles = [plt.Line2D([], [], marker="o", ls="", ms=4, color=dot, alpha=0.6),
               plt.Line2D([], [], color="0.15", lw=1.5)]
    labels = ["data", "fit: simulated from the estimate"]
    if banded:
        handles.append(plt.Rectangle((0, 0), 1, 1, color="0.15", alpha=0.18, lw=0))
        labels.append("95 % confidence band of the fit")
    if residuals:
        handles.append(plt.Line2D([], [], marker="o", ls="", ms=3.5, color=dot))
        labels.append("residual: data - fit")
    # (four entries ran off both edges of one column of panels)
    fig.legend(handles, labels, loc="outside lower center",
               ncol=len(labels) if cols > 1 or len(labels) < 4 else 2, fontsize=8,
               frameon=False)
    shown = list(zip(result.p_names, result.p))[:8]
    est = ", ".join(f"{n}={v:.4g}" for n, v in shown) + (" ..." if result.p.size > 8 else "")
    width_chars = int(fig.get_figwidth() * 11)  # about 11 characters per inch at 10 pt
    if result.fit_flagged:  # converged, with a FitWarning: the title says so
        head = (f"{title or f'{model.name}: {result.method} fit'}\n"
                "converged, but the fit is flagged: see the warnings")
        colour = "#b35900"
    elif result.success:
        head = title or f"{model.name}: {result.method} fit, converged"
        colour = "black"
    else:
        verdict = f"FAILED: {_short(result.message, width_chars - 8) or result.status}"
        head = f"{title or f'{model.name}: {result.method} fit'}\n{verdict}"
        colour = "#c00000"
    if np.isfinite(result.nllh):
        how = result.settings.get("noise")  # (a PEtab user's two estimated read "given")
        noise = ("estimated" if how == "estimated" else "partly estimated" if how == "mixed"
                 else "given")
        est += f";  -log likelihood {result.nllh:.6g} (noise \u03c3 {noise})"
    if failed_sim:
        est += f"  (simulation failed: {', '.join(failed_sim)})"
    # the estimate line wrapped to the figure's width (eight parameters of
    # PEtab's Boehm problem ran off both edges)
    fig.suptitle(f"{head}\n" + "\n".join(textwrap.wrap(est, max(40, width_chars))),
                 fontsize=10, color=colour)
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig


#: fit.png's band: its standard deviations at this many times, interpolated
#: between them (each output time costs the sensitivities' integration: the
#: CMG's four experiments took 11 s at the line's 700 times, 2 s at 50)
BAND_TIMES = 50
#: ... and none where the sensitivity ODE would have more states than this
#: (states times parameters and initial states: its Jacobian is dense)
BAND_STATES = 2000


def _band(result: EstimationResult, model: Model, e: int, t: np.ndarray) -> Any:
    """The half-width of the 95 % confidence band of experiment ``e``'s fit
    at ``t`` ``(len(t), ny)``, or None where the result has none (no standard errors,
    delays, a failed sensitivity integration, a sensitivity ODE over
    :data:`BAND_STATES`); NaN where it is unbounded."""
    from ..analysis.prediction_band import prediction_band

    columns = (getattr(result, "_covariance", None) or ([],))[0]
    if model.nx * (1 + len(columns)) > BAND_STATES:
        return None
    coarse = np.linspace(t[0], t[-1], BAND_TIMES) if t.size > BAND_TIMES else t
    try:
        found = prediction_band(result, e, coarse)
    except (ValueError, RuntimeError, ArithmeticError):
        return None
    half = np.column_stack([np.interp(t, coarse, found.upper[:, k] - found.y[:, k])
                            for k in range(found.y.shape[1])])
    return np.where(np.isfinite(half), half, np.nan)  # unbounded: not shaded


#: inputs whose largest sizes differ more than this share no panel (the
#: HFB-320's elevator, 0.1 rad, drew as a flat line beside its thrust, 1e4 N)
INPUT_SIZE_RATIO = 20.0


def _input_groups(model: Model, exp: Experiment, t: np.ndarray
                  ) -> tuple[np.ndarray | None, list[list[int]]]:
    """Experiment ``exp``'s inputs at the times ``t``, as the estimation reads
    them, and the panels they share: of one unit and sizes within
    :data:`INPUT_SIZE_RATIO` of each other, largest first; at least one panel.
    Inputs that stay zero are in none; the values are None where they cannot
    be evaluated (a callable's own error, which the fit reported)."""
    try:
        values = exp.inputs(t, model.nu)
    except Exception:  # noqa: BLE001
        return None, [[]]
    size = np.max(np.abs(values), axis=0)
    sets: list[list[int]] = []
    for j in sorted(np.flatnonzero(size > 0), key=lambda j: -size[j]):
        for shown in sets:
            if (model.u_units[shown[0]] == model.u_units[j]
                    and size[shown[0]] <= INPUT_SIZE_RATIO * size[j]):
                shown.append(int(j))
                break
        else:
            sets.append([int(j)])
    return values, sets or [[]]


def _input_panel(ax: plt.Axes, model: Model, e: int, g: int, t: np.ndarray,
                 values: np.ndarray | None, shown: list[int], labelled: bool,
                 colours: list[str], silent: list[int] | None) -> None:
    """A panel of experiment ``e``'s inputs ``shown`` (its ``g``-th): on the
    dense grid, so a held input shows as its steps.  ``silent``: in the
    experiment's last panel (the one with the time axis), the inputs that
    stay zero, named there; None in the others."""
    last = silent is not None
    ax.set_gid(f"input:{e}:{g}")
    if values is None:
        ax.text(0.5, 0.5, "inputs not evaluated", transform=ax.transAxes, ha="center",
                va="center", color="C3", fontsize=8)
    for j in shown:
        ax.plot(t, values[:, j], lw=1.2, color=colours[(j + 3) % len(colours)],
                label=_label(model.u_names[j], model.u_units[j]))
    if values is not None and silent and model.nu > 1:
        # named, so a missing line is not taken for a lost one
        names = [model.u_names[j] for j in silent]
        text = ("every input 0" if len(names) == model.nu else
                "0 throughout: " + (", ".join(names) if len(names) <= 4
                                    else f"{len(names)} inputs"))
        ax.text(0.01, 0.04, text, transform=ax.transAxes, fontsize=6, color="0.35")
    if len(shown) > 1:
        ax.legend(fontsize=6, loc="upper right", frameon=False, ncol=min(len(shown), 4))
    if labelled or len(shown) == 1:
        ax.set_ylabel(_label(model.u_names[shown[0]], model.u_units[shown[0]])
                      if len(shown) == 1 else "inputs", fontsize=8)
    ax.tick_params(labelsize=7, labelbottom=last)
    ax.grid(alpha=0.3)
    if last:
        ax.set_xlabel(_label("time", model.t_unit), fontsize=8)


def plot_convergence(result: EstimationResult, path: str | Path | None = None) -> plt.Figure:
    """Objective, gradient norm and continuity gap per iteration, on log axes.

    A run of several solves (weight rounds, refined meshes) restarts its
    iteration count in each: the iterations are drawn one after another, each
    solve its own segment, with a dotted line where the next one starts.
    """
    h = result.history
    fig, ax = plt.subplots(figsize=(8.4, 3.8))
    if not h:
        ax.text(0.5, 0.5, "no iteration history", ha="center", va="center")
    else:
        within = np.asarray(h["iteration"])
        it = np.arange(1, within.size + 1)  # over the whole run
        starts = np.flatnonzero(np.diff(within) <= 0) + 1  # where a solve begins again
        pieces = np.split(np.arange(within.size), starts)
        for key, label in (("objective", "objective"), ("misfit", "data misfit"),
                           ("grad_norm", "gradient norm (scaled)"),
                           ("gap", "continuity gap")):
            vals = np.asarray(h.get(key, []), float)
            if vals.size == 0 or not np.any(np.isfinite(vals)):
                continue
            ok = np.isfinite(vals) & (vals > 0)
            color = None
            for k, piece in enumerate(pieces):
                piece = piece[ok[piece]]
                line, = ax.semilogy(it[piece], vals[piece], lw=1.5, color=color,
                                    marker="o" if piece.size == 1 else None, ms=3,
                                    label=label if k == 0 else None)
                color = line.get_color()
        for n, k in enumerate(starts):
            # a weight round, a refined mesh, a search's continuation or a second run
            ax.axvline(it[k] - 0.5, color="0.6", ls=":", lw=1,
                       label="a solve starts (new weights, mesh or method)" if n == 0
                       else None)
        ax.set_xlabel("iteration (all solves)" if starts.size else "iteration")
        ax.set_ylabel("value (log scale; the legend names each)")
        ax.grid(alpha=0.3, which="both")
        # beside the axes: inside, it hid the late iterations
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    status = "converged" if result.success else f"NOT converged ({result.status})"
    ax.set_title(f"{result.method}: {status}, {result.iterations} iterations", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig


def _comparison_mark(row: dict[str, Any]) -> str:
    """A comparison bar's hatch: ``"///"`` for a run that did not converge,
    ``".."`` for one that converged to a flagged fit or an estimate not
    certified (a user's IPOPT row at 150 times the others' misfit looked as
    clean as theirs), ``""`` for the rest."""
    if not row.get("success", True):
        return "///"
    if row.get("fit_warnings") or row.get("certified") is False:
        return ".."
    return ""


def plot_comparison(rows: Sequence[dict[str, Any]], path: str | Path | None = None) -> plt.Figure:
    """Solve time and relative error (or data misfit) per method and problem.

    Parameters
    ----------
    rows : sequence of dict
        With keys ``problem``, ``method``, ``solve_time``, ``rel_error``,
        ``misfit`` and ``success`` (as :func:`picard_casadi.studies.compare.compare`
        returns); runs that did not converge are hatched, and runs that
        converged to a flagged fit (``fit_warnings``) or an uncertified
        estimate (``certified`` False) dotted.  Where
        a problem has no truth (``rel_error`` None: measured data), a panel
        of the data misfit ``SSR / (2 N)`` is drawn as well (in place of the
        error panel when no problem has a truth).
    """
    def known(v: Any) -> bool:
        return v is not None and bool(np.isfinite(v))

    problems = list(dict.fromkeys(r["problem"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    panels = [("solve_time", "solve time [s] (wall clock; median of the repeats)", 1.0)]
    if any(known(r.get("rel_error")) for r in rows):
        panels.append(("rel_error", "relative error to truth [%]", 100.0))
    if any(not known(r.get("rel_error")) for r in rows):
        panels.append(("misfit", "data misfit SSR / (2 N)", 1.0))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    axes = axes[0]
    width = 0.8 / max(len(methods), 1)
    x = np.arange(len(problems))
    for i, m in enumerate(methods):
        for ax, (key, _, factor) in zip(axes, panels):
            values, marks = [], []
            for p in problems:
                match = [r for r in rows if r["problem"] == p and r["method"] == m]
                v = match[0].get(key) if match else None
                values.append(float(v) * factor if known(v) else np.nan)
                marks.append(_comparison_mark(match[0]) if match else "")
            bars = ax.bar(x + i * width, values, width, label=m)
            for bar, mark in zip(bars, marks):
                if mark:  # not converged: hatched; flagged or not certified: dotted
                    bar.set_hatch(mark)
                    bar.set_edgecolor("white")
    shown_marks = {_comparison_mark(r) for r in rows}
    for ax, (key, ylabel, factor) in zip(axes, panels):
        ax.set_xticks(x + width * (len(methods) - 1) / 2)
        ax.set_xticklabels(problems, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_yscale("log")
        ax.grid(alpha=0.3, axis="y", which="both")
        shown = [float(r[key]) * factor for r in rows
                 if known(r.get(key)) and float(r[key]) * factor > 0]
        if shown and max(shown) < 10.0 * min(shown):
            # at least a decade: autoscaled, equal misfits (1e-10 apart) looked
            # like bars of very different heights
            ax.set_ylim(min(shown) / 3.0, max(shown) * 3.0)
    from matplotlib.patches import Patch

    handles = [Patch(color=f"C{i % 10}", label=m) for i, m in enumerate(methods)]
    if "///" in shown_marks:
        handles.append(Patch(facecolor="0.6", hatch="///", edgecolor="white",
                             label="did not converge"))
    if ".." in shown_marks:
        handles.append(Patch(facecolor="0.6", hatch="..", edgecolor="white",
                             label="converged: fit flagged or not certified"))
    axes[0].legend(handles=handles, fontsize=8)
    fig.suptitle("method comparison (same data, start, bounds and discretisation)", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig


def plot_profile(prof: Any, parameters: Sequence[int], path: str | Path | None = None
                 ) -> plt.Figure:
    """Profile likelihoods (:class:`~picard_casadi.studies.profile.Profile`), one panel each.

    Each panel: the profile statistic at the computed points (``2 (nllh(c) -
    nllh)`` for a likelihood profile, else ``(PL(c) - WSSR) / s^2``), the
    threshold, the profile interval (vertical lines, an arrow where it is
    open), the Wald parabola ``((c - estimate) / std)^2`` and the Wald
    interval (``p_ci``, a bar on the axis).

    Parameters
    ----------
    prof : Profile
    parameters : sequence of int
        Indices of the parameters to draw.
    path : str or Path, optional
        Save as PNG here.
    """
    n = max(len(parameters), 1)
    rows, cols = _grid(n)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    pct = f"{100 * prof.confidence:g} %"
    for ax in axes.ravel()[len(parameters):]:
        ax.set_visible(False)
    for ax, i in zip(axes.ravel(), parameters):
        path_i = prof.paths[i]
        c, stat = path_i.values, path_i.statistic
        ax.plot(c, stat, "o-", ms=3.5, lw=1.4, color="C0", label="profile")
        ax.axhline(prof.threshold, color="C3", lw=1.0, ls="--",
                   label=f"threshold {prof.threshold:.3g} ({prof.statistic_name})")
        theta = prof.estimate[i]
        top = max(1.6 * prof.threshold, float(np.nanmax(stat)) if stat.size else 0.0)
        lo, hi = prof.intervals[i]
        for end, sign in ((lo, -1), (hi, 1)):
            if np.isfinite(end):
                ax.axvline(end, color="C0", lw=0.9, alpha=0.7)
            else:
                edge = c.min() if sign < 0 else c.max()
                ax.annotate("open", xy=(edge, prof.threshold), fontsize=8, color="C0",
                            ha="right" if sign < 0 else "left", va="bottom")
        if prof.std is not None and np.isfinite(prof.std[i]) and prof.std[i] > 0:
            grid = np.linspace(c.min(), c.max(), 200)
            ax.plot(grid, ((grid - theta) / prof.std[i]) ** 2, color="0.5", lw=1.0, ls=":",
                    label="Wald (quadratic)")
        if prof.wald is not None and np.all(np.isfinite(prof.wald[i])):
            ax.plot(prof.wald[i], [0.02 * top] * 2, "|-", color="0.35", lw=2.5, ms=10,
                    label=f"Wald {pct} (p_ci)")
        ax.plot([theta], [0.0], "k*", ms=8, label="estimate")
        ax.set_ylim(-0.04 * top, top)
        if c.size > 1 and c.max() > c.min():
            # the profile's range sets the axis; a Wald interval many times
            # wider (+-68 decades beside a profile over 2) made the profile a
            # spike: it is drawn cut at the axis's edges
            left, right = float(c.min()), float(c.max())
            if prof.wald is not None and np.all(np.isfinite(prof.wald[i])):
                w_lo, w_hi = (float(v) for v in prof.wald[i])
                if w_hi - w_lo <= 3.0 * (right - left):
                    left, right = min(left, w_lo), max(right, w_hi)
            pad = 0.05 * (right - left)
            ax.set_xlim(left - pad, right + pad)
        ax.set_xlabel(prof.names[i])
        # at most five ticks: a 4.6-inch panel's default ticks ran together
        # ("0.98750.9900")
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.set_ylabel("2 (nllh(c) - nllh)" if getattr(prof, "noise", "") == "likelihood"
                      else "(PL - WSSR) / s$^2$")
        # (to the standard error's second digit: w2's [20, 20] read nothing)
        std = getattr(prof, "std", None)
        d = max(4, digits_beside(prof.estimate[i], None if std is None else std[i]) - 1)
        ax.set_title(f"{prof.names[i]}: [{shown_to(lo, d)}, {shown_to(hi, d)}] ({pct})",
                     fontsize=9)
        ax.grid(alpha=0.3)
    axes.ravel()[0].legend(fontsize=7, loc="upper center")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig


def plot_prediction(runs: Sequence[Any], y_names: Sequence[str], y_units: Sequence[str],
                    title: str, band_label: str, failed: bool = False, columns: int = 4,
                    t_unit: str = "", log_axes: Sequence[bool] = ()) -> plt.Figure:
    """Predicted outputs of new runs (the command line's ``predict``): one
    column per run (at most ``columns`` side by side), a panel per output with
    the prediction (line), its band (shaded) and the run's measurements
    (dots) where it has them.  Each panel's ``gid`` is ``"prediction:<r>:<k>"``
    (run index, output index).

    Parameters
    ----------
    runs : sequence of RunPrediction
        Each with ``name``, ``t``, ``y``, ``lower``, ``upper`` (None: no band)
        and ``measured`` (None: no data), arrays ``(N, ny)``.
    y_names, y_units : sequence of str
    title : str
        The figure's title (red where ``failed``: the fit did not converge or
        is flagged).
    band_label : str
        What the band is ("95% confidence band").
    failed : bool
    columns : int
    t_unit : str
        The time axis's unit.
    log_axes : sequence of bool
        Per output, a logarithmic axis (a log-normal output, which may
        span decades).
    """
    n, ny = max(len(runs), 1), max(len(y_names), 1)
    cols = min(n, columns)
    blocks = int(np.ceil(n / cols))
    fig, axes = plt.subplots(blocks * ny, cols, figsize=(4.2 * cols, 2.6 * blocks * ny),
                             squeeze=False, sharex="col")
    for ax in axes.ravel():
        ax.set_visible(False)
    for r, run in enumerate(runs):
        block, col = divmod(r, cols)
        for k, name in enumerate(y_names):
            ax = axes[block * ny + k, col]
            ax.set_visible(True)
            ax.set_gid(f"prediction:{r}:{k}")
            if run.lower is not None:
                finite = np.isfinite(run.lower[:, k]) & np.isfinite(run.upper[:, k])
                ax.fill_between(run.t, np.where(finite, run.lower[:, k], np.nan),
                                np.where(finite, run.upper[:, k], np.nan), color="C0",
                                alpha=0.25, lw=0, label=band_label)
            ax.plot(run.t, run.y[:, k], color="C0", lw=1.3, label="prediction")
            log = k < len(log_axes) and bool(log_axes[k])
            if log:
                ax.set_yscale("log")
            if run.measured is not None and np.isfinite(run.measured[:, k]).any():
                ax.plot(run.t, run.measured[:, k], ".", color="k", ms=2.5, label="measured")
                shown = np.concatenate([run.measured[:, k], run.y[:, k]])
                if run.lower is not None:  # the band too, unless it would dwarf the data
                    band = np.concatenate([run.lower[:, k], run.upper[:, k]])
                    if not _far_beyond(np.log10(band) if log else band,
                                       np.log10(shown) if log else shown):
                        shown = np.concatenate([shown, band])
                if log:  # (a linear margin below a log axis's data is negative)
                    shown = shown[np.isfinite(shown) & (shown > 0)]
                    if shown.size:
                        ax.set_ylim(shown.min() / 2.0, shown.max() * 2.0)
                else:
                    _limit_to(ax, shown)
            ax.set_ylabel(_label(name, y_units[k] if k < len(y_units) else ""), fontsize=8)
            if k == 0:
                ax.set_title(run.name, fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(which="both", labelsize=7)
            if k == ny - 1:
                ax.set_xlabel(_label("time", t_unit), fontsize=8)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(_short(title, 110), fontsize=10, color="C3" if failed else "black")
    fig.tight_layout()
    return fig
