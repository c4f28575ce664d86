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

The parent turns the buffers into one PhaseReport a kernel launch and one a kernel over its
launches (profiling/phases.py), beside the instrumentation cost (median CUPTI kernel time of a
call, marked against unmarked). A call may launch a marked kernel several times (one launch a
group, say) among other kernels (library GEMMs): each marked launch is matched to its own CUPTI
record (`match_records`), so that the marks' span is set against the kernel time of the launches
they mark and nothing else, and launch i of the next call is set against launch i of this one
(`next_calls`). A submission's own error in the child is shown as backends/submission.py `failure`
shows it.
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
from ..strategies import AsSubmitted
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
    report: phases.PhaseReport                 # its launches pooled: statistics over all their CTAs
    each: list = field(default_factory=list)   # one PhaseReport a launch, in launch order

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "marks": self.marks, **self.report.to_dict(),
                "each_launch": [r.to_dict() for r in self.each]}


@dataclass
class MarkedLaunch:
    """One launch of a marked kernel in the reported call: its marks' extent, the CUPTI record
    matched to it (`match_records`), and where the same launch of the next call starts
    (`next_calls`)."""

    kernel: str
    index: int                      # its place among the call's launches of this kernel
    first_us: float | None          # its earliest reading, µs after the call's earliest; None: no CTA marked
    span_us: float = 0.0            # its earliest reading to its latest
    record: str | None = None       # the CUPTI kernel record it is; None where none was matched
    cupti_us: float | None = None   # that record's duration
    next_call: phases.Behind | None = None  # launch `index` of the next call against this one

    @property
    def covered_us(self) -> float:
        """The marks' span within its record's duration (a span past it by less than the match's
        tolerance is the two clocks' tick)."""
        return self.span_us if self.cupti_us is None else min(self.span_us, self.cupti_us)

    def to_dict(self) -> dict:
        nxt = self.next_call
        return {"kernel": self.kernel, "index": self.index, "span_us": self.span_us, "record": self.record,
                "cupti_us": self.cupti_us, "next_call": dict(nxt.__dict__, overlap=nxt.overlap) if nxt else None}


# Give or take this much, a marked launch lies inside a CUPTI record (`match_records`). CUPTI's
# start stamps and %globaltimer count from other origins, so no reading is set against a stamp;
# within a call the distance between them moved by well under this over its launches, and every
# launch's readings lay inside its record (a load_inline kernel between cuBLAS GEMMs on an H100:
# lab log). It also covers a timer that ticks once a microsecond (an H100's is finer: NOTES.md).
TOLERANCE_US = 1.0


def marked_launches(launches) -> list[MarkedLaunch]:
    """A call's buffers ({kernel, marks, rows}, in the order they were asked for) as launches, each
    numbered among its kernel's. Readings are counted from the call's earliest, in integer ns, before
    they become µs: %globaltimer reads near the host's Unix time (TOLERANCE_US), about 1.8e18 ns,
    where a double in µs keeps only quarter microseconds."""
    extents = [phases.extent(launch["rows"], layout_of(launch)) for launch in launches]
    origin = min((found[0] for found in extents if found), default=0)
    out, seen = [], {}
    for launch, found in zip(launches, extents):
        index = seen[launch["kernel"]] = seen.get(launch["kernel"], -1) + 1
        out.append(MarkedLaunch(launch["kernel"], index, None if not found else (found[0] - origin) / 1e3,
                                0.0 if not found else (found[1] - found[0]) / 1e3))
    return out


def match_records(launches: list[MarkedLaunch], records, tolerance_us: float = TOLERANCE_US) -> list[str]:
    """Which of the call's CUPTI records ([name, µs, start µs], by start) are the marked launches:
    each launch's `record` and `cupti_us` set; a note for a kernel that none fits.

    Assumes: a kernel's i-th buffer is its i-th launch; one kernel's records, in start order, are its
    launches in the order they were issued (one stream: launches on several streams may start out of
    order, and then no name fits rather than a wrong one); %globaltimer and CUPTI's timestamps count
    nanoseconds at the same rate, from origins that differ (far apart on an H100: TOLERANCE_US),
    so a reading is never set against a timestamp, only differences are. A kernel's launches
    are the records of the one name (not taken by another kernel) that ran as many times in the call
    as the kernel asked for buffers and holds them: a launch's marks span no more than its record
    lasts, and one shift of the clocks puts every launch's readings inside its record (both give or
    take `tolerance_us`). Among several such names (a library kernel launched as often), the one the
    marks fill most: the least kernel time outside the marks."""
    by_name: dict[str, list] = {}
    for name, us, start in records:
        by_name.setdefault(name, []).append((start, start + us))
    taken, notes = set(), []
    for kernel in dict.fromkeys(launch.kernel for launch in launches):
        mine = [launch for launch in launches if launch.kernel == kernel]
        if all(launch.first_us is None for launch in mine):
            continue
        fits = []
        for name, spans in by_name.items():
            outside = _fit(mine, spans, tolerance_us) if name not in taken and len(spans) == len(mine) else None
            if outside is not None:
                fits.append((outside, name))
        if not fits:
            notes.append(f"{kernel}: no CUPTI kernel record of the call fits its {len(mine)} launch(es) (as many records of "
                         "one name, each holding its launch's marks): its marks are not set against a kernel time")
            continue
        name = min(fits)[1]
        taken.add(name)
        for launch, (start, end) in zip(mine, by_name[name]):
            launch.record, launch.cupti_us = name, end - start
    return notes


