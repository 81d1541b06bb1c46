"""How code runs: generated C, processes, Ctrl-C, and the checks every layer uses.

- ``codegen``, ``native``: CasADi functions compiled to C, cached on disk and
  called on NumPy buffers; ``compiler`` and ``code_cache`` behind them;
- ``executors``: independent tasks in other processes or on a cluster;
- ``interrupts``, ``native_output``, ``threads``: Ctrl-C inside C code,
  output printed by C libraries, BLAS threads during a solve;
- ``output_files``: result files written atomically; ``progress``: a line
  per iteration on the terminal (the command line's, ``pc.Progress``);
- ``arguments``, ``user_warnings``: argument checks that name the argument
  and the fix, and warnings attributed to the user's line.

May import: ``errors``, ``model``, ``experiment`` (nothing of the problem's
numbers: this wing knows nothing of Picard, meshes or methods).
"""
