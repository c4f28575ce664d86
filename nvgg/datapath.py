"""The one data path: case -> inputs -> strategy x backend -> checked run -> timed run -> Result.

`setup` makes a case ready to launch (choices checked, kernels compiled, inputs generated, launches
prepared), `check` runs it once against the exact reference, `measure` times it with the
leaderboard's timer and checks what the timed calls returned, with what is measured beside the time
(the card's clocks, the energy a call, CUPTI's records) as observers it is handed (`Observer`).
`run_row` is that path for one Row, as a worker runs it. Nothing here knows processes, GPUs beyond
the one it is given, or the CLI.
"""

from __future__ import annotations

import copy
import gc
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from . import backends, clocks, cupti, env as envmod, inputs, occupancy, reference, sol as solmod, strategies, timing
from . import verdict as verdictmod
from .backends.base import arch_of
from .cases import Case
from .errors import NvggError
from .flags import flags_of
from .procs import timeline
from .profiles import Profile, for_gpu_name, get as get_profile
from .result import Result, Row
from .selection import default_device, select
from .strategies import AsSubmitted

CPU_BATCH = 3  # a CPU run times 3 inputs a repetition (not 15) so it finishes in seconds
# what a worker that runs rows imports as it starts, before its first call (procs.warm_up): this
# module, the rows' one data path (a local worker's preload, a Ray actor's start)
WORKER_PRELOAD = (__name__,)


def device_profile(device: torch.device, name: str | None) -> Profile | None:
    """The profile the SOL is quoted against: the one named, else the running GPU's, else none."""
    if name:
        return get_profile(name)
    if device.type == "cuda":
        return for_gpu_name(torch.cuda.get_device_name(device))
    return None


def batch_size(device: torch.device, batch: int | None = None) -> int:
    return batch or (inputs.BATCH if device.type == "cuda" else CPU_BATCH)


@dataclass
class Session:
    """A case made ready to launch: inputs generated, launches prepared, nothing timed yet."""

    case: Case
    backend: backends.Backend
    strategy: strategies.Strategy
    device: torch.device
    batch: list
    prepared: list
    result: Result
    rounds: int = 0  # timed runs so far (each on values of its own)
    round_started: float = 0.0  # an A/B's round under way: when it began (perf_counter)

    @property
    def launches(self) -> list:
        return [p.launch for p in self.prepared]


@dataclass(frozen=True)
class Timed:
    """A timed run as its observers read it: the calls timed, on which device, their statistics and
    when each repetition ended (time.perf_counter, timing.Windowed.ends)."""

    launches: list
    device: torch.device
    stats: timing.Stats
    ends: list[float]


class Observer(Protocol):
    """What is measured of a row beside its time: the card's clocks (clocks.Sampler), the energy a
    call (clocks.EnergyMeter), CUPTI's records of each call (cupti.Recorder). `start` as the timed
    run begins and `stop` after its last call (an A/B's round: around all its windows); then
    `record` writes what it measured into the row's Result. `after_check`: it records only once
    what the timed calls returned is found right (else whatever the check says). `repetitions`:
    what the timer itself must tell of its repetitions' exact span (timing.Observer), or None."""

    after_check: bool
    repetitions: timing.Observer | None

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def record(self, result: Result, timed: Timed) -> None: ...


def observers_for(device: torch.device, timer: str = "leaderboard", energy: bool = True,
                  rounds: bool = False) -> list[Observer]:
    """A row's observers: the card's clocks (sampled on a thread beside the timer; `rounds`, an
    A/B's round: read at its two ends alone), CUPTI's records where the timer is "cupti", the
    energy a call where `energy` and the card's energy counter can be read (clocks.meter)."""
    out: list[Observer] = [clocks.Sampler(device, period_s=None) if rounds else clocks.Sampler(device)]
    if timer == "cupti":
        out.append(cupti.Recorder())
    meter = clocks.meter(device) if energy else None
    if meter is not None:
        out.append(meter)
    return out


