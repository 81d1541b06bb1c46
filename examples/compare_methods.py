"""The comparison study: every method on the same problems, data, start and discretisation.

Run (about a minute)::

    python examples/compare_methods.py
    python examples/compare_methods.py --problems vdp cmg --methods picard-gn ipopt --seeds 0 1

Prints a line per run and writes ``table.csv``, ``table.md`` (estimate,
relative error to the truth, data misfit, continuity gap, iterations, build
time cold and cached, solve time) and ``comparison.png`` into ``--out``.
Adding your own model to the study::

    pc.register_problem("my-model", my_factory)   # my_factory(seed, noise_std) -> Problem
    compare(["my-model"], ["picard-gn", "ipopt"])
"""

from __future__ import annotations

import argparse

from picard_casadi.studies.compare import compare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=["vdp", "lotka-volterra", "fitzhugh-nagumo"])
    ap.add_argument("--methods", nargs="+", default=["picard-gn", "ipopt", "shooting", "picard"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="results/compare")
    args = ap.parse_args()
    rows = compare(args.problems, args.methods, seeds=args.seeds, repeats=args.repeats,
                   out=args.out, verbose=True)
    print(f"\n{len(rows)} runs; table in {args.out}/table.md, figure {args.out}/comparison.png")


if __name__ == "__main__":
    main()
