"""Built-in models and the synthetic-data protocols of the test and paper problems.

Installed as ``picard_casadi.models`` (the repository's top-level ``models/``
folder).  Each module builds a :class:`~picard_casadi.Model` from CasADi SX
expressions (``build_model``) and a :class:`~picard_casadi.problems.Problem`
(``make_problem`` or one function per paper run); ``ring`` builds only a
model of any size and its data, for the scaling benchmarks.
"""