def _fit(mine: list[MarkedLaunch], spans, tolerance_us: float) -> float | None:
    """The kernel time outside the marks where these records hold these launches, else None. A
    shift s (a reading minus a timestamp) puts launch i inside record i when start_i <= first_i - s
    and first_i + span_i - s <= end_i."""
    low, high, outside = float("-inf"), float("inf"), 0.0
    for launch, (start, end) in zip(mine, spans):
        outside += max(end - start - launch.span_us, 0.0)
        if launch.first_us is None:
            continue
        if launch.span_us > end - start + tolerance_us:
            return None
        low, high = max(low, launch.first_us + launch.span_us - end), min(high, launch.first_us - start)
    return outside if low <= high + tolerance_us else None


def next_calls(launches: list[MarkedLaunch], first, second) -> list[str]:
    """Two calls back to back (each a list of {kernel, marks, rows}): launch i of a kernel in the
    second against launch i of it in the first, set on the reported call's launch i (`next_call`);
    a note where the two calls launched a kernel a different number of times."""
    notes = []
    for kernel in dict.fromkeys(launch.kernel for launch in launches):
        ones, twos = ([b for b in call if b["kernel"] == kernel] for call in (first, second))
        if len(ones) != len(twos):
            notes.append(f"{kernel}: of two calls back to back, the first launched it {len(ones)} times and the second "
                         f"{len(twos)}: launches past {min(len(ones), len(twos))} have no next call to show")
        for launch in launches:
            if launch.kernel == kernel and launch.index < min(len(ones), len(twos)):
                one, two = ones[launch.index], twos[launch.index]
                launch.next_call = phases.behind([(one["rows"], layout_of(one))], [(two["rows"], layout_of(two))])
    return notes