def setup(case: Case, *, strategy=None, backend=None, device: torch.device | None = None,
          profile: str | None = None, batch: int | None = None, tensormaps: str | None = None,
          point: dict | None = None) -> Session:
    """Check support, compile, generate the inputs and prepare every launch (outside any timing).
    `strategy` and `backend` are names (None: the defaults for this machine) or objects;
    `tensormaps` the persistent kernel's tensor-map mode (None: the kernel's default); `point` a
    point of the cute kernels' space its persistent build follows (nvgg/space.py).
    Unsupported -> NvggError."""
    device = device or default_device()
    clocks.idle(device)  # the card's power before this process's first row ran anything (read once)
    be, st = select(case, strategy, backend, tensormaps, device, point)
    count = batch_size(device, batch)
    check_memory(case, device, count)
    prof = device_profile(device, profile)
    result = Result(case=case.id, strategy=st.name, backend=be.name, status="ok", env=envmod.collect(device),
                    point=dict(point or {}))
    if st.grouped and device.type == "cuda":
        result.tensormaps = be.mode(arch_of(device))
    result.inputs = ("competition-identical (CUDA generator)" if inputs.same_bits_as_competition(device)
                     else "CPU generator: same algorithm, different bits from the competition's")
    if prof is not None:
        result.sol = solmod.sol(case, prof)
    result.sol_b200 = solmod.sol(case, get_profile("b200"))

    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        t0 = time.perf_counter()
        infos = be.compile(case, arch_of(device), grouped=st.grouped, sms=sms)
        result.kernels = [k.to_dict() for k in infos]
        result.setup_us["compile"] = (time.perf_counter() - t0) * 1e6
        t0 = time.perf_counter()
        be.compile(case, arch_of(device), grouped=st.grouped, sms=sms)  # again: what a cache hit costs
        result.setup_us["compile_warm"] = (time.perf_counter() - t0) * 1e6
        result.tiles = be.tiles(case, grouped=st.grouped, sms=sms, arch=arch_of(device))
        result.sms = sms
        if infos and prof is not None:
            result.ctas_per_sm = occupancy.of_kernel(infos[0], prof).blocks_per_sm

    batch_data = inputs.generate_batch(case, device, count)
    prepared = []
    for data in batch_data:
        p, prep_us = timing.host_time_us(lambda: st.prepare(be, data), device)
        prepared.append(p)
        result.setup_us.setdefault("first_prepare", prep_us)
    for key in prepared[0].setup_us:
        result.setup_us[key] = sum(p.setup_us[key] for p in prepared) / len(prepared)
    return Session(case, be, st, device, batch_data, prepared, result)


def check(session: Session) -> bool:
    """The checked run: poison, launch, compare with the exact reference; every input on a GPU
    (as the leaderboard does), the first on a CPU. Records the verdict in session.result. Our own
    launches write each input's C: their calls are queued one after the other and every input's
    outputs compared at once (reference.check_all: one wait for the device, not one an input). A
    submission's outputs are compared as each call returns them, as the competition's check does
    (a file may hand back one buffer of its own for every call)."""
    result, device = session.result, session.device
    count = len(session.batch) if device.type == "cuda" else 1
    dtype = torch.float64 if device.type == "cuda" else torch.float32
    # every reference first: their copies of the plain scales from the host wait for the device,
    # which between launches would hold each launch behind the one before
    wanted = [reference.reference(data, dtype) for data in session.batch[:count]]
    pairs, verdicts, calls_us = [], [], []
    for i, (data, p, expected) in enumerate(zip(session.batch[:count], session.prepared, wanted)):
        reference.poison(data)
        try:
            if i == 0 or _submitted(session):  # (a submission's fault is then its call's, as before the compare)
                out, call_us = timing.host_time_us(p.launch, device)
                result.setup_us.setdefault("first_call", call_us)
                calls_us.append(call_us)
            else:
                out = p.launch()
        except Exception as exc:  # a launch that raises is a failed result, not a crash of the tool
            result.status, result.message = "error", f"launch failed: {_launch_error(session, exc)}"
            return False
        if out is None and _submitted(session):
            result.status, result.message = "error", NO_OUTPUT
            return False
        pairs.append((out if out is not None else inputs.outputs(data), expected))
        if _submitted(session):
            verdicts.append(reference.check(*pairs[-1]))
            if not verdicts[-1].ok:
                break
    try:
        verdicts = verdicts or reference.check_all(pairs)
    except Exception as exc:  # a launch whose fault shows only once the device is waited for
        result.status, result.message = "error", f"launch failed: {_launch_error(session, exc)}"
        return False
    for i, verdict in enumerate(verdicts):
        result.checked_inputs = i + 1
        if not verdict.ok:
            result.status, result.message = "wrong", f"input {i}: {verdict.message}"
            return False
    if _submitted(session) and len(calls_us) > SEEN_CALLS:
        result.first_sight = first_sight(session, calls_us)
    return True


