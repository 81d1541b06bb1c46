"""Test case TC34 of the flight-test textbook: TC01's model, two maneuvers, state biases per maneuver.

R. V. Jategaonkar, *Flight Vehicle System Identification*, 2nd ed., ch. 4
(``mDefCase34.m``, ``xdot_TC34_attas_lat.m``, ``obs_TC34_attas_lat.m``):
the ATTAS linear lateral-directional model of TC01 (states p, r; outputs
pdot, rdot, ay, p, r; inputs aileron, rudder, measured sideslip), fitted to
two time segments at once.  The 15 derivatives and the 5 output biases
BY1..BY5 are common to both segments; the state-equation biases BX1, BX2
(``bXpar``, ``parFlagBX = 1``) are estimated separately for each segment;
``x0 = 0`` in both segments, fixed (``parFlagX0 = 0``, the lumped-bias
formulation, eq. 3.29).  Here: the model of TC01 with ``per_experiment=
["BX1", "BX2"]`` and ``estimate_x0=False``, every other option default
(the likelihood with each output's noise variance estimated: ``det R``).

The book's ``mDefCase34.m`` loads ``fAttasAilRud1`` for *both* segments
(the same maneuver twice), so its answer is TC01's with the standard
deviations divided by sqrt(2); that is the default here.  ``--second
AilRud2`` takes the repeat maneuver ``fAttasAilRud2.mat`` as the second
segment (the evident intent of the case; the book's code was run that way
too, with the same one-line change, for the reference values).

Run::

    python examples/flight_test/tc34_two_maneuvers.py [--data DIR] [--second AilRud1|AilRud2]
                                                       [--method picard-gn|ipopt|shooting]

The data are the book's (``../shared/data/flight/`` beside the repository;
not part of it).  The book's MATLAB 5 ``.mat`` files are read by the small
reader below (no SciPy needed; ``fAttasAilRud2`` has no ASCII twin).
"""

from __future__ import annotations

import argparse
import struct
import time
from pathlib import Path

import numpy as np

import picard_casadi as pc
from book_case import DATA
from tc01_attas_lateral import P0, attas_lateral_model

D2R = np.pi / 180.0

#: the book's code (ml_oem2.m, mDefCase34.m) in GNU Octave 7.3, /work/flight_ref/RESULTS.md:
#: estimate and std. dev. sqrt(diag(inv F)) per parameter; det R; CPU s of the iteration loop
BOOK = {
    "AilRud1": {  # the book as written: fAttasAilRud1 twice
        "Lp": (-2.048639779835159e+00, 3.391587240681700e-03),
        "Lr": (1.078644182106602e+00, 8.598303413661053e-03),
        "Lda": (-6.285890337820806e+00, 8.184570422882330e-03),
        "Ldr": (1.170418000107697e+00, 2.164017590849368e-02),
        "Lbeta": (-3.754346551188579e+00, 1.419023503766354e-02),
        "Np": (-1.743171986660728e-01, 1.252373460548822e-03),
        "Nr": (-4.672045577231132e-01, 3.248377913363241e-03),
        "Nda": (-3.674425967861837e-01, 3.020882137615761e-03),
        "Ndr": (-1.695759428393788e+00, 8.013314874211178e-03),
        "Nbeta": (2.992329620505377e+00, 5.697339451542288e-03),
        "Yp": (7.169660003936887e-01, 1.397248458152975e-02),
        "Yr": (3.890760988434246e+00, 3.865614189601636e-02),
        "Yda": (1.453408135742960e+00, 3.175228943882843e-02),
        "Ydr": (5.773704468596772e+00, 9.607257843447285e-02),
        "Ybeta": (-2.708398553980011e+01, 6.200607730193772e-02),
        "BY1": (-6.497999200004343e-03, 2.874638687363876e-03),
        "BY2": (3.123563137054531e-02, 3.939876731777449e-04),
        "BY3": (-1.937172632649126e-01, 2.990950847460615e-03),
        "BY4": (8.293809288588238e-03, 1.323321042636848e-03),
        "BY5": (2.395007147172557e-03, 6.385585077137609e-04),
        "BX1[m1]": (-6.717663896328318e-03, 2.858134983081398e-03),
        "BX2[m1]": (3.108659735114271e-02, 3.871398166219136e-04),
        "BX1[m2]": (-6.717663851743888e-03, 2.858134987659891e-03),
        "BX2[m2]": (3.108659734974066e-02, 3.871398169838465e-04),
        "det R": 9.170202105049449e-20, "CPU": 79.33, "iterations": 6,
    },
    "AilRud2": {  # the repeat maneuver as segment 2 (TC34_SEG2=AilRud2, EDITS.md)
        "Lp": (-2.091799369358299e+00, 3.817545294666902e-03),
        "Lr": (1.025945858026710e+00, 7.733845528482947e-03),
        "Lda": (-6.401914214866895e+00, 9.406922998130781e-03),
        "Ldr": (1.148461910198295e+00, 1.929377497963955e-02),
        "Lbeta": (-3.833266601049781e+00, 1.317408198987690e-02),
        "Np": (-1.783430991132951e-01, 1.284110585034430e-03),
        "Nr": (-4.548589475173010e-01, 2.662069947583574e-03),
        "Nda": (-3.879227941214040e-01, 3.176213980975105e-03),
        "Ndr": (-1.754538050373683e+00, 6.369389103344569e-03),
        "Nbeta": (3.041194418710765e+00, 4.711539662433154e-03),
        "Yp": (7.785771176575632e-01, 1.511614207114670e-02),
        "Yr": (3.806908196094006e+00, 3.225167550647565e-02),
        "Yda": (1.286750822593921e+00, 3.545571740848891e-02),
        "Ydr": (5.833099931742139e+00, 7.968287980963136e-02),
        "Ybeta": (-2.646955159821436e+01, 5.343022474135962e-02),
        "BY1": (-4.287616192788037e-03, 3.272629714829345e-03),
        "BY2": (3.273995772239850e-02, 4.301533847038067e-04),
        "BY3": (-2.003075218616268e-01, 3.192427343589016e-03),
        "BY4": (7.942962865968158e-03, 1.506860369309013e-03),
        "BY5": (1.099406810364057e-03, 6.928724154816691e-04),
        "BX1[m1]": (-6.723359809875645e-03, 3.269682270095582e-03),
        "BX2[m1]": (3.270720540894739e-02, 4.259004619589200e-04),
        "BX1[m2]": (-2.226557803273607e-03, 3.268810019964841e-03),
        "BX2[m2]": (3.250176548987348e-02, 4.251286227188724e-04),
        "det R": 1.587486937335895e-19, "CPU": 80.46, "iterations": 6,
    },
}