@dataclass
class SubmissionPhases(phases.Phases):
    case: str
    path: str
    kernels: list = field(default_factory=list)     # KernelPhases, in the order of their first launch
    launches: list = field(default_factory=list)    # the reported call's buffers: {kernel, marks, rows}
    marked: list = field(default_factory=list)      # MarkedLaunch, one a buffer, in the same order
    checked_inputs: int = 0
    instrumented_us: float = 0.0    # median over calls of the call's CUPTI kernel time (union), marks on
    plain_us: float = 0.0           # the same without marks
    instrumented_calls_us: list = field(default_factory=list)  # every call's, marks on
    plain_calls_us: list = field(default_factory=list)         # every call's, marks off
    call_cupti_us: float = 0.0      # the reported call's CUPTI kernel time (marks on), all its kernels
    call_marked_us: float = 0.0     # the marks' spans summed over the marked launches matched to a record
                                    # (each launch's first reading to its last, within its record)
    marked_cupti_us: float = 0.0    # those launches' CUPTI kernel time, summed
    cupti_kernels: list = field(default_factory=list)  # the reported call's records: [name, µs, start µs]
    notes: list = field(default_factory=list)       # launches not matched to a record, calls launching unevenly
    errors: list = field(default_factory=list)      # bad input seen in the buffers

    @property
    def cost(self) -> float:
        return self.instrumented_us / self.plain_us - 1 if self.plain_us else 0.0

    @property
    def share(self) -> float | None:
        """The marks' span over the kernel time of the launches they mark (≤ 1); None: none matched."""
        return self.call_marked_us / self.marked_cupti_us if self.marked_cupti_us else None

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
        are launched programmatically) and the main kernel is launched once a call: then its launch
        in the next call against its launch in this one is the call against the call."""
        main = max(self.kernels, key=lambda k: k.report.kernel_us, default=None)
        mine = [launch for launch in self.marked if main is not None and launch.kernel == main.kernel]
        nxt = mine[0].next_call if len(mine) == 1 else None
        return nxt if nxt is not None and nxt.overlap else None

    @property
    def main(self) -> phases.PhaseReport | None:
        """The report of the kernel that takes longest, for the verdict."""
        return max((k.report for k in self.kernels), key=lambda r: r.kernel_us, default=None)

    def trace(self) -> dict:
        return phases.chrome_trace_launches([(f"{launch['kernel']} (launch {m.index})", launch["rows"], layout_of(launch))
                                             for launch, m in zip(self.launches, self.marked)])

    def table(self) -> str:
        """The spans of each kernel launch by launch then pooled, a summary line a kernel with what
        its buffers show wrong, the launches against their CUPTI records and the next call's, the
        cost of the marks, and how much of the marked launches' kernel time the marks span."""
        launches = sum(len(k.each) for k in self.kernels)
        lines = [f"submission {self.path}: {len(self.kernels)} marked kernel(s), {launches} launch(es) a call; "
                 f"output checked on {self.checked_inputs} inputs with the marks on",
                 tabulate(self._span_rows(), headers=["kernel", "launch", "span", "CTAs", "median µs", "max µs"],
                          tablefmt="github", disable_numparse=True)]
        for k in self.kernels:
            rep = k.report
            first = ("" if rep.time_to_first_mma_us is None else
                     f", time to first MMA {rep.time_to_first_mma_us:.2f} µs (median), setup share {rep.setup_share:.1%}")
            lines.append(f"{k.kernel}: {rep.launches} launch(es), {rep.ctas} CTAs marked ({rep.ctas_with_work} with work), "
                         f"first mark to last {rep.kernel_us:.2f} µs{' (median over launches)' if rep.launches > 1 else ''}"
                         f"{first}")
            lines += [f"  {note}" for note in rep.notes]
        lines.append(tabulate(self._launch_rows(), headers=[
            "kernel", "launch", "CUPTI record", "CUPTI µs", "marks µs", "share", "next call: this launch starts µs"],
            tablefmt="github", disable_numparse=True))
        lines += self.notes
        (on_lo, on_hi), (off_lo, off_hi) = self.spread()
        lines.append(f"instrumentation cost: CUPTI kernel time a call {self.instrumented_us:.2f} µs with marks (quartiles "
                     f"{on_lo:.2f}-{on_hi:.2f}) vs {self.plain_us:.2f} µs without ({off_lo:.2f}-{off_hi:.2f}): "
                     f"{self.cost:+.1%} (medians of {len(self.instrumented_calls_us)} calls each, L2 flushed before each)")
        lines.append(self._share_line())
        nxt = self._next_line()
        if nxt:
            lines.append(nxt)
        return "\n".join(lines)

    def _span_rows(self) -> list:
        rows = []
        for k in self.kernels:
            for i, rep in enumerate(k.each):
                rows += [[k.kernel, str(i), p.name, p.ctas, fmt_us(p.median_us), fmt_us(p.max_us)] for p in rep.phases]
                if not rep.ctas:
                    rows.append([k.kernel, str(i), "(no CTA marked)", 0, "—", "—"])
            if len(k.each) > 1:
                rows += [[k.kernel, f"all {len(k.each)}", p.name, p.ctas, fmt_us(p.median_us), fmt_us(p.max_us)]
                         for p in k.report.phases]
        return rows

    def _launch_rows(self) -> list:
        rows = []
        for m in self.marked:
            nxt, spanned = m.next_call, m.first_us is not None
            rows.append([m.kernel, str(m.index), _short(m.record) if m.record else "—", fmt_us(m.cupti_us),
                         fmt_us(m.span_us if spanned else None),
                         f"{m.covered_us / m.cupti_us:.1%}" if m.cupti_us and spanned else "—",
                         "—" if nxt is None else f"{nxt.start_earliest_us:+.2f} (median {nxt.start_median_us:+.2f})"])
        return rows

    def _share_line(self) -> str:
        step = min((k.report.timer_step_ns for k in self.kernels if k.report.timer_step_ns), default=None)
        matched = [m for m in self.marked if m.record and m.first_us is not None]
        tick = f"; readings differ by at least {step} ns" if step else ""
        if not matched:
            return ("the marks are set against no kernel time: no CUPTI record of the call was matched to a marked "
                    f"launch (the call's kernels: {self.call_cupti_us:.2f} µs){tick}")
        return (f"the marks span {self.call_marked_us:.2f} µs of the {self.marked_cupti_us:.2f} µs kernel time of the "
                f"{len(matched)} launch(es) they mark (CUPTI, {self.share:.1%}; the call's kernels: "
                f"{self.call_cupti_us:.2f} µs){tick}")

    def _next_line(self) -> str:
        paired = [m for m in self.marked if m.next_call is not None]
        if not paired:
            return ""
        overlapping = [m for m in paired if m.next_call.overlap]
        if len(paired) == 1:
            b = paired[0].next_call
            mma = "" if b.first_mma_median_us is None else f", first MMA at {b.first_mma_median_us:+.2f} µs (median)"
            when = f"{b.start_earliest_us:+.2f} µs (earliest; median {b.start_median_us:+.2f}){mma}"
        else:
            starts = [m.next_call.start_earliest_us for m in paired]
            span = f"{min(starts):+.2f}" + (f" to {max(starts):+.2f}" if max(starts) > min(starts) else "")
            when = f"{span} µs (the earliest of each launch, by launch above)"
        how = ("the calls do not overlap" if not overlapping else
               f"the calls overlap ({len(overlapping)} of {len(paired)} launches start before the same launch of this "
               "call ends)")
        return (f"next call, launched right after with nothing between: its CTAs with work start at {when} from the "
                f"last mark of the same launch of this call: {how}")

    def to_dict(self) -> dict:
        return {"case": self.case, "submission": self.path, "kernels": [k.to_dict() for k in self.kernels],
                "checked_inputs": self.checked_inputs, "instrumented_us": self.instrumented_us,
                "plain_us": self.plain_us, "instrumentation_cost": self.cost,
                "instrumented_calls_us": self.instrumented_calls_us, "plain_calls_us": self.plain_calls_us,
                "call_cupti_us": self.call_cupti_us, "call_marked_us": self.call_marked_us,
                "marked_cupti_us": self.marked_cupti_us, "share": self.share, "cupti_kernels": self.cupti_kernels,
                "marked_launches": [m.to_dict() for m in self.marked], "notes": self.notes,
                "errors": self.errors, "launches": self.launches}


