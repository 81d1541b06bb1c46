"""The ``picard-casadi`` command line (user guide: docs/cli.md).

- ``commands``: the parser and each command;
- ``data_files``, ``model_files``: reading the user's CSV data and model
  files; ``noise_options``: ``--weights`` and ``--noise``;
  ``statement_options``: ``--scale``, ``--per-experiment``, ``--conditions``;
  ``petab_input``: ``fit --petab``; ``initial_states``: ``--x0``,
  ``--x0-known``; ``result_files``: result.json and the
  figures (the live progress lines: ``runtime/progress.py``).

May import: everything in the package (nothing imports it but
``__main__``).
"""

from .commands import main

__all__ = ["main"]