def read_mat5(path: Path) -> np.ndarray:
    """The one uncompressed real double matrix of a MATLAB 5 ``.mat`` file."""
    raw = path.read_bytes()
    endian = "<" if raw[126:128] == b"IM" else ">"
    pos = 128
    while pos < len(raw):
        dtype, nbytes = struct.unpack(endian + "II", raw[pos:pos + 8])
        body, pos = raw[pos + 8:pos + 8 + nbytes], pos + 8 + nbytes + (-nbytes % 8)
        if dtype != 14:                              # miMATRIX
            continue
        sub, k = [], 0
        while k < len(body):
            st, sn = struct.unpack(endian + "II", body[k:k + 8])
            if st >> 16:                             # small data element: 4 bytes inline
                st, sn = st & 0xFFFF, st >> 16
                sub.append((st, body[k + 4:k + 4 + sn]))
                k += 8
            else:
                sub.append((st, body[k + 8:k + 8 + sn]))
                k += 8 + sn + (-sn % 8)
        flags, dims = sub[0][1], sub[1][1]
        if struct.unpack(endian + "I", flags[:4])[0] & 0xFF != 6 or sub[3][0] != 9:
            raise ValueError(f"{path}: not a real double matrix")
        shape = struct.unpack(endian + "ii", dims[:8])
        return np.frombuffer(sub[3][1], dtype=endian + "f8").reshape(shape, order="F")
    raise ValueError(f"{path}: no matrix")


def maneuver(data: Path, which: str, name: str) -> pc.Experiment:
    """mDefCase34.m's channels (those of mDefCase01.m), degrees to radians, x0 = 0."""
    a = read_mat5(data / f"fAttas{which}.mat")   # the book's files, as mDefCase34.m loads them
    col = lambda k: a[:, k - 1]  # noqa: E731  (the book's 1-based column numbers)
    y = np.column_stack([col(17) * D2R, col(19) * D2R, col(3), col(7) * D2R, col(9) * D2R])
    u = np.column_stack([(col(29) - col(28)) * 0.5 * D2R, col(30) * D2R, col(14) * D2R])
    t = 0.04 * np.arange(y.shape[0])
    return pc.Experiment(t=t, y=y, u=u, x0=[0.0, 0.0], name=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="folder of the book's data")
    ap.add_argument("--second", choices=["AilRud1", "AilRud2"], default="AilRud1",
                    help="second segment: AilRud1 as the book's mDefCase34.m, or the repeat")
    ap.add_argument("--method", default=None, help="pc.estimate's method (default: its own)")
    args = ap.parse_args()
    exps = [maneuver(args.data, "AilRud1", "m1"), maneuver(args.data, args.second, "m2")]
    t0, c0 = time.perf_counter(), time.process_time()
    res = pc.estimate(attas_lateral_model(), exps, P0, method=args.method,
                      estimate_x0=False, per_experiment=["BX1", "BX2"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(res.summary())
    book = BOOK[args.second]
    print(f"\n{'parameter':10s} {'book':>14s} {'book s.d.':>11s} {'here':>14s} {'s.e.':>11s}"
          f" {'diff/bookSD':>11s} {'se/bookSD':>9s}")
    worst = 0.0
    for name, v, se in zip(res.p_names, res.p, res.p_std):
        if book is None:
            print(f"{name:10s} {'-':>14s} {'-':>11s} {v:14.6e} {se:11.3e}")
            continue
        b, sd = book[name]
        worst = max(worst, abs(v - b) / sd)
        print(f"{name:10s} {b:14.6e} {sd:11.3e} {v:14.6e} {se:11.3e} {(v - b) / sd:11.3f} {se / sd:9.4f}")
    if book is not None:
        print(f"largest |difference| {worst:.3f} book standard deviations")
        print(f"det R: book {book['det R']:.9e}, here {res.det_R:.9e} "
              f"(relative {res.det_R / book['det R'] - 1:+.2e})")
        print(f"CPU: book {book['CPU']:.2f} s ({book['iterations']} Gauss-Newton iterations, Octave), "
              f"here {cpu:.2f} s (wall {wall:.2f} s), method {res.method}")
    else:
        print(f"det R {res.det_R:.9e}; CPU {cpu:.2f} s (wall {wall:.2f} s), method {res.method}")


if __name__ == "__main__":
    main()