def _short(name: str, width: int = 40) -> str:
    """A CUPTI kernel name for a table cell: a C++ name without its parameters, cut to `width`."""
    name = name.split("(", 1)[0] + "(…)" if "(" in name else name
    return name if len(name) <= width else name[:width - 1] + "…"


def run(path: str, case: Case, *, timeout_s: float | None = None, point: tuple = (),
        gpu: int | None = None) -> SubmissionPhases:
    """Profile one case. A problem of the submission itself (it does not import, marks nothing,
    misuses a probe) raises NvggError; one of this case (wrong output, a crash, a timeout) too,
    with the case named; CTAs past a buffer's rows are kept in `errors` beside the report.
    `point`: the CONFIG a config map gives the file for this case; `gpu`: the children's
    (procs.environment; None: whatever this process sees)."""
    marked = _child(path, case, timeout_s, probes=True, point=point, gpu=gpu)
    plain = _child(path, case, timeout_s, probes=False, point=point, gpu=gpu)
    return assemble(str(path), case.id, marked, plain)


def assemble(path: str, case_id: str, marked: dict, plain: dict) -> SubmissionPhases:
    """The report from the two children's answers (`child`: checked inputs, every call's kernel
    time, the median call's records and buffers, and with marks the two back-to-back calls' buffers)."""
    out = SubmissionPhases(case=case_id, path=path, checked_inputs=marked["checked"],
                           instrumented_us=statistics.median(marked["busy_us"]),
                           plain_us=statistics.median(plain["busy_us"]),
                           instrumented_calls_us=marked["busy_us"], plain_calls_us=plain["busy_us"])
    call = marked["call"]
    out.launches, out.call_cupti_us, out.cupti_kernels = call["launches"], call["busy_us"], call["kernels"]
    if not out.launches:
        raise NvggError(f"submission {path} asked for no probe buffer in a call: {HOW_TO_MARK}")
    out.kernels = kernels_of(out.launches)
    out.errors = [e for k in out.kernels for e in k.report.errors]
    out.marked = marked_launches(out.launches)
    if all(m.first_us is None for m in out.marked):
        raise NvggError(f"submission {path} passed probe buffers to its kernels but no mark was written (are the "
                        "marks compiled in? the kernel must be built after NVGG_PROBES=1 is set): " + HOW_TO_MARK)
    out.notes = match_records(out.marked, out.cupti_kernels) + next_calls(out.marked, *marked["pair"])
    spanned = [m for m in out.marked if m.record and m.first_us is not None]  # a launch no CTA marked spans nothing
    out.call_marked_us = sum(m.covered_us for m in spanned)
    out.marked_cupti_us = sum(m.cupti_us for m in spanned)
    return out


