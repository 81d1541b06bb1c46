"""The problem as intervals and CasADi functions: the discretisation.

- ``quadrature``, ``discretisation``, ``mesh``, ``problem_size``: nodes and
  matrices, intervals and samples, mesh refinement, the size guard;
- ``interval_functions``: the CasADi functions of one interval (Picard map,
  residuals, derivatives); ``functions``: the ``Transcription``, them mapped
  over every interval; ``problem``: the ``Setup`` every method receives;
- ``fixed_point_system``, ``sensitivity``, ``interval_linearisation``,
  ``interval_products``, ``second_order``, ``block_jacobian``,
  ``blocksolve``, ``kernels``: the per-interval linear algebra of the fixed
  point and its derivatives (``kernels``: as generated C);
- ``interval_integration``: CVODES on each interval;
- ``guess``: the starting point; ``predict``: outputs from an estimate.

May import: ``runtime``, ``simulate``, ``model``, ``experiment``, ``errors``.
"""
