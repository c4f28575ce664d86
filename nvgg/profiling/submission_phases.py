"""`nvgg profile --phases --submission`: the phases inside a user's own kernels, from their probe
marks (nvgg.probe), reported as nvgg reports its own.

Two child processes per case (procs.run_once), each the submission in a process of its own with a
timeout:

1. probes on (NVGG_PROBES=1): every input checked against the reference with the marks compiled
   in; then `CALLS` calls one at a time, L2 flushed before each, under CUPTI, the probe pool
   zeroed before each (outside the recording); the call whose kernel time is the median gives
   the buffers; then two calls back to back, both checked, to see whether a call's CTAs start
   before the previous call's last mark (overlapping calls).
2. probes off: the same check and the same CUPTI calls, for the kernel time without marks.

The parent turns the buffers into one PhaseReport per kernel (profiling/phases.py), beside the
instrumentation cost (median CUPTI kernel time of a call, marked against unmarked) and how much of
the call's kernel time the marks span.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field

from tabulate import tabulate

from .. import procs
from ..backends import submission as sub
from ..cases import Case
from ..errors import NvggError
from ..kernels.phase_slots import SlotLayout
from ..report import fmt_us
from . import phases

CALLS = 11     # calls recorded under CUPTI, each alone
INPUTS = 3     # inputs generated and checked (the calls cycle through them)

HOW_TO_MARK = ("mark its kernels with nvgg.probe: PHASES = Probe('my_kernel', ('start', 'first_mma', 'exit')); "
               "pass PHASES.buffer(ctas) (CUDA C++) or PHASES.cute_buffer(ctas) (CuTe DSL) to each launch; "
               "NVGG_MARK(probes, my_kernel::first_mma) or PHASES.mark(probes, 'first_mma') in the kernel "
               "(README: Phases inside your own kernel)")


class CaseFailure(NvggError):
    """This case went wrong (wrong output, a crash, a timeout); other cases may still run. Any
    other NvggError from `run` is the submission's own and holds for every case."""


@dataclass
class KernelPhases:
    kernel: str
    marks: list
    report: phases.PhaseReport

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "marks": self.marks, **self.report.to_dict()}


