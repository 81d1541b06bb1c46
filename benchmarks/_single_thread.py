"""Import first in every benchmark: one BLAS thread, set before NumPy loads.

The numbers are then repeatable on a shared 2-core machine (OpenBLAS threads
spin and collapse when another process runs), and IPOPT's linear solver
(MUMPS) is sequential too.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
