"""One estimate's run, behind :func:`picard_casadi.estimate`.

- ``arguments``: ``estimate``'s arguments checked where they enter;
- ``setup``: from the model, data and options to a ``Setup`` (mesh,
  functions, scales, start, weights);
- ``refinement``: solve, certify, refine the mesh, solve again;
  ``solve_limits``: the iteration limits of its solves;
- ``assembly``: the run as an ``EstimationResult``; ``diagnosis``: what a
  finished result says beyond the optimiser's verdict;
- ``fallbacks``: the default path's second runs after a failure;
- ``multistart``: many starts, the best returned; ``portable``: results
  that cross a process boundary.

May import: ``result``, ``methods``, ``analysis``, ``transcription``,
``simulate``, ``runtime``, ``model``, ``experiment``, ``errors``; not
``estimate`` (``multistart`` receives it as an argument).
"""
