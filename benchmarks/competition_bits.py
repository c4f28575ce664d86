"""Are nvgg's inputs bit-identical to the competition's? Compares nvgg.inputs.generate with the
competition's own generate_input (its reference.py, task.py and utils.py in a folder given on
the command line; they are not part of nvgg) on every built-in case. Needs CUDA.

    python benchmarks/competition_bits.py --competition DIR
"""

from __future__ import annotations

import argparse
import importlib
import sys

import torch

from nvgg import cases, inputs


def same(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x.shape == y.shape and x.dtype == y.dtype and x.device == y.device and x.stride() == y.stride() \
        and torch.equal(x.view(torch.uint8) if x.element_size() == 1 else x, y.view(torch.uint8) if y.element_size() == 1 else y)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--competition", required=True)
    args = parser.parse_args()
    sys.path.insert(0, args.competition)
    comp = importlib.import_module("reference")
    bad = 0
    for case in cases.builtin():
        for seed in (case.seed, case.seed + 42):
            ours = inputs.generate(case, "cuda", seed=seed)
            theirs = comp.generate_input(m=list(case.m), n=list(case.n), k=list(case.k), g=case.g, seed=seed)
            ok = len(ours) == len(theirs) == 4 and ours[3] == theirs[3]
            for part in range(3):
                for mine, other in zip(ours[part], theirs[part]):
                    ok &= all(same(x, y) for x, y in zip(mine, other))
            bad += not ok
            print(f"case {case.id:>8} seed {seed}: {'identical' if ok else 'DIFFERENT'}")
    print(f"{'all identical' if not bad else f'{bad} differ'} on {torch.cuda.get_device_name()}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