SEEN_CALLS = 3  # calls on inputs a submission has seen, against its first calls on the others


def first_sight(session: Session, calls_us: list[float]) -> dict:
    """A submission's first calls on new tensors (the checked calls on inputs 1.. : the first
    input's call may compile) against calls on tensors it has seen (SEEN_CALLS inputs called
    again), each a synchronised call's host time; medians. The leaderboard's first timed
    repetition is made of first calls (flags.first_call_flag)."""
    seen = [timing.host_time_us(p.launch, session.device)[1] for p in session.prepared[1:1 + SEEN_CALLS]]
    return {"first_us": statistics.median(calls_us[1:]), "seen_us": statistics.median(seen),
            "inputs": len(calls_us) - 1}


# a submission's custom_kernel returns its outputs (the competition's harness reads what it returns);
# our launches write C in place and return None
NO_OUTPUT = ("custom_kernel returned None: return the outputs, a list of the C tensors (one a group), as the "
             "competition's harness reads them")


def _submitted(session: Session) -> bool:
    from .backends import submission as sub
    return isinstance(session.backend, sub.SubmissionBackend)


def _launch_error(session: Session, exc: Exception) -> str:
    """What a launch raised, in words: a submission's own error cut to what matters with the whole
    text in a log file (backends/submission.py `failure`); our own kernels' first line."""
    from .backends import submission as sub
    if isinstance(session.backend, sub.SubmissionBackend):
        return sub.failure(exc, session.backend.module.__file__, session.case.id)
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"


def measure(session: Session, timer: str = "leaderboard", l2: str = "nvgg", energy: bool = True,
            span: bool = True, observers: list[Observer] | None = None) -> None:
    """Time the prepared launches (checked before) with the chosen timer, on new inputs: each
    input is overwritten in place with new values and its outputs poisoned before the timed
    repetitions, and what the last repetition's calls returned is checked against the reference
    of those values after (a call that returns kept results is wrong). The card's clocks are
    sampled while timed; the row is flagged where its time cannot be the work's (below the speed
    of light, work escaping the events) or the card throttled. With `energy`, the card's energy a
    call is measured over the same repetitions (clocks.EnergyMeter, the timer's observer: NVML's
    energy counter read beside them, the span held, up to clocks.ENERGY_SPAN_S, only until the
    counter has changed clocks.MIN_CHANGES times). `observers`: what is measured beside the time
    (None: the row's own, `observers_for` the timer and `energy`)."""
    if observers is None:
        observers = observers_for(session.device, timer, energy)
    clock = _refilled(session, timer, l2, span, observer=_repetitions(observers))
    _start(observers)
    try:
        stats = clock.per_call(session.launches) if timer == "per-call" else clock.batch(session.launches)
        timeline("row timed")
    finally:
        _stop(observers)
    _settle(session, clock, stats, observers, energy)


