"""What crosses the package's edge besides a result: figures, exported C, data files.

- ``plotting``: fit, convergence, comparison and profile figures;
- ``export``: a model's functions as standalone C for embedding;
- ``columns``: measured channels from text files of numeric columns
  (``pc.read_columns``; the flight-test textbook's files);
- ``petab``, ``sbml``: a PEtab problem (an SBML model and its tables) as
  ``estimate``'s arguments (``pc.read_petab``; the optional extra
  ``[petab]``).

May import: ``estimate``, ``result`` and everything below them (not
``studies`` or ``cli``).
"""
