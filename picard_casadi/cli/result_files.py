"""The result files of ``run`` and ``fit``: result.json and the figures, written together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..runtime.output_files import AtomicOutputs
from .errors import CliFailure

__all__ = ["write_results", "PROFILE_FILES"]

PROFILE_FILES = ("profile.png", "profile.json")


def write_results(res: Any, model: Any, experiments: list, out: Path,
                   prof: Any = None) -> None:
    """result.json, the figures (and the profile's), written together (see the module doc).

    Profile files of an earlier run that this one does not write are removed
    in the same step, so the folder never mixes two runs.
    """
    import matplotlib.pyplot as plt

    from ..io.plotting import plot_convergence, plot_fit

    figures = [("fit.png", lambda: plot_fit(res, model, experiments)),
               ("convergence.png", lambda: plot_convergence(res))]
    if prof is not None:
        figures.append(("profile.png", lambda: prof.plot()))
    try:
        with AtomicOutputs(out) as files:
            files.write_text("result.json", res.to_json() + "\n")
            if prof is not None:
                files.write_text("profile.json", json.dumps(prof.to_dict(), indent=2) + "\n")
            else:
                for name in PROFILE_FILES:
                    files.remove(name)
            for name, fig in figures:
                figure = fig()
                try:
                    figure.savefig(files.path(name), format="png", dpi=130)
                finally:
                    plt.close(figure)
            written = files.commit()
    except OSError as err:
        raise CliFailure(f"could not write the results to {str(out)!r} ({err.strerror or err}); "
                         "nothing was saved") from None
    print(f"wrote {', '.join(str(p) for p in written)}")
