"""What nvgg runs under a profiler: set up and check one case outside the range, then one call
inside the NVTX range `nvgg_call` (ncu.RANGE). Runs in a child of its own under ncu
(procs.run_once with ncu as the wrapper); a checked run that fails raises NvggError there.

A submission runs as the competition runs it (one custom_kernel call a launch), in that child:
the profiler's, apart from nvgg's own process as `run` keeps it.
"""

from __future__ import annotations

import torch

from .. import datapath
from ..cases import Case
from ..errors import NvggError
from ..strategies import AsSubmitted

RANGE = "nvgg_call"


def one_call(case: Case, *, strategy: str | None = None, backend: str | None = None, tensormaps: str | None = None,
             submission: str | None = None, point: dict | None = None) -> None:
    """`point`: a config map's point, the submission's CONFIG or our persistent kernel's build."""
    if submission:
        from ..backends import submission as sub
        module = sub.load(submission)
        sub.give_point(module, tuple((point or {}).items()))
        session = datapath.setup(case, strategy=AsSubmitted(), backend=sub.SubmissionBackend(module), batch=1)
    else:
        session = datapath.setup(case, strategy=strategy, backend=backend, batch=1, tensormaps=tensormaps, point=point)
    if not datapath.check(session):
        raise NvggError(f"the checked run failed: {session.result.message}")
    launch = session.launches[0]
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    launch()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
