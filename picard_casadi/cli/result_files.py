"""The result files of ``run`` and ``fit``: result.json and the fit's figures,
written together, then the profile's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..runtime.output_files import AtomicOutputs
from .errors import CliFailure

__all__ = ["write_results", "write_profile", "write_together", "PROFILE_FILES"]

PROFILE_FILES = ("profile.png", "profile.json")


def write_results(res: Any, model: Any, experiments: list, out: Path) -> None:
    """result.json, fit.png and convergence.png, written together.

    Profile files of an earlier run are removed in the same step, so the
    folder never mixes two runs; :func:`write_profile` adds this run's.  The
    fit's files are written before its profile is computed: a profile stopped
    by Ctrl-C leaves them (a user lost a 40 s fit's files so).
    """
    from ..io.plotting import plot_convergence, plot_fit

    figures = [("fit.png", lambda: plot_fit(res, model, experiments)),
               ("convergence.png", lambda: plot_convergence(res))]
    write_together(out, [("result.json", res.to_json() + "\n")], figures, "the results",
                    stale=PROFILE_FILES)


def write_profile(prof: Any, out: Path) -> None:
    """profile.json and profile.png, beside the files :func:`write_results` wrote."""
    write_together(out, [("profile.json", json.dumps(prof.to_dict(), indent=2) + "\n")],
                    [("profile.png", prof.plot)], "the profile")


def write_together(out: Path, texts: list[tuple[str, str]],
                    figures: list[tuple[str, Callable[[], Any]]], what: str,
                    stale: tuple[str, ...] = ()) -> None:
    """Text files and figures into ``out`` at once (``stale`` files removed);
    ``what`` they are, for the message of a failed write."""
    import matplotlib.pyplot as plt

    try:
        with AtomicOutputs(out) as files:
            for name, text in texts:
                files.write_text(name, text)
            for name in stale:
                files.remove(name)
            for name, fig in figures:
                figure = fig()
                try:
                    figure.savefig(files.path(name), format="png", dpi=130)
                finally:
                    plt.close(figure)
            written = files.commit()
    except OSError as err:
        raise CliFailure(f"could not write {what} to {str(out)!r} ({err.strerror or err}); "
                         "nothing was saved") from None
    print(f"wrote {', '.join(str(p) for p in written)}")
