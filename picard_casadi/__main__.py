"""``python -m picard_casadi``: the command line (same as ``picard-casadi``)."""

import sys

from .cli import main

sys.exit(main())
