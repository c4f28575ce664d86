"""What the leaderboard will say: a protocol's plan (nvgg/protocol.py) run as the competition's
evaluator runs it, one worker process for every benchmark of a submission in the file's order,
and its means set beside nvgg's steady state.

In the worker (`predict`): each pass generates its inputs (seed + step before each, as the
evaluator's `seed += 42`), checks every input once on a clone of it (all calls first, then the
checks, against nvgg's exact reference at the protocol's tolerance), then times repetitions:
synchronize, L2 cleared by a new fp32 randn tensor of the protocol's shape, one event pair around
the calls, time / calls; the protocol's stop rule and statistics. The calls in the timed loop are
the submission's own `custom_kernel`, called from a loop as thin as the evaluator's; two clock
reads and one event beside each repetition (outside the event pair, or on the host only) record
the host's time to issue its calls and the clear's time on the device, which `protocol.explain`
needs.

Our own kernels (no submission) are timed as nvgg's own path times them: every input a pass makes
(the originals, and each repetition's fresh clones) is prepared before the timed calls, which only
launch and return the C tensors. Their rows show our kernels under the evaluator's timer; what a
submission that prepares on its first call on a tensor pays is tests/fixtures/submissions/ours.py's.

In the parent (`predict_all`): one fresh process for each submission or build, the protocol's
environment set in it; what it returns is set on the rows' Results beside their steady state.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from . import procs, protocol as protomod
from .cases import Case
from .errors import NvggError
from .result import Result, Row

IMPORT_S = 300.0  # a worker's own start: imports, a submission's compiles on its first calls


def _clone(data):
    """A deep copy of an input, every tensor cloned (the containers rebuilt), as the check gets it."""
    import torch
    if isinstance(data, tuple):
        return tuple(_clone(x) for x in data)
    if isinstance(data, list):
        return [_clone(x) for x in data]
    if isinstance(data, dict):
        return {k: _clone(v) for k, v in data.items()}
    return data.clone() if isinstance(data, torch.Tensor) else data


class _Ours:
    """Our kernels called as nvgg times them: each input's launch prepared before the timed calls
    (`prepare_all`; the input kept with it, so its identity is not reused), launched on every call
    (an input not prepared yet, as the check's clones, is prepared on its call)."""

    def __init__(self, row: Row, device):
        self.row, self.device, self.prepared = row, device, {}
        self.be = self.st = None

    def ready(self, case: Case) -> None:
        """The case's kernels compiled before its pass (a submission compiles on its first call,
        which the check makes: untimed either way)."""
        import torch
        from .backends.base import arch_of
        from .selection import select
        self.be, self.st = select(case, self.row.strategy, self.row.backend, self.row.tensormaps, self.device,
                                  dict(self.row.point))
        sms = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.be.compile(case, arch_of(self.device), grouped=self.st.grouped, sms=sms)

    def prepare_all(self, batch) -> None:
        """Every input of `batch` prepared now, outside the timed calls; those of an earlier batch let go."""
        self.prepared = {id(data): (data, self.st.prepare(self.be, data)) for data in batch}

    def __call__(self, data):
        key = id(data)
        if key not in self.prepared:
            self.prepared[key] = (data, self.st.prepare(self.be, data))
        self.prepared[key][1].launch()
        return [c for _, _, c in data[0]]


def predict(row: Row, cases: list[Case], spec: str) -> list[dict]:
    """In a fresh worker: the protocol `spec`'s plan for the submission (or build) of `row` over
    `cases` in order; a dict for each pass (warm-ups with "warmup": True), as `_pass` returns."""
    import torch
    from .backends import submission as sub
    proto, mode = protomod.parse(spec)
    device = torch.device(row.device) if row.device else torch.device("cuda")
    if device.index is not None:
        torch.cuda.set_device(device)
    caller = None
    out: list[dict] = []
    failed = None
    for p in protomod.plan(proto, mode, [c.id for c in cases]):
        case = cases[p.index]
        if failed is not None and not p.warmup:
            out.append({"case": case.id, "index": p.index, "warmup": False, "status": "not-run",
                        "message": f"not run: the {mode.name} mode stops at the first failure ({failed})"})
            continue
        try:
            if caller is None:  # imported at its first pass, as the evaluator's worker does
                if row.submission:
                    module = sub.loaded(row.submission, case.id)
                    sub.give_point(module, row.point)
                    caller = module.custom_kernel
                else:
                    caller = _Ours(row, device)
            if isinstance(caller, _Ours):
                caller.ready(case)
            result = _pass(proto, p, case, caller, device)
        except NvggError as exc:
            result = {"status": "fail", "message": str(exc)}
        except Exception as exc:
            why = sub.failure(exc, row.submission, case.id) if row.submission else f"{type(exc).__name__}: {exc}"
            result = {"status": "fail", "message": f"raised: {why}"}
        result.update(case=case.id, index=p.index, warmup=p.warmup)
        out.append(result)
        if result["status"] != "ok" and not p.warmup and mode.stop_at_failure:
            failed = f"case {case.id}: {result['message']}"
    return out


def _pass(proto: protomod.Protocol, p: protomod.Pass, case: Case, call, device) -> dict:
    """One pass: inputs made, checked once on clones, then timed until the stop rule; the
    evaluator's statistics in µs a call, every repetition's time, and beside them the host's time
    to issue each repetition's calls and the L2 clear's time on the device."""
    import torch
    from . import inputs, reference
    wall0 = time.perf_counter()
    batch = [inputs.generate(case, device, seed=case.seed + proto.seed_step * (i + 1)) for i in range(proto.inputs)]
    check_copy = _clone(batch)
    outputs = [call(_clone(data)) for data in batch]
    torch.cuda.synchronize(device)
    for i, (data, got) in enumerate(zip(check_copy, outputs)):
        verdict = reference.check(got, reference.reference(data, torch.float64), proto.rtol, proto.atol, max_report=1)
        if not verdict.ok:
            return {"status": "fail", "message": f"checked on clones: input {i}: {verdict.message}"}
    del outputs
    ahead = getattr(call, "prepare_all", None)  # our kernels: prepared before the timed calls
    if ahead is not None:
        ahead(batch)
    durations, host_us, clear_us = [], [], []
    recent: list = []
    fresh = p.inputs == "fresh-clones"
    began = time.perf_counter_ns()
    for _ in range(p.repeats):
        torch.cuda.synchronize(device)
        if fresh:
            timed = _clone(batch)
            recent = (recent + [timed])[-max(p.keep_clones, 1):]
            if ahead is not None:
                ahead(timed)
        else:
            timed = batch
        got = []
        before = torch.cuda.Event(enable_timing=True)
        before.record()
        torch.randn(proto.clear_shape, device=device)  # the clear: made and dropped
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        h0 = time.perf_counter()
        for data in timed:
            got.append(call(data))
        h1 = time.perf_counter()
        end.record()
        torch.cuda.synchronize(device)
        durations.append(start.elapsed_time(end) / len(timed) * 1e6)
        host_us.append((h1 - h0) * 1e6)
        clear_us.append(before.elapsed_time(start) * 1e3)
        if p.recheck:  # (every reference made again each repetition, as the evaluator's check does: that
            # time counts in the elapsed time its stop rule reads)
            verdicts = [reference.check(o, reference.reference(d, torch.float64), proto.rtol, proto.atol, max_report=1)
                        for d, o in zip(check_copy, got)]
            if not verdicts[-1].ok:  # (the evaluator keeps the last input's verdict only)
                return {"status": "fail", "message": f"rechecked when timed: input {len(verdicts) - 1}: "
                                                     f"{verdicts[-1].message}"}
        if protomod.stops(proto.stop, durations, time.perf_counter_ns() - began, p.budget_ns):
            break
    del recent
    s = protomod.stats(durations)
    rest = durations[1:]
    return {"status": "ok", "message": "", "runs": s.runs, "mean_us": s.mean / 1e3, "std_us": s.std / 1e3,
            "err_us": s.err / 1e3, "best_us": s.best / 1e3, "worst_us": s.worst / 1e3,
            "first_us": durations[0] / 1e3, "rest_mean_us": sum(rest) / len(rest) / 1e3 if rest else None,
            "durations_us": [d / 1e3 for d in durations], "host_us": host_us, "clear_us": clear_us,
            "inputs": p.inputs, "calls": len(batch), "wall_s": time.perf_counter() - wall0}


# ---------------------------------------------------------------- in the parent

@dataclass
class Entry:
    """The rows of one submission (or build) over the cases, in order."""

    rows: list[Row]
    results: list[Result]


def entries(rows: list[Row], results: list[Result]) -> list[Entry]:
    """Rows grouped by what they run (a submission and its point, or a strategy/backend build),
    each group's cases in the order given."""
    groups: dict[tuple, Entry] = {}
    for row, result in zip(rows, results):
        key = (row.submission, row.source, row.revision, row.point, row.strategy, row.backend, row.tensormaps)
        groups.setdefault(key, Entry([], [])).rows.append(row)
        groups[key].results.append(result)
    return list(groups.values())


def time_limit(proto: protomod.Protocol, mode: protomod.Mode, cases: int) -> float:
    """A worker's time limit: every pass at its wall limit, plus the worker's own start."""
    passes = cases + (1 if mode.warmup == "first" else cases)
    return IMPORT_S + passes * (proto.stop.wall_ns / 1e9 + 60.0)


def predict_all(rows: list[Row], results: list[Result], spec: str, *, on_start=None, on_result=None) -> dict:
    """Every entry's plan run in a fresh worker (`predict`), each timed pass set on its Result as
    `protocol` (with why its mean departs from the steady state); the document's `protocol` and
    `protocol_geomean_us` returned. An entry whose steady-state rows did not all pass is not run
    (its check would fail there too, or its fault or hang cost the time twice)."""
    from .report import label
    proto, mode = protomod.parse(spec)
    ordered = [r.case.id for r in rows]
    order = list(dict.fromkeys(ordered))
    means: dict[str, float] = {}
    for entry in entries(rows, results):
        name = label(entry.results[0])
        bad = [r for r in entry.results if r.status != "ok"]
        if bad:
            for r in entry.results:
                r.protocol = {"status": "not-run", "message": f"not run: its steady-state row of case {bad[0].case} "
                                                              f"ended {bad[0].status}"}
            continue
        if on_start:
            on_start(name)
        cases = [r.case for r in entry.rows]
        try:
            passes = procs.run_once(predict, timeout_s=time_limit(proto, mode, len(cases)),
                                    gpu=None, env=proto.environment, row=entry.rows[0], cases=cases, spec=spec)
        except (procs.ChildFailure, procs.ChildError) as exc:
            passes = [{"case": c.id, "warmup": False, "status": "fail", "message": f"the worker failed: {exc}"}
                      for c in cases]
        timed = {p["case"]: p for p in passes if not p.get("warmup")}
        warm = [p for p in passes if p.get("warmup")]
        for r in entry.results:
            p = timed.get(r.case, {"status": "fail", "message": "no timed pass came back"})
            r.protocol = _judged(p, r, warm)
        ok = [r.protocol.get("mean_us") for r in entry.results if r.protocol.get("status") == "ok"]
        g = protomod.geomean(ok) if len(ok) == len(entry.results) else None
        if g is not None:
            means[name] = g
        if on_result:
            on_result(name, g)
    return {"protocol": proto.describe(mode, order), "protocol_geomean_us": means}


def predict_versions(todo: list[list[Row]], done: list, spec: str, *, on_start=None,
                     on_result=None) -> tuple[list[Result], dict]:
    """`ab --protocol`: every version's rows over the cases (`todo`, a case's rows a version each)
    under the protocol (`predict_all`), each case's first run of the version (`done`, ab.CaseAB)
    its steady state; the Results in version order, and the document's keys."""
    import copy
    rows, results = [], []
    for v in range(len(todo[0])):
        for case_rows, ab in zip(todo, done):
            row, first = case_rows[v], (ab.first[v] if v < len(ab.first) else None)
            rows.append(row)
            results.append(copy.copy(first) if first is not None else row.failed("error", "no first run"))
    return results, predict_all(rows, results, spec, on_start=on_start, on_result=on_result)


def _judged(p: dict, r: Result, warm: list[dict]) -> dict:
    """A timed pass with its departure from the row's steady state (protocol.explain); the host's
    and the clear's times a repetition kept as their medians."""
    out = dict(p)
    out["warmups"] = [{k: w.get(k) for k in ("case", "status", "runs", "mean_us", "message")} for w in warm]
    if p.get("status") != "ok":
        return out
    host = statistics.median(p["host_us"]) if p.get("host_us") else None
    clear = statistics.median(p["clear_us"]) if p.get("clear_us") else None
    steady = r.stats.mean_us if r.stats is not None else None
    noise = (r.stats.rerun_us or (r.stats.err_us * 2)) if r.stats is not None else None
    d = protomod.explain(p["durations_us"], steady, noise, inputs=p.get("inputs", "originals"),
                         host_us=p.get("host_us") or None, clear_us=clear, calls=p.get("calls", 15))
    out.update(steady_us=steady, departs=d.departs, difference_us=d.difference_us, noise_us=d.noise_us, cause=d.cause,
               caveat=d.caveat, host_us=host, clear_us=clear)
    return out


def memory_needed(proto: protomod.Protocol, case: Case) -> int:
    """GPU memory a pass holds: its inputs three times (originals, the check's copy, the clones the
    check calls get) with their exact references, and the L2 clear."""
    from . import inputs
    return 3 * inputs.memory_needed(case, proto.inputs, 8) + proto.clear_bytes


def check_memory(proto: protomod.Protocol, cases: list[Case], device) -> None:
    """Refuse, before any work, a protocol whose clear and inputs cannot fit in the GPU's free memory."""
    from . import inputs
    free = inputs.memory_free(device)
    need = max(memory_needed(proto, c) for c in cases)
    if free is not None and need > free:
        raise NvggError(f"protocol {proto.name} needs about {need / 1e9:.0f} GB free on the GPU (its L2 clear alone "
                        f"allocates {proto.clear_bytes / 2**30:.1f} GiB) and {free / 1e9:.0f} GB are free: run it "
                        "on a GPU with more memory, or free the GPU")
