"""Figures: fit versus data, convergence history, the method comparison, profiles.

All functions draw with matplotlib's non-interactive ``Agg`` backend and
return the figure; pass ``path`` to save it as PNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .experiment import Experiment  # noqa: E402
from .model import Model  # noqa: E402
from .result import EstimationResult  # noqa: E402

__all__ = ["plot_fit", "plot_convergence", "plot_comparison", "plot_profile"]


def _label(name: str, unit: str) -> str:
    return f"{name} [{unit}]" if unit else name


def _grid(n: int) -> tuple[int, int]:
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    return int(np.ceil(n / cols)), cols


def plot_fit(result: EstimationResult, model: Model, experiments: Sequence[Experiment],
             experiment: int | Sequence[int] | None = None, path: str | Path | None = None,
             title: str | None = None, dense: int = 400) -> plt.Figure:
    """Measured outputs (dots) and the fitted model's outputs (lines).

    One panel per output; each selected experiment in its own colour.  The
    lines are CVODES simulations from the estimated ``x0`` with the
    estimated ``p`` on a fine time grid.

    Parameters
    ----------
    result : EstimationResult
    model : Model
    experiments : sequence of Experiment
    experiment : int or sequence of int, optional
        Which experiments to draw (default all, at most 4).
    path : str or Path, optional
        Save as PNG here.
    title : str, optional
    dense : int
        Points of the simulated line.
    """
    if experiment is None:
        chosen = list(range(min(len(experiments), 4)))
    elif isinstance(experiment, (int, np.integer)):
        chosen = [int(experiment)]
    else:
        chosen = [int(e) for e in experiment]
    rows, cols = _grid(model.ny)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 2.6 * rows + 0.6),
                             squeeze=False, sharex=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, e in enumerate(chosen):
        exp = experiments[e]
        colour = colours[n % len(colours)]
        t_fine = np.linspace(exp.t0, exp.t_end, dense)
        try:
            Y_fit = result.predict(e, t_fine)
        except Exception:  # a simulation can fail far from the optimum
            Y_fit = None
        for k in range(model.ny):
            ax = axes[k // cols, k % cols]
            ax.plot(exp.t, exp.y[:, k], "o", ms=2.5, color=colour, alpha=0.55,
                    label=f"{exp.name}: data" if k == 0 else None)
            if Y_fit is not None:
                ax.plot(t_fine, Y_fit[:, k], "-", lw=1.6, color=colour,
                        label=f"{exp.name}: fit" if k == 0 else None)
            ax.set_ylabel(_label(model.y_names[k], model.y_units[k]))
            ax.grid(alpha=0.3)
    for k in range(model.ny, rows * cols):
        axes[k // cols, k % cols].axis("off")
    for c in range(min(cols, model.ny)):
        lowest = max(k for k in range(model.ny) if k % cols == c)
        ax = axes[lowest // cols, c]
        ax.set_xlabel(_label("time", model.t_unit))
        ax.tick_params(labelbottom=True)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    ncol = min(len(labels), 4)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    shown = list(zip(result.p_names, result.p))[:8]
    est = ", ".join(f"{n}={v:.4g}" for n, v in shown) + (" ..." if result.p.size > 8 else "")
    head = title or f"{model.name}: {result.method} fit (dots: data, lines: simulated fit)"
    fig.suptitle(f"{head}\n{est}", fontsize=9)
    legend_rows = int(np.ceil(len(labels) / max(ncol, 1)))
    bottom = min(0.25, (0.25 + 0.18 * legend_rows) / fig.get_figheight())
    fig.tight_layout(rect=(0, bottom, 1, 1))
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig


def plot_convergence(result: EstimationResult, path: str | Path | None = None) -> plt.Figure:
    """Objective, gradient norm and continuity gap per iteration, on log axes."""
    h = result.history
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    if not h:
        ax.text(0.5, 0.5, "no iteration history", ha="center", va="center")
    else:
        it = np.asarray(h["iteration"])
        for key, label in (("objective", "objective"), ("misfit", "data misfit"),
                           ("grad_norm", "gradient norm (scaled)"),
                           ("gap", "continuity gap")):
            vals = np.asarray(h.get(key, []), float)
            if vals.size == 0 or not np.any(np.isfinite(vals)):
                continue
            ok = np.isfinite(vals) & (vals > 0)
            ax.semilogy(it[ok], vals[ok], label=label, lw=1.5)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    status = "converged" if result.success else f"NOT converged ({result.status})"
    ax.set_title(f"{result.method}: {status}, {result.iterations} iterations", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig


def plot_comparison(rows: Sequence[dict[str, Any]], path: str | Path | None = None) -> plt.Figure:
    """Solve time and relative error per method and problem (the study's figure).

    Parameters
    ----------
    rows : sequence of dict
        With keys ``problem``, ``method``, ``solve_time`` and ``rel_error``
        (as :func:`picard_casadi.compare.compare` returns).
    """
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / max(len(methods), 1)
    x = np.arange(len(problems))
    for i, m in enumerate(methods):
        times, errs = [], []
        for p in problems:
            match = [r for r in rows if r["problem"] == p and r["method"] == m]
            times.append(match[0]["solve_time"] if match else np.nan)
            errs.append(match[0]["rel_error"] if match else np.nan)
        axes[0].bar(x + i * width, times, width, label=m)
        axes[1].bar(x + i * width, np.asarray(errs) * 100, width, label=m)
    for ax, ylabel in ((axes[0], "solve time [s] (median)"),
                       (axes[1], "relative error to truth [%]")):
        ax.set_xticks(x + width * (len(methods) - 1) / 2)
        ax.set_xticklabels(problems, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_yscale("log")
        ax.grid(alpha=0.3, axis="y", which="both")
    axes[0].legend(fontsize=8)
    fig.suptitle("method comparison (same data, start, bounds and discretisation)", fontsize=10)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig


def plot_profile(prof: Any, parameters: Sequence[int], path: str | Path | None = None
                 ) -> plt.Figure:
    """Profile likelihoods (:class:`~picard_casadi.profile.Profile`), one panel each.

    Each panel: the profile statistic ``(PL(c) - WSSR) / s^2`` at the
    computed points, the threshold, the profile interval (vertical lines,
    an arrow where it is open), the Wald parabola ``((c - estimate) /
    std)^2`` and the Wald interval (``p_ci``, a bar on the axis).

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
                    label="Wald 95 % (p_ci)")
        ax.plot([theta], [0.0], "k*", ms=8, label="estimate")
        ax.set_ylim(-0.04 * top, top)
        ax.set_xlabel(prof.names[i])
        ax.set_ylabel("(PL - WSSR) / s$^2$")
        ax.set_title(f"{prof.names[i]}: [{lo:.4g}, {hi:.4g}] ({pct})", fontsize=9)
        ax.grid(alpha=0.3)
    axes.ravel()[0].legend(fontsize=7, loc="upper center")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=130)
    return fig
