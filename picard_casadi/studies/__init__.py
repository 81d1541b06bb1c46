"""Many estimates of a problem or of many problems.

- ``registry``: the built-in problems (``models/``) by name;
- ``compare``: methods against each other on the registry's problems;
- ``profile``: profile likelihoods, each point an estimate;
- ``coverage``: how often intervals cover the truth over many seeds.

May import: ``io``, ``estimate`` and everything below them (not ``cli``).
"""
