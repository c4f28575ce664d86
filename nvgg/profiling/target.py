"""What nvgg runs under a profiler: set up and check one case outside the range, then one call
inside the NVTX range `nvgg_call`. Exits 3 with the reason if the checked run fails.

    python -m nvgg.profiling.target '{"case": {...}, "strategy": "graph", "backend": "torch"}'
    python -m nvgg.profiling.target '{"case": {...}, "submission": "path/to/submission.py"}'

A submission runs as the competition runs it (one custom_kernel call a launch), in this process:
the profiler's child, apart from nvgg's own process as `run` keeps it.
"""

from __future__ import annotations

import json
import sys

import torch

from .. import runner
from ..cases import make_case
from .ncu import RANGE


def main(args: dict) -> int:
    raw = args["case"]
    case = make_case(raw["id"], raw["m"], raw["n"], raw["k"], raw["g"], raw["seed"], raw.get("kind", "user"))
    if args.get("submission"):
        from ..backends import submission as sub
        module = sub.load(args["submission"])
        session = runner.setup(case, strategy=sub.AsSubmitted(), backend=sub.SubmissionBackend(module), batch=1)
    else:
        session = runner.setup(case, strategy=args["strategy"], backend=args["backend"], batch=1,
                               tensormaps=args.get("tensormaps"))
    if not runner.check(session):
        print(f"nvgg target: checked run failed: {session.result.message}", file=sys.stderr)
        return 3
    launch = session.launches[0]
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    launch()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