def layout_of(launch: dict) -> SlotLayout:
    """The slots of one launch's buffer ({kernel, marks, rows}, as the child reports it)."""
    return SlotLayout.for_probe(launch["kernel"], launch["marks"])


def kernels_of(launches) -> list[KernelPhases]:
    """A call's launches ({kernel, marks, rows}) as one report a kernel, in the order of their
    first launch: a kernel launched several times (one launch a group, say) is one report over all
    its launches' CTAs, beside one a launch."""
    by_kernel: dict[str, list] = {}
    for launch in launches:
        by_kernel.setdefault(launch["kernel"], []).append(launch)
    out = []
    for kernel, mine in by_kernel.items():
        layout = layout_of(mine[0])
        pooled = phases.analyse_launches([m["rows"] for m in mine], layout)
        each = [phases.analyse(m["rows"], layout) for m in mine] if len(mine) > 1 else [pooled]
        out.append(KernelPhases(kernel, list(layout.names), pooled, each))
    return out


def _child(path: str, case: Case, timeout_s: float | None, *, probes: bool, point: tuple = (),
           gpu: int | None = None) -> dict:
    which = "with marks" if probes else "without marks"
    try:
        raw = procs.run_once(child, path=os.path.abspath(path), case=case, probes=probes, timeout_s=timeout_s, gpu=gpu,
                             env={"NVGG_PROBES": "1" if probes else "0"}, **({"point": tuple(point)} if point else {}))
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


def child(path: str, case: Case, probes: bool, point: tuple = ()) -> dict:
    """In the child: the submission's marked (or unmarked) calls, as plain data; a problem of the
    submission as {"error": ..., "case_specific": whether it is this case's alone}."""
    import torch

    from .. import datapath, probe as probemod, reference
    from ..inputs import outputs

    if not torch.cuda.is_available():
        return {"error": "profiling phases needs a CUDA GPU and none is visible"}
    try:
        module = sub.load(path, case.id)
    except NvggError as exc:
        return {"error": str(exc)}
    sub.give_point(module, tuple(point))
    session = datapath.setup(case, strategy=AsSubmitted(), backend=sub.SubmissionBackend(module), batch=INPUTS)
    if not datapath.check(session):
        message = session.result.message
        if "ProbeError" in message:
            return {"error": f"submission {path}: {message.split('ProbeError: ', 1)[-1]}"}
        return {"error": f"the submission failed its check: {message}", "case_specific": True}
    pool = probemod.session()
    try:
        result = _recorded(session, pool, probes)
        if probes:
            result["pair"] = _back_to_back(session, pool, reference, outputs)
    except Exception as exc:  # the submission's own error, in a call after its check
        if "CUDA error" in str(exc):
            raise  # its context is lost: procs says so (procs.cuda_reason)
        return {"error": f"a call after the check failed: {sub.failure(exc, path, case.id)}", "case_specific": True}
    if isinstance(result.get("pair"), str):
        return {"error": result["pair"], "case_specific": True}
    return result


def _recorded(session, pool, probes: bool) -> dict:
    """`CALLS` calls one at a time under CUPTI, L2 flushed and the probe pool zeroed before each:
    every call's kernel time, and the median call's records ([name, µs, start µs from its first])
    and buffers."""
    import torch

    from .. import cupti, timing

    device, launches = session.device, session.launches
    flush = timing.L2Flush(device)
    calls = []
    for i in range(CALLS):
        flush()
        pool.begin()
        torch.cuda.synchronize(device)
        acts = cupti.record(launches[i % len(launches)], device)
        launched = [launch.to_dict() for launch in pool.calls()[-1]] if probes else []
        t0 = acts[0].start_ns if acts else 0
        calls.append({"busy_us": cupti.summarize(acts).busy_us, "launches": launched,
                      "kernels": [[a.name, a.us, (a.start_ns - t0) / 1e3] for a in acts]})
    busy = [c["busy_us"] for c in calls]
    return {"checked": session.result.checked_inputs, "busy_us": busy,
            "call": sorted(calls, key=lambda c: c["busy_us"])[len(calls) // 2]}


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