def _repetitions(observers: list[Observer]) -> timing.Observer | None:
    """The observer the timer tells of its repetitions (the energy meter), None where none asks."""
    inside = [o.repetitions for o in observers if o.repetitions is not None]
    if len(inside) > 1:
        raise ValueError("the timer tells one observer of its repetitions, and several asked")
    return inside[0] if inside else None


def _start(observers: list[Observer]) -> None:
    for o in observers:
        o.start()


def _stop(observers: list[Observer]) -> None:
    for o in observers:
        o.stop()


def _refilled(session: Session, timer: str, l2: str, span: bool, rotate: bool = True, observer=None):
    """Before a timed run: the host's time to issue a call, new values in every input, the timer
    (with `observer` told of its repetitions: an EnergyMeter)."""
    result, device = session.result, session.device
    result.setup_us["launch_host"] = launch_host_us(session.launches, device)
    for i, data in enumerate(session.batch):
        inputs.refill(session.case, data, i, session.rounds)
    session.rounds += 1
    clock = timing.make_timer(device, "leaderboard" if timer == "cupti" else timer, l2=l2,
                              host_us=result.setup_us["launch_host"], rotate=rotate, observer=observer,
                              **({} if span else {"min_span_s": 0.0}))
    if device.type == "cuda":
        result.l2_clear = l2
    timeline("row refilled")
    return clock


def _settle(session: Session, clock, stats, observers: list[Observer], energy: bool) -> None:
    """After a timed run: its statistics and what the observers that record regardless saw (the
    clocks) kept, what the timed calls returned checked, then the other observers' records (CUPTI's
    run, the energy a call), the flags and the verdict."""
    result, device = session.result, session.device
    result.stats = stats
    timed = Timed(session.launches, device, stats, clock.ends)
    for o in observers:
        if not o.after_check:
            o.record(result, timed)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    timeline("row clocks sampled")
    if not check_timed(session, clock.outputs):
        return
    timeline("row timed outputs checked")
    for o in observers:
        if o.after_check:
            o.record(result, timed)
    timeline("row observed")
    if not energy and device.type == "cuda" and not result.energy:  # (an A/B's later round keeps its first round's figure)
        result.energy = {"mj_per_call": None, "note": NO_ENERGY}
    result.flags = flags_of(result)
    result.verdict = verdictmod.judge(result)


# a row timed in one window (a sweep's first pass, `run --quick`): too short for the energy counter
NO_ENERGY = "not measured: the row was timed in one window (a quick run, or a sweep's first pass)"


def check_timed(session: Session, outputs: list) -> bool:
    """What the timed calls returned (or wrote in place), each input against the reference of
    the values it was timed on; a mismatch makes the row wrong, with the input and the reason."""
    result, device = session.result, session.device
    dtype = torch.float64 if device.type == "cuda" else torch.float32
    pairs = []
    for i, data in enumerate(session.batch):  # (the timed calls have all ended: nothing to hold up)
        if _submitted(session) and (i >= len(outputs) or outputs[i] is None):
            result.status, result.message = "error", f"when timed: {NO_OUTPUT}"
            return False
        got = outputs[i] if i < len(outputs) and outputs[i] is not None else inputs.outputs(data)
        pairs.append((got, reference.reference(data, dtype)))
    for i, verdict in enumerate(reference.check_all(pairs, max_report=1)):
        if not verdict.ok:
            result.status = "wrong"
            result.message = f"right when checked, wrong when timed on new inputs (kept results?): input {i}: {verdict.message}"
            return False
    return True


def run_one(case: Case, *, strategy=None, backend=None, device: torch.device | None = None,
            profile: str | None = None, timer: str = "leaderboard", batch: int | None = None,
            do_time: bool = True, tensormaps: str | None = None) -> Result:
    """Check, then time, one strategy on one backend for one case. Unsupported -> NvggError."""
    session = setup(case, strategy=strategy, backend=backend, device=device, profile=profile, batch=batch,
                    tensormaps=tensormaps)
    if check(session) and do_time:
        measure(session, timer)
    return session.result


