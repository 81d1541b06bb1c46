"""What leaves the package besides a result: figures and exported C.

- ``plotting``: fit, convergence, comparison and profile figures;
- ``export``: a model's functions as standalone C for embedding.

May import: ``estimate``, ``result`` and everything below them (not
``studies`` or ``cli``).
"""
