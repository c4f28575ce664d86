"""`nvgg profile --phases`: the instrumented persistent kernel on one input, checked, its phase
buffer analysed, a Chrome trace written, and what the instrumentation itself costs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import inputs, reference, runner, timing
from ..cases import Case
from ..errors import NvggError
from . import phases


@dataclass
class PhaseRun:
    report: phases.PhaseReport
    buffer: torch.Tensor
    plain_us: float          # uninstrumented kernel, leaderboard timer
    instrumented_us: float   # instrumented kernel, same timer

    @property
    def cost(self) -> float:
        return self.instrumented_us / self.plain_us - 1

    def to_dict(self) -> dict:
        return {"phases": self.report.to_dict(), "plain_us": self.plain_us, "instrumented_us": self.instrumented_us,
                "instrumentation_cost": self.cost}


def run(case: Case, *, profile: str | None = None) -> PhaseRun:
    session = runner.setup(case, strategy="persistent", backend="cute", profile=profile)
    if not runner.check(session):
        raise NvggError(f"the persistent kernel failed its check on case {case.id}: {session.result.message}")
    backend = session.backend
    if not hasattr(backend, "phase_launcher"):
        raise NvggError(f"the {backend.name} backend has no instrumented build: --phases needs --backend cute")
    launches = [backend.phase_launcher(data) for data in session.batch]
    first, buffer = launches[0]
    data = session.batch[0]
    expected = reference.reference(data)
    reference.poison(data)
    buffer.zero_()
    first()
    torch.cuda.synchronize()
    verdict = reference.check(inputs.outputs(data), expected)
    if not verdict.ok:
        raise NvggError(f"the instrumented kernel is wrong on case {case.id}: {verdict.message}")
    report = phases.analyse(buffer.cpu())
    timer = timing.EventTimer(session.device)
    plain = timer.batch(session.launches).mean_us
    instrumented = timer.batch([launch for launch, _ in launches]).mean_us
    return PhaseRun(report, buffer.cpu(), plain, instrumented)