def run_row(row: Row) -> Result:
    """A row's Result, whatever happens in it short of a lost CUDA context: unsupported pairs, a
    submission that fails to import, an exception in user code or a kernel become the row's status
    and message. What a worker runs for each row (rows.py)."""
    return _run(row)


def _run(row: Row, keep: tuple | None = None) -> Result:
    """`run_row`; `keep`: the key under which a checked, timed session stays for later rounds."""
    from .backends import submission as sub
    device = torch.device(row.device) if row.device else None
    t0 = time.perf_counter()
    clocks.idle(device or default_device())  # before a submission's import runs anything on the card
    try:
        if row.submission:
            module = sub.loaded(row.submission, row.case.id)  # imported once a process, as the competition does
            sub.give_point(module, row.point)
            session = setup(row.case, strategy=AsSubmitted(), backend=sub.SubmissionBackend(module), device=device,
                            profile=row.profile, batch=row.batch)
            session.result.source, session.result.revision = row.label, row.revision
            session.result.point = dict(row.point)
        else:
            session = setup(row.case, strategy=row.strategy, backend=row.backend, device=device, profile=row.profile,
                            batch=row.batch, tensormaps=row.tensormaps, point=dict(row.point))
        timeline("row set up")
        if check(session):
            timeline("row checked")
            measure(session, row.timer, row.l2, energy=row.energy, span=row.span)
        result = session.result
        if keep is not None and result.status == "ok":
            _ROUNDS[keep] = session
        elif not row.submission:
            inputs.give_back(session.batch)  # our kernels and the library's keep nothing of a finished row
    except NvggError as exc:
        result = row.failed("error" if row.submission else "unsupported", str(exc))
    except Exception as exc:  # a submission's call that raised once checked (timed, under CUPTI): its error
        if not row.submission:
            raise
        result = row.failed("error", f"failed after its check: {sub.failure(exc, row.submission, row.case.id)}")
    result.wall_s = time.perf_counter() - t0
    return result


_ROUNDS: dict[tuple, Session] = {}  # a worker's checked sessions, kept for the rounds of an A/B (ab.py)
_OPEN: dict[tuple, tuple] = {}  # a kept session's round under way: (timer, its observers)


def _round_key(row: Row) -> tuple:
    return (row.case.id, row.submission, row.point, row.strategy, row.backend, row.tensormaps, row.timer, row.l2,
            row.device)


def run_round(row: Row) -> Result:
    """An A/B's first call for `row` in a warm worker: `run_row`'s whole path (setup, the checked
    run, the timed run), the session kept for its rounds (`round_begin`, `round_window`,
    `round_end`); a later call (the session kept) is one whole round on its own."""
    key = _round_key(row)
    if key not in _ROUNDS:
        for other in [k for k in _ROUNDS if k[0] != row.case.id]:  # an A/B goes case by case: free the last case's
            del _ROUNDS[other]
            _OPEN.pop(other, None)
        return _copy(_run(row, keep=key))
    failed = round_begin(row)
    if failed is not None:
        return failed
    window_failed = round_window(row, reps=0)
    return window_failed if window_failed is not None else round_end(row)


def round_begin(row: Row, core: int | None = None) -> Result | None:
    """A round of the kept session (`run_round` made it): new values refilled in place, the timer
    and the clock sampler started, this thread on `core` (the round's versions share it: where a
    thread runs sets a host-bound row's level, timing.pin); the versions' windows (`round_window`)
    then take turns, so a drift of the card or the host lands on all of them, and `round_end`
    checks what the timed calls returned. A failed Result where the session is gone or the call
    raised, else None."""
    key = _round_key(row)
    session = _ROUNDS.get(key)
    if session is None:
        return row.failed("error", "no session kept for this row's rounds (its first round failed)")
    _close(key)
    if row.submission:  # points of one file share its module: this round's CONFIG
        from .backends import submission as sub
        sub.give_point(sub.loaded(row.submission), row.point)
    session.round_started = time.perf_counter()
    try:
        timing.pin(core)
        clock = _refilled(session, row.timer, row.l2, span=False, rotate=core is None)
        # nothing else of this process's runs while the versions take turns: the clocks read at
        # the round's two ends (a sampling thread shared the launching thread's core), and
        # Python's collector run now and held until the round ends (a collection inside a window
        # of a host-bound row made it several times its neighbours and spread the rounds' ratios: lab log)
        observers = observers_for(session.device, row.timer, energy=False, rounds=True)
        _start(observers)
        gc.collect()
        gc.disable()
        _OPEN[key] = (clock, observers)
        clock.begin(session.launches)
    except Exception as exc:
        return _round_failed(row, key, exc)
    return None


