"""picard-gn's cost per iteration against the number of intervals (4 sizes).

Run::

    python benchmarks/scaling.py

Van der Pol with both states measured, the horizon stretched (10, 20, 40, 80
time units at 10 samples per unit, ``T = 0.25``: 40 to 320 intervals), code
generation on.  The condensed Gauss-Newton step eliminates the interval
blocks one by one, so the time per iteration should grow linearly: the last
column (time per iteration and interval) should stay roughly constant.
"""

from __future__ import annotations

import _single_thread  # noqa: F401  (one BLAS thread; before NumPy loads)

import numpy as np

import picard_casadi as pc
from picard_casadi.models import vdp


def main() -> None:
    model = vdp.build_model()
    print(f"{'horizon':>8s} {'intervals':>9s} {'iterations':>10s} {'solve [s]':>10s} "
          f"{'per iter [ms]':>13s} {'per iter and interval [us]':>27s}")
    for horizon in (10, 20, 40, 80):
        t = np.linspace(0.0, horizon, 10 * horizon + 1)
        exp = pc.simulate_experiment(model, vdp.X0_TRUE, vdp.P_TRUE, t, noise_std=0.01, seed=0)
        kw = dict(p_bounds=([0.01, 0.01], [10, 10]), T=0.25, n=2, codegen="auto",
                  uncertainty=False)
        pc.estimate(model, [exp], [0.8, 0.8], "picard-gn", **kw)  # compile / warm up
        res = pc.estimate(model, [exp], [0.8, 0.8], "picard-gn", **kw)
        J = res.settings["intervals"]
        per = res.timings["solve"] / res.iterations
        print(f"{horizon:8d} {J:9d} {res.iterations:10d} {res.timings['solve']:10.3f} "
              f"{1e3 * per:13.2f} {1e6 * per / J:27.1f}", flush=True)


if __name__ == "__main__":
    main()