@dataclass
class SubmissionPhases(phases.Phases):
    case: str
    path: str
    kernels: list = field(default_factory=list)     # KernelPhases, in the order of their first launch
    launches: list = field(default_factory=list)    # the reported call's buffers: {kernel, marks, rows}
    checked_inputs: int = 0
    instrumented_us: float = 0.0    # median over calls of the call's CUPTI kernel time (union), marks on
    plain_us: float = 0.0           # the same without marks
    instrumented_calls_us: list = field(default_factory=list)  # every call's, marks on
    plain_calls_us: list = field(default_factory=list)         # every call's, marks off
    call_cupti_us: float = 0.0      # the reported call's CUPTI kernel time (marks on)
    call_marked_us: float = 0.0     # the reported call's first reading to its last
    cupti_kernels: list = field(default_factory=list)  # the reported call's kernels: [name, µs]
    next_call: phases.Behind | None = None  # a second call right after a first, nothing between
    errors: list = field(default_factory=list)      # bad input seen in the buffers

    @property
    def cost(self) -> float:
        return self.instrumented_us / self.plain_us - 1 if self.plain_us else 0.0

    def spread(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """The quartiles of the calls' kernel times, marks on and off: the noise beside the cost."""
        def quartiles(values):
            if len(values) < 2:
                return (values[0], values[0]) if values else (0.0, 0.0)
            q = statistics.quantiles(values, n=4)
            return q[0], q[2]
        return quartiles(self.instrumented_calls_us), quartiles(self.plain_calls_us)

    @property
    def behind(self) -> phases.Behind | None:
        """The next call's start, for the verdict, where the calls overlap (as ours do when they
        are launched programmatically)."""
        return self.next_call if self.next_call is not None and self.next_call.overlap else None

    @property
    def main(self) -> phases.PhaseReport | None:
        """The report of the kernel that takes longest, for the verdict."""
        return max((k.report for k in self.kernels), key=lambda r: r.kernel_us, default=None)

    def trace(self) -> dict:
        return phases.chrome_trace_launches([(f"{launch['kernel']} (launch {i})", launch["rows"], layout_of(launch))
                                             for i, launch in enumerate(self.launches)])

    def table(self) -> str:
        """One table over the kernels' spans, a summary line a kernel with what its buffers show
        wrong, the cost of the marks and how much of the call's kernel time they span, and the
        next call's start."""
        rows = [[k.kernel, p.name, p.ctas, fmt_us(p.median_us), fmt_us(p.max_us)] for k in self.kernels
                for p in k.report.phases]
        lines = [f"submission {self.path}: {len(self.kernels)} marked kernel(s), {len(self.launches)} launch(es) a call; "
                 f"output checked on {self.checked_inputs} inputs with the marks on",
                 tabulate(rows, headers=["kernel", "span", "CTAs", "median µs", "max µs"], tablefmt="github",
                          disable_numparse=True)]
        for k in self.kernels:
            rep = k.report
            first = ("" if rep.time_to_first_mma_us is None else
                     f", time to first MMA {rep.time_to_first_mma_us:.2f} µs (median), setup share {rep.setup_share:.1%}")
            lines.append(f"{k.kernel}: {rep.launches} launch(es), {rep.ctas} CTAs marked ({rep.ctas_with_work} with work), "
                         f"first mark to last {rep.kernel_us:.2f} µs{first}")
            lines += [f"  {note}" for note in rep.notes]
        (on_lo, on_hi), (off_lo, off_hi) = self.spread()
        lines.append(f"instrumentation cost: CUPTI kernel time a call {self.instrumented_us:.2f} µs with marks (quartiles "
                     f"{on_lo:.2f}-{on_hi:.2f}) vs {self.plain_us:.2f} µs without ({off_lo:.2f}-{off_hi:.2f}): "
                     f"{self.cost:+.1%} (medians of {len(self.instrumented_calls_us)} calls each, L2 flushed before each)")
        share = self.call_marked_us / self.call_cupti_us if self.call_cupti_us else 0.0
        step = min((k.report.timer_step_ns for k in self.kernels if k.report.timer_step_ns), default=None)
        lines.append(f"the marks span {self.call_marked_us:.2f} µs of the call's {self.call_cupti_us:.2f} µs kernel time "
                     f"(CUPTI, {share:.1%})" + (f"; readings differ by at least {step} ns" if step else ""))
        nxt = self.next_call
        if nxt is not None:
            how = "the calls overlap" if nxt.overlap else "the calls do not overlap"
            mma = "" if nxt.first_mma_median_us is None else f", first MMA at {nxt.first_mma_median_us:+.2f} µs (median)"
            lines.append(f"next call, launched right after with nothing between: its CTAs with work start at "
                         f"{nxt.start_earliest_us:+.2f} µs from this call's last mark (earliest; median "
                         f"{nxt.start_median_us:+.2f}){mma}: {how}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"case": self.case, "submission": self.path, "kernels": [k.to_dict() for k in self.kernels],
                "checked_inputs": self.checked_inputs, "instrumented_us": self.instrumented_us,
                "plain_us": self.plain_us, "instrumentation_cost": self.cost,
                "instrumented_calls_us": self.instrumented_calls_us, "plain_calls_us": self.plain_calls_us,
                "call_cupti_us": self.call_cupti_us,
                "call_marked_us": self.call_marked_us, "cupti_kernels": self.cupti_kernels,
                "next_call": dict(self.next_call.__dict__, overlap=self.next_call.overlap) if self.next_call else None,
                "errors": self.errors, "launches": self.launches}


def run(path: str, case: Case, *, timeout_s: float | None = None) -> SubmissionPhases:
    """Profile one case. A problem of the submission itself (it does not import, marks nothing,
    misuses a probe) raises NvggError; one of this case (wrong output, a crash, a timeout) too,
    with the case named; CTAs past a buffer's rows are kept in `errors` beside the report."""
    marked = _child(path, case, timeout_s, probes=True)
    plain = _child(path, case, timeout_s, probes=False)
    out = SubmissionPhases(case=case.id, path=str(path), checked_inputs=marked["checked"],
                           instrumented_us=statistics.median(marked["busy_us"]),
                           plain_us=statistics.median(plain["busy_us"]),
                           instrumented_calls_us=marked["busy_us"], plain_calls_us=plain["busy_us"])
    call = marked["call"]
    out.launches, out.call_cupti_us, out.cupti_kernels = call["launches"], call["busy_us"], call["kernels"]
    if not out.launches:
        raise NvggError(f"submission {path} asked for no probe buffer in a call: {HOW_TO_MARK}")
    out.kernels = kernels_of(out.launches)
    out.errors = [e for k in out.kernels for e in k.report.errors]
    readings = [v for launch in out.launches for r in launch["rows"][:-1] for v in r if v > 0]
    if not readings:
        raise NvggError(f"submission {path} passed probe buffers to its kernels but no mark was written (are the "
                        "marks compiled in? the kernel must be built after NVGG_PROBES=1 is set): " + HOW_TO_MARK)
    out.call_marked_us = (max(readings) - min(readings)) / 1e3
    first, second = ([(launch["rows"], layout_of(launch)) for launch in call] for call in marked["pair"])
    out.next_call = phases.behind(first, second)
    return out


def layout_of(launch: dict) -> SlotLayout:
    """The slots of one launch's buffer ({kernel, marks, rows}, as the child reports it)."""
    return SlotLayout.for_probe(launch["kernel"], launch["marks"])


def kernels_of(launches) -> list[KernelPhases]:
    """A call's launches ({kernel, marks, rows}) as one report a kernel, in the order of their
    first launch: a kernel launched several times (one launch a group, say) is one report."""
    by_kernel: dict[str, list] = {}
    for launch in launches:
        by_kernel.setdefault(launch["kernel"], []).append(launch)
    out = []
    for kernel, mine in by_kernel.items():
        layout = layout_of(mine[0])
        out.append(KernelPhases(kernel, list(layout.names), phases.analyse_launches([m["rows"] for m in mine], layout)))
    return out


def _child(path: str, case: Case, timeout_s: float | None, *, probes: bool) -> dict:
    which = "with marks" if probes else "without marks"
    try:
        raw = procs.run_once(child, path=os.path.abspath(path), case=case, probes=probes, timeout_s=timeout_s,
                             env={"NVGG_PROBES": "1" if probes else "0"})
    except (procs.ChildFailure, procs.ChildError) as exc:
        raise CaseFailure(f"case {case.id} ({which}): {exc}") from None
    except NvggError as exc:
        raise CaseFailure(f"case {case.id} ({which}): {exc}") from None
    if raw.get("error"):
        if raw.get("case_specific"):
            raise CaseFailure(f"case {case.id} ({which}): {raw['error']}")
        raise NvggError(raw["error"])
    return raw


# --- the child ------------------------------------------------------------------------------


def child(path: str, case: Case, probes: bool) -> dict:
    """In the child: the submission's marked (or unmarked) calls, as plain data; a problem of the
    submission as {"error": ..., "case_specific": whether it is this case's alone}."""
    import torch

    from .. import datapath, probe as probemod, reference, timing
    from ..inputs import outputs
    from . import cupti

    if not torch.cuda.is_available():
        return {"error": "profiling phases needs a CUDA GPU and none is visible"}
    try:
        module = sub.load(path)
    except NvggError as exc:
        return {"error": str(exc)}
    session = datapath.setup(case, strategy=sub.AsSubmitted(), backend=sub.SubmissionBackend(module), batch=INPUTS)
    if not datapath.check(session):
        message = session.result.message
        if "ProbeError" in message:
            return {"error": f"submission {path}: {message.split('ProbeError: ', 1)[-1]}"}
        return {"error": f"the submission failed its check: {message}", "case_specific": True}
    device, launches, pool = session.device, session.launches, probemod.session()
    flush = timing.L2Flush(device)
    calls = []
    for i in range(CALLS):
        flush()
        pool.begin()
        torch.cuda.synchronize(device)
        acts = cupti.record(launches[i % len(launches)], device)
        launched = [launch.to_dict() for launch in pool.calls()[-1]] if probes else []
        calls.append({"busy_us": cupti.summarize(acts).busy_us, "kernels": [[a.name, a.us] for a in acts],
                      "launches": launched})
    busy = [c["busy_us"] for c in calls]
    result = {"checked": session.result.checked_inputs, "busy_us": busy,
              "call": sorted(calls, key=lambda c: c["busy_us"])[len(calls) // 2]}
    if probes:
        result["pair"] = _back_to_back(session, pool, reference, outputs)
        if isinstance(result["pair"], str):
            return {"error": result["pair"], "case_specific": True}
    return result


def _back_to_back(session, pool, reference, outputs):
    """Two calls with nothing between them, both outputs checked: each call's buffers."""
    import torch
    batch, launches = session.batch[:2], session.launches[:2]
    wants = [reference.reference(data) for data in batch]
    for data in batch:
        reference.poison(data)
    pool.begin()
    torch.cuda.synchronize(session.device)
    got = [launches[0]()]
    pool.next_call()
    got.append(launches[1]())
    torch.cuda.synchronize(session.device)
    for i, (data, want) in enumerate(zip(batch, wants)):
        verdict = reference.check(got[i] if got[i] is not None else outputs(data), want)
        if not verdict.ok:
            return f"two calls back to back: call {i} is wrong: {verdict.message}"
    return [[launch.to_dict() for launch in call] for call in pool.calls()]
