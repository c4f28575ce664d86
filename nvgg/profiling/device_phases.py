"""`nvgg profile --phases`: the instrumented persistent kernel on one input, checked, its phase
buffer analysed, a Chrome trace written, and what the instrumentation itself costs (kernel
durations from CUPTI, instrumented against the timed build). Where the timed build is launched
programmatically (sm_90a), also the same build right behind another launch, as the timer's calls
run: how early its CTAs start and how late its first MMA comes against the end of the launch
before (`Behind`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch

from tabulate import tabulate

from .. import cupti, datapath, inputs, reference, timing
from ..report import fmt_us
from ..backends.base import arch_of
from ..cases import Case
from ..errors import NvggError
from ..kernels.phase_slots import SlotLayout
from . import phases
from .phases import Behind, Phases


@dataclass
class PhaseRun(Phases):
    report: phases.PhaseReport
    buffer: torch.Tensor
    plain_us: float          # uninstrumented kernel: median CUPTI kernel duration, L2 flushed before each
    instrumented_us: float   # instrumented kernel, the same way (its buffer zeroing not counted)
    layout: SlotLayout  # the slots of the kernel family that ran (its phase_layout)
    tensormaps: str = ""
    behind_previous: "Behind | None" = None  # programmatic launches: the kernel right behind another

    @property
    def cost(self) -> float:
        return self.instrumented_us / self.plain_us - 1

    @property
    def main(self) -> phases.PhaseReport:
        return self.report

    @property
    def behind(self) -> Behind | None:
        return self.behind_previous

    def trace(self) -> dict:
        return phases.chrome_trace(self.buffer, self.layout)

    def table(self) -> str:
        """Median and max over CTAs a phase, then the kernel's summary, the instrumentation's cost
        and, for programmatic launches, where the kernel starts right behind another."""
        rep = self.report
        rows = [[p.name, p.ctas, fmt_us(p.median_us), fmt_us(p.max_us)] for p in rep.phases]
        table = tabulate(rows, headers=["phase", "CTAs", "median µs", "max µs"], tablefmt="github", disable_numparse=True)
        mode = f", tensor maps {self.tensormaps}" if self.tensormaps else ""
        out = (f"{table}\n{self.layout.kernel}{mode}: "
               f"{rep.ctas} CTAs ({rep.ctas_with_work} with work), kernel {rep.kernel_us:.2f} µs, "
               f"time to first MMA {rep.time_to_first_mma_us:.2f} µs (median), setup share {rep.setup_share:.1%}, "
               f"group switches per CTA {rep.switches_median:g} (median)\n"
               f"instrumentation cost: kernel {self.instrumented_us:.2f} µs vs {self.plain_us:.2f} µs uninstrumented "
               f"({self.cost:+.1%}, CUPTI)")
        b = self.behind_previous
        if b is not None:
            out += (f"\nright behind another launch (programmatic, as the timer's calls run), against the moment its "
                    f"last CTA exits: CTAs start at {b.start_median_us:+.2f} µs (median; earliest {b.start_earliest_us:+.2f}), "
                    f"first MMA at {b.first_mma_median_us:+.2f} µs (median; latest {b.first_mma_max_us:+.2f})")
        return out

    def to_dict(self) -> dict:
        return {"phases": self.report.to_dict(), "plain_us": self.plain_us, "instrumented_us": self.instrumented_us,
                "instrumentation_cost": self.cost, "kernel": self.layout.kernel, "tensormaps": self.tensormaps,
                "behind_previous": self.behind_previous.__dict__ if self.behind_previous else None}


def run(case: Case, *, profile: str | None = None, tensormaps: str | None = None, backend="cute",
        point: dict | None = None) -> PhaseRun:
    """`backend`: "cute", or a cute backend object (then the mode is the object's); `point`: a
    config map's build of the persistent kernel (its instrumented twin is what is measured)."""
    session = datapath.setup(case, strategy="persistent", backend=backend, profile=profile, tensormaps=tensormaps,
                             point=point)
    if not datapath.check(session):
        raise NvggError(f"the persistent kernel failed its check on case {case.id}: {session.result.message}")
    backend = session.backend
    if not hasattr(backend, "phase_launcher"):
        raise NvggError(f"the {backend.name} backend has no instrumented build: phases need the cute backend")
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
    behind = None
    if getattr(backend.kernels(arch_of(session.device)), "programmatic", False):
        behind = behind_previous(backend, session.batch[:2], layout, case)
    return PhaseRun(report, buffer.cpu(), plain, instrumented, layout, session.result.tensormaps, behind)


def behind_previous(backend, batch, layout: SlotLayout, case: Case) -> Behind:
    """Launch the instrumented build programmatically over batch[0], then at once over batch[1],
    check both outputs, and measure the second against the first's end (see `Behind`)."""
    pair = [backend.phase_launcher(data, programmatic=True) for data in batch]
    wants = [reference.reference(data) for data in batch]
    for data, (_, buffer) in zip(batch, pair):
        reference.poison(data)
        buffer.zero_()
    # the zeroing done before the first launch: a programmatic launch may start before the kernel
    # before it ends, and the sm_100a build stamps its buffer before its wait (sm_90a's stamps wait)
    torch.cuda.synchronize()
    for launch, _ in pair:
        launch()
    torch.cuda.synchronize()
    for data, want in zip(batch, wants):
        verdict = reference.check(inputs.outputs(data), want)
        if not verdict.ok:
            raise NvggError(f"the instrumented kernel launched behind another is wrong on case {case.id}: {verdict.message}")
    first, second = ([(buffer.cpu(), layout)] for _, buffer in pair)
    return phases.behind(first, second)


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