def round_window(row: Row, reps: int = 1) -> Result | None:
    """`reps` repetitions of the round under way (0: the leaderboard's own count, one window
    for the whole round): None, or the failed Result where the call raised (the round is over)."""
    key = _round_key(row)
    session, (clock, _) = _ROUNDS[key], _OPEN[key]
    try:
        if reps:
            clock.window(session.launches, reps, release=True)
        else:
            clock.run_out(session.launches)
    except Exception as exc:
        return _round_failed(row, key, exc)
    return None


def round_end(row: Row) -> Result:
    """The round's Result: its windows' repetitions as one measurement, what they returned checked."""
    key = _round_key(row)
    session = _ROUNDS[key]
    clock, observers = _OPEN[key]
    timing.pin(None)
    gc.enable()
    try:
        stats = clock.end()
        _close(key)  # the clocks read at the round's end
        _settle(session, clock, stats, observers, energy=False)
    except Exception as exc:
        return _round_failed(row, key, exc)
    if session.result.status != "ok":
        _ROUNDS.pop(key, None)
    session.result.wall_s = time.perf_counter() - session.round_started
    return _copy(session.result)


def _close(key: tuple) -> None:
    opened = _OPEN.pop(key, None)
    if opened is not None:
        _stop(opened[1])


def _round_failed(row: Row, key: tuple, exc: Exception) -> Result:
    """A round's call that raised: a submission's error on new inputs is the row's result (its
    session let go, the thread on every core and the collector on again); our own kernels' is raised."""
    timing.pin(None)
    gc.enable()
    _close(key)
    _ROUNDS.pop(key, None)
    if not row.submission:
        raise exc
    from .backends import submission as sub
    return row.failed("error", f"failed in a later round: {sub.failure(exc, row.submission, row.case.id)}")


def _copy(result: Result) -> Result:
    """A round's Result as it stands (the kept session's is rewritten by the next round; a worker's
    reply is a copy already, a run in nvgg's own process is not)."""
    return copy.copy(result)


def launch_host_us(launches, device: torch.device) -> float:
    """Mean host time to issue one call (the launch returns before the GPU finishes)."""
    total = 0.0
    for launch in launches:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        launch()
        total += time.perf_counter() - t0
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return total / len(launches) * 1e6


def check_memory(case: Case, device: torch.device, count: int, l2: str = "nvgg") -> None:
    """Refuse a case whose inputs (and the reference's copies, and the evaluator's L2 clear where
    asked for) cannot fit in the device's free memory, with the size it needs, before anything is
    generated."""
    need, free = inputs.memory_needed(case, count, 8 if device.type == "cuda" else 4), inputs.memory_free(device)
    clear = timing.EVALUATOR_L2_BYTES if l2 == "evaluator" and device.type == "cuda" else 0
    if free is not None and need + clear > free:
        where = "GPU" if device.type == "cuda" else "host"
        also = f" and the evaluator's L2 clear of {clear / 2**30:.1f} GiB" if clear else ""
        raise NvggError(f"case {case.id} needs about {(need + clear) / 1e9:.1f} GB ({count} inputs of "
                        f"{case.bytes / 1e9:.2f} GB, the reference's copies{also}) and the {where} has "
                        f"{free / 1e9:.1f} GB free: pass a smaller case" + (", or clear L2 nvgg's way" if clear else ""))
