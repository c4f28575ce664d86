"""Do `nvgg ab`'s intervals keep their coverage? Simulated A/Bs through nvgg's own looks and classes
(ab.CaseAB.plan / look / ratios, driven by tests/fixtures/ab_sim.py): per noise model and true
ratio, the share of A/Bs whose printed interval holds the truth, each class's count and the mean
rounds; then the geometric mean over four cases, stopped each at its own look. CPU only.

    python benchmarks/ab_coverage.py [--trials 1000] [--floor 2] [--rounds 30]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import ab_sim  # noqa: E402
from nvgg import ab  # noqa: E402

TRUES = (1.0, 1.015, 1.025, 1.03, 1.04)


def cases_table(trials: int, floor: float, most: int) -> str:
    rows = []
    for model in ab_sim.MODELS:
        for true in TRUES:
            got = ab_sim.coverage(true, model, trials, seed=int(true * 1000), floor=floor, most=most)
            c = got["classes"]
            rows.append([model, f"{true:.3f}", f"{got['covered']:.1%}", *(c.get(k, 0) for k in ("faster", "same", "slower",
                                                                                                 "unsure")),
                         f"{got['rounds']:.1f}", got["same_outside_band"]])
    return tabulate(rows, headers=["rounds' noise", "true ratio", "interval holds it", "faster", "same", "slower",
                                   "unsure", "mean rounds", "same outside band"], tablefmt="github")


def geomean_table(trials: int, floor: float, most: int) -> str:
    rows = []
    mixes = {"3 GPU-bound + 1 host-bound (3%)": ["gpu", "gpu", "gpu", "host-3%"], "4 host-bound (2%)": ["host-2%"] * 4,
             "4 GPU-bound": ["gpu"] * 4}
    for name, models in mixes.items():
        for trues in ([1.0] * 4, [1.025] * 4, [1.0, 1.0, 1.0, 1.03], [1.02, 1.0, 1.03, 0.99]):
            rng = random.Random(7)
            truth = math.exp(sum(math.log(t) for t in trues) / 4)
            held = 0
            for _ in range(trials):
                outs = [ab_sim.one(t, m, rng, floor=floor, most=most) for t, m in zip(trues, models)]
                ratios = [ab.Ratio(math.sqrt(o.lo * o.hi), o.lo, o.hi, o.rounds, ab.kept(o.rounds) - 1, o.level)
                          for o in outs]
                g = ab.geomean(ratios)
                held += g.lo <= truth <= g.hi
            rows.append([name, ", ".join(f"{t:g}" for t in trues), f"{held / trials:.1%}"])
    return tabulate(rows, headers=["cases", "true ratios", "geomean interval holds it"], tablefmt="github")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--floor", type=float, default=2.0, help="percent")
    ap.add_argument("--rounds", type=int, default=30, help="--rounds of nvgg ab (host-bound cases look up to 3x)")
    args = ap.parse_args()
    t0 = time.monotonic()
    design = ab.Design.of(args.rounds)
    print(f"looks after {', '.join(map(str, design.looks))} rounds (host-bound: "
          f"{', '.join(map(str, ab.Design.of(args.rounds * ab.HOST_ROUNDS).looks))}), levels "
          f"{', '.join(f'{1 - a:.2%}' for a in design.alphas)}; floor ±{args.floor:g}%; {args.trials} A/Bs a row")
    print(cases_table(args.trials, args.floor / 100, args.rounds))
    print()
    print(geomean_table(max(100, args.trials // 4), args.floor / 100, args.rounds))
    print(f"({time.monotonic() - t0:.0f} s)")


if __name__ == "__main__":
    main()
