"""`nvgg profile --phases`: the instrumented persistent kernel on one input, checked, its phase
buffer analysed, a Chrome trace written, and what the instrumentation itself costs (kernel
durations from CUPTI, instrumented against the timed build)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from .. import reference, runner, timing
from ..cases import Case
from ..errors import NvggError
from ..kernels.phase_slots import SM90, SlotLayout
from . import cupti, phases


@dataclass
class PhaseRun:
    report: phases.PhaseReport
    buffer: torch.Tensor
    plain_us: float          # uninstrumented kernel: median CUPTI kernel duration, L2 flushed before each
    instrumented_us: float   # instrumented kernel, the same way (its buffer zeroing not counted)
    layout: SlotLayout = SM90  # the slots of the kernel family that ran (kernels/phase_slots.py)
    tensormaps: str = ""

    @property
    def cost(self) -> float:
        return self.instrumented_us / self.plain_us - 1

    def to_dict(self) -> dict:
        return {"phases": self.report.to_dict(), "plain_us": self.plain_us, "instrumented_us": self.instrumented_us,
                "instrumentation_cost": self.cost, "kernel": self.layout.kernel, "tensormaps": self.tensormaps}


def run(case: Case, *, profile: str | None = None, tensormaps: str | None = None, backend="cute") -> PhaseRun:
    """`backend`: "cute", or a cute backend object (then the mode is the object's)."""
    session = runner.setup(case, strategy="persistent", backend=backend, profile=profile, tensormaps=tensormaps)
    if not runner.check(session):
        raise NvggError(f"the persistent kernel failed its check on case {case.id}: {session.result.message}")
    backend = session.backend
    if not hasattr(backend, "phase_launcher"):
        raise NvggError(f"the {backend.name} backend has no instrumented build: --phases needs --backend cute")
    launches = [backend.phase_launcher(data) for data in session.batch]
    first, buffer = launches[0]
    data = session.batch[0]
    verdict = reference.checked_call(data, first)  # `first` zeroes the phase buffer itself
    if not verdict.ok:
        raise NvggError(f"the instrumented kernel is wrong on case {case.id}: {verdict.message}")
    layout = backend.phase_layout(session.device)
    report = phases.analyse(buffer.cpu(), layout)
    plain = kernel_us(session.launches, session.device)
    instrumented = kernel_us([launch for launch, _ in launches], session.device)
    return PhaseRun(report, buffer.cpu(), plain, instrumented, layout, session.result.tensormaps)


def kernel_us(launches, device: torch.device) -> float:
    """Median duration of each call's longest kernel from CUPTI records (the GEMM; a buffer
    zeroing beside it is short and left out), L2 flushed before each call."""
    flush = timing.L2Flush(device)
    durations = []
    for launch in launches:
        flush()
        torch.cuda.synchronize(device)
        durations.append(max(a.us for a in cupti.record(launch, device)))
    return statistics.median(durations)
