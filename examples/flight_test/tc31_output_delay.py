"""Test case TC31 of the flight-test textbook: TC01 with a time delay in the yaw rate.

R. V. Jategaonkar, *Flight Vehicle System Identification*, 2nd ed., ch. 4
(``mDefCase31.m``, ``xdot_TC31_attas_lat.m``, ``obs_TC31_attas_lat.m``,
``timeDelay.m``): TC01's ATTAS lateral-directional model and maneuver
``fAttasAilRud1``, with the measured yaw rate a delayed signal,
``y5 = r(t - tau) + BY5``, and ``tau`` estimated with the 22 other
parameters (the book starts it at 0; ``x0 = 0`` fixed).  Here the delay is
``Model(output_delays={"r": tau})``; every other option is the default (the
likelihood with each output's noise variance estimated: ``det R``).  The
book's code interpolates the stored past values linearly between samples;
here ``r(t - tau)`` is the model's own continuous solution.

Run::

    python examples/flight_test/tc31_output_delay.py [--data DIR]

prints the summary and each parameter beside the book's code's (run in GNU
Octave on the same data): the difference in the book's standard deviations
and the ratio of the standard errors.  The data are the book's
(``../shared/data/flight/`` beside the repository; not part of it).
"""

from __future__ import annotations

import numpy as np

import picard_casadi as pc
from book_case import run_case
from tc01_attas_lateral import NAMES, P0, attas_experiment, attas_lateral_model

#: the book's code (ml_oem2.m, mDefCase31.m) in GNU Octave 7.3 on fAttasAilRud1:
#: estimate and std. dev. sqrt(diag(inv F)) per parameter (the order of NAMES,
#: then tau); det R; CPU s of the iteration loop (6 iterations)
BOOK = dict(
    det_R=9.044411543567137e-20, cpu=45.83,
    p=[-2.048483332919163, 1.080382684046485, -6.284627614553258, 1.172030662942638,
       -3.766797691453769, -1.740382173711073e-01, -4.792343306576068e-01,
       -3.670546455188540e-01, -1.697610211492839, 2.998697721592302, 7.173455026244656e-01,
       3.895100708194893, 1.456809939316506, 5.778465937629046, -27.12893124313808,
       -6.957033214461011e-03, 3.114786243035542e-02, -6.737282469301354e-03,
       3.129432727939255e-02, -1.943187228263576e-01, 8.324805814848780e-03,
       2.306343203372958e-03, 1.411754692159052e-02],
    sd=[4.793305373886160e-03, 1.217114379667593e-02, 1.156569479455019e-02,
        3.058734951534640e-02, 2.025535370028952e-02, 1.778924045196136e-03,
        5.253132319563807e-03, 4.289915984900483e-03, 1.137417835840225e-02,
        8.215927533488532e-03, 1.979170799322192e-02, 5.483669364786806e-02,
        4.497668782283891e-02, 1.360999089780224e-01, 8.850166340194107e-02,
        4.027813780917108e-03, 5.498145279498026e-04, 4.061446791349551e-03,
        5.632170137960287e-04, 4.219951581466931e-03, 1.869908186440813e-03,
        8.974921937167978e-04, 3.052273230002757e-03])


def attas_delay_model() -> pc.Model:
    """TC01's model with the yaw-rate output delayed by the parameter ``tau_r``."""
    return attas_lateral_model(extra=1, name="attas-TC31", p_names=NAMES + ["tau_r"],
                               output_delays={"r": "tau_r"})


#: the book's start (mDefCase31.m): TC01's, and the delay at 0
P0_TC31 = P0 + [0.0]


if __name__ == "__main__":
    res = run_case(__doc__, attas_delay_model(), attas_experiment, P0_TC31)
    book_p, book_sd = np.asarray(BOOK["p"]), np.asarray(BOOK["sd"])
    print(f"\nbook det R {BOOK['det_R']:.6e} (CPU {BOOK['cpu']:.1f} s); "
          f"rounds of the delay: {res.settings['delay_rounds']}")
    print(f"{'parameter':10s} {'here':>14s} {'book':>14s} {'diff/book sd':>13s} {'SE ratio':>9s}")
    for name, v, s, b, bs in zip(res.p_names, res.p, res.p_std, book_p, book_sd):
        print(f"{name:10s} {v:14.6g} {b:14.6g} {(v - b) / bs:13.3f} {s / bs:9.4f}")
