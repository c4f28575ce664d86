"""The one data path: case -> inputs -> strategy x backend -> checked run -> timed run -> Result.

`run` is this once, `compare` is it over strategies x cases, `profile` is it under another
observer. Nothing here knows the CLI; the reference, SOL and timer know nothing of strategies.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from . import backends, clocks, env as envmod, inputs, reference, sol as solmod, strategies, timing
from . import verdict as verdictmod
from .cases import Case
from .errors import NvggError
from .backends.base import arch_of
from .profiles import Profile, for_gpu_name, get as get_profile

CPU_BATCH = 3  # a CPU run times 3 inputs a repetition (not 15) so it finishes in seconds

# a flag's kind -> what it means for the run: suspect (the time is not the work's: the command
# fails) or caution (the time is the work's, under conditions the next run may not share)
FLAGS = {"below-sol": "suspect", "escaped": "suspect", "throttled": "caution"}
# work still running after the end event, per batch, beyond which the events missed it (both must
# hold). An honest batch: a device synchronise right after the completed end event took 9-39 µs
# for our kernels (2-7% of their batch) and 28-82 µs for a torch submission (under 2%); our kernel
# left on a side stream: 68 µs (18% of the batch, case 3) and 1510 µs (case 1). H100/H200, 2026-11-26.
ESCAPE_FLOOR_US = 30.0
ESCAPE_SHARE = 0.10


@dataclass
class Result:
    case: str
    strategy: str
    backend: str
    status: str                    # ok | wrong | error | unsupported
    message: str = ""
    tensormaps: str = ""           # the persistent cute kernel's tensor maps: device or host ("" otherwise)
    source: str = ""               # a submission's file name ("" for our backends)
    checked_inputs: int = 0
    stats: timing.Stats | None = None
    sol: solmod.Sol | None = None
    sol_b200: solmod.Sol | None = None
    setup_us: dict = field(default_factory=dict)
    cupti: dict = field(default_factory=dict)
    kernels: list = field(default_factory=list)
    inputs: str = ""
    env: dict = field(default_factory=dict)
    # the launches' output tiles (one entry a launch), the GPU's SMs and the kernel's resident CTAs
    # an SM: the evidence of the wave verdict (empty where the backend cannot say)
    tiles: list = field(default_factory=list)
    sms: int = 0
    ctas_per_sm: int = 0
    verdict: dict = field(default_factory=dict)  # verdict.Verdict as a dict: kind, phrase, evidence
    # what makes a time one not to take at its word: [{kind, text}], kinds in FLAGS
    flags: list = field(default_factory=list)
    clocks: dict = field(default_factory=dict)   # clocks.summarise of the samples taken while timed
    gate: dict = field(default_factory=dict)     # gate.Compared as a dict, where a baseline was given
    wall_s: float = 0.0                          # the row's wall time, setup to result

    @property
    def correct(self) -> bool | None:
        return {"ok": True, "wrong": False}.get(self.status)

    @property
    def suspect(self) -> bool:
        """A time that cannot be right (below the speed of light, work escaping the events): the
        row is shown flagged and the command fails."""
        return any(FLAGS.get(f["kind"]) == "suspect" for f in self.flags)

    @property
    def trusted(self) -> bool:
        """Correct, timed, and nothing flagged: a time to rank by and gate on."""
        return self.status == "ok" and self.stats is not None and not self.flags

    @property
    def time_us(self) -> float | None:
        return self.stats.mean_us if self.stats else None

    @property
    def gap(self) -> float | None:
        if self.stats is None or self.sol is None or self.stats.clock != "cuda events":
            return None
        return solmod.gap(self.stats.mean_us, self.sol)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(correct=self.correct, time_us=self.time_us, gap_to_sol=self.gap, suspect=self.suspect,
                   trusted=self.trusted)
        return out

    @classmethod
    def from_dict(cls, raw: dict) -> "Result":
        names = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in raw.items() if k in names}
        if kwargs.get("stats"):
            kwargs["stats"] = timing.Stats(**kwargs["stats"])
        for key in ("sol", "sol_b200"):
            if kwargs.get(key):
                kwargs[key] = solmod.Sol(**kwargs[key])
        return cls(**kwargs)


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def device_profile(device: torch.device, name: str | None) -> Profile | None:
    """The profile the SOL is quoted against: the one named, else the running GPU's, else none."""
    if name:
        return get_profile(name)
    if device.type == "cuda":
        return for_gpu_name(torch.cuda.get_device_name(device))
    return None


def default_strategy(backend: backends.Backend, device: torch.device) -> str:
    if device.type != "cuda":
        return "sequential"
    return "persistent" if backend.supports_grouped else "graph"


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

    @property
    def launches(self) -> list:
        return [p.launch for p in self.prepared]


def setup(case: Case, *, strategy=None, backend=None, device: torch.device | None = None,
          profile: str | None = None, batch: int | None = None, tensormaps: str | None = None) -> Session:
    """Check support, compile, generate the inputs and prepare every launch (outside any timing).
    `strategy` and `backend` are names (None: the defaults for this machine) or objects;
    `tensormaps` the persistent kernel's tensor-map mode (None: the kernel's default).
    Unsupported -> NvggError."""
    device = device or default_device()
    be, st = _checked(case, strategy, backend, tensormaps, device)
    count = batch or (inputs.BATCH if device.type == "cuda" else CPU_BATCH)
    check_memory(case, device, count)
    prof = device_profile(device, profile)
    result = Result(case=case.id, strategy=st.name, backend=be.name, status="ok", env=envmod.collect(device))
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
            from .profiling.occupancy import of_kernel
            result.ctas_per_sm = of_kernel(infos[0], prof).blocks_per_sm

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
    (as the leaderboard does), the first on a CPU. Records the verdict in session.result."""
    result, device = session.result, session.device
    count = len(session.batch) if device.type == "cuda" else 1
    for i, (data, p) in enumerate(zip(session.batch[:count], session.prepared)):
        expected = reference.reference(data, torch.float64 if device.type == "cuda" else torch.float32)
        reference.poison(data)
        try:
            out, call_us = timing.host_time_us(p.launch, device)
        except Exception as exc:  # a launch that raises is a failed result, not a crash of the tool
            result.status, result.message = "error", f"launch failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return False
        if i == 0:
            result.setup_us["first_call"] = call_us
        got = out if out is not None else inputs.outputs(data)
        verdict = reference.check(got, expected)
        result.checked_inputs = i + 1
        if not verdict.ok:
            result.status, result.message = "wrong", f"input {i}: {verdict.message}"
            return False
    return True


def measure(session: Session, timer: str = "leaderboard") -> None:
    """Time the prepared launches (checked before) with the chosen timer, on new inputs: each
    input is overwritten in place with new values and its outputs poisoned before the timed
    repetitions, and what the last repetition's calls returned is checked against the reference
    of those values after (a call that returns kept results is wrong). The card's clocks are
    sampled while timed; the row is flagged where its time cannot be the work's (below the speed
    of light, work escaping the events) or the card throttled."""
    result, device, launches = session.result, session.device, session.launches
    result.setup_us["launch_host"] = launch_host_us(launches, device)
    for i, data in enumerate(session.batch):
        inputs.refill(session.case, data, i)
    clock = timing.make_timer(device, "leaderboard" if timer == "cupti" else timer)
    with clocks.Sampler(device) as sampler:
        result.stats = clock.per_call(launches) if timer == "per-call" else clock.batch(launches)
    result.clocks = sampler.summary()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    if not check_timed(session, clock.outputs):
        return
    if timer == "cupti" and device.type == "cuda":
        result.cupti = cupti_per_call(launches, device, result.stats.mean_us)
    result.flags = flags_of(result)
    found = verdictmod.judge(result)
    result.verdict = found.to_dict() if found else {}


def check_timed(session: Session, outputs: list) -> bool:
    """What the timed calls returned (or wrote in place), each input against the reference of
    the values it was timed on; a mismatch makes the row wrong, with the input and the reason."""
    result, device = session.result, session.device
    dtype = torch.float64 if device.type == "cuda" else torch.float32
    for i, data in enumerate(session.batch):
        got = outputs[i] if i < len(outputs) and outputs[i] is not None else inputs.outputs(data)
        verdict = reference.check(got, reference.reference(data, dtype), max_report=1)
        if not verdict.ok:
            result.status = "wrong"
            result.message = f"right when checked, wrong when timed on new inputs (kept results?): input {i}: {verdict.message}"
            return False
    return True


def flags_of(result: Result) -> list[dict]:
    """What makes a measured time one not to take at its word (see FLAGS); the cause first (work
    escaping the events explains a time below the speed of light)."""
    out = []
    st, floor = result.stats, result.sol
    if st is None:
        return out
    if st.escaped_us is not None:
        per_batch = st.escaped_us * st.batch
        if per_batch > max(ESCAPE_FLOOR_US, ESCAPE_SHARE * st.mean_us * st.batch):
            out.append({"kind": "escaped", "text": f"work escapes the events: the device ran {per_batch:.1f} µs a batch "
                                                   f"after the end event ({st.escaped_us:.2f} µs a call; another stream?)"})
    if floor is not None and st.clock == "cuda events" and st.mean_us < floor.sol_us:
        out.append({"kind": "below-sol", "text": f"time below the speed of light: {st.mean_us:.3f} µs < "
                                                 f"{floor.sol_us:.3f} µs on {floor.profile} (the calls cannot have done the work)"})
    throttled = (result.clocks or {}).get("throttled")
    if throttled:
        out.append({"kind": "throttled", "text": throttled})
    return out


def run_one(case: Case, *, strategy=None, backend=None, device: torch.device | None = None,
            profile: str | None = None, timer: str = "leaderboard", batch: int | None = None,
            do_time: bool = True, tensormaps: str | None = None) -> Result:
    """Check, then time, one strategy on one backend for one case. Unsupported -> NvggError."""
    session = setup(case, strategy=strategy, backend=backend, device=device, profile=profile, batch=batch,
                    tensormaps=tensormaps)
    if check(session) and do_time:
        measure(session, timer)
    return session.result


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


def cupti_per_call(launches, device: torch.device, event_us: float) -> dict:
    """CUPTI activity records of each call of the batch, recorded one call at a time with L2
    flushed before each (so every activity belongs to its call), summarised beside the event
    time: kernels by name, launches, kernel time, gaps inside a call, host overhead
    (profiling/cupti.py `per_call`)."""
    from .profiling import cupti
    flush = timing.L2Flush(device)
    calls = []
    for launch in launches:
        flush()
        torch.cuda.synchronize(device)
        calls.append(cupti.record(launch, device))
    return cupti.per_call(calls, event_us)


@dataclass(frozen=True)
class Row:
    """One row of a run: a case under a strategy and backend (or a user's submission), as the
    parent sends it to a worker (isolation.py)."""

    case: Case
    strategy: str | None = None
    backend: str | None = None
    tensormaps: str | None = None
    submission: str | None = None   # a submission.py's path: it brings its own launch scheme
    profile: str | None = None
    timer: str = "leaderboard"
    batch: int | None = None
    device: str | None = None

    @property
    def name(self) -> str:
        """The row as tables name it: case and strategy/backend (or the submission's file)."""
        if self.submission:
            return f"{self.case.id} submission[{Path(self.submission).name}]"
        mode = f"[{self.tensormaps}]" if self.tensormaps else ""
        return f"{self.case.id} {self.strategy or 'default'}{mode}/{self.backend or 'default'}"

    @property
    def key(self) -> str:
        """The worker a row runs in: one a backend, one a submission file."""
        return f"submission:{self.submission}" if self.submission else f"backend:{self.backend or ''}"

    def failed(self, status: str, message: str) -> Result:
        if self.submission:
            return Result(case=self.case.id, strategy="submission", backend="submission", status=status,
                          message=message, source=Path(self.submission).name)
        return Result(case=self.case.id, strategy=self.strategy or "", backend=self.backend or "", status=status,
                      message=message, tensormaps=self.tensormaps or "")


_SUBMISSIONS: dict[str, object] = {}


def run_row(row: Row) -> Result:
    """A row's Result, whatever happens in it short of a lost CUDA context: unsupported pairs,
    a submission that fails to import, an exception in user code or a kernel become the row's
    status and message. Runs in a worker (isolation.py); the one data path, `run_one`."""
    from .backends import submission as sub
    device = torch.device(row.device) if row.device else None
    common = dict(device=device, profile=row.profile, timer=row.timer, batch=row.batch)
    t0 = time.perf_counter()
    try:
        if row.submission:
            module = _SUBMISSIONS.get(row.submission) or sub.load(row.submission)
            _SUBMISSIONS[row.submission] = module  # imported once a process, as the competition does
            result = run_one(row.case, strategy=sub.AsSubmitted(), backend=sub.SubmissionBackend(module), **common)
            result.source = Path(row.submission).name
        else:
            result = run_one(row.case, strategy=row.strategy, backend=row.backend, tensormaps=row.tensormaps, **common)
    except NvggError as exc:
        result = row.failed("error" if row.submission else "unsupported", str(exc))
    result.wall_s = time.perf_counter() - t0
    return result


def _checked(case: Case, strategy, backend, tensormaps: str | None, device: torch.device):
    """The backend and strategy (names, None for this machine's defaults, or objects), checked
    for the case on the device before anything is compiled or allocated. NvggError if unsupported."""
    if isinstance(backend, backends.Backend):
        if tensormaps is not None:
            raise NvggError("pass the tensor-map mode with the backend's name, not with a backend object")
        be = backend
    else:
        be = backends.get(backend or backends.best(device), tensormaps=tensormaps)
    st = strategy if isinstance(strategy, strategies.Strategy) else strategies.get(strategy or default_strategy(be, device))
    if tensormaps is not None and not st.grouped:
        raise NvggError(f"--tensormaps chooses the persistent kernel's tensor maps; the {st.name} strategy launches "
                        "one kernel per group with its maps as kernel parameters: drop --tensormaps or use --strategy persistent")
    be.check(case, device)
    st.check(be, case, device)
    return be, st


def check_memory(case: Case, device: torch.device, count: int) -> None:
    """Refuse a case whose inputs (and the reference's copies) cannot fit in the device's free
    memory, with the size it needs, before anything is generated."""
    need, free = inputs.memory_needed(case, count, 8 if device.type == "cuda" else 4), inputs.memory_free(device)
    if free is not None and need > free:
        where = "GPU" if device.type == "cuda" else "host"
        raise NvggError(f"case {case.id} needs about {need / 1e9:.1f} GB ({count} inputs of {case.bytes / 1e9:.2f} GB and "
                        f"the reference's copies) and the {where} has {free / 1e9:.1f} GB free: pass a smaller case")


def precheck(row: Row) -> None:
    """What `setup` checks first, in the calling process: an unsupported row (or one whose
    inputs cannot fit) is answered without starting a worker. NvggError if unsupported."""
    device = torch.device(row.device) if row.device else default_device()
    if not row.submission:
        _checked(row.case, row.strategy, row.backend, row.tensormaps, device)
    check_memory(row.case, device, row.batch or (inputs.BATCH if device.type == "cuda" else CPU_BATCH))


def run_isolated(pool, row: Row) -> Result:
    """`run_row` in the pool's worker for the row; a hang or a crash becomes the row's failed
    Result with its reason (isolation.py)."""
    from . import isolation
    t0 = time.perf_counter()
    try:
        precheck(row)
        result = pool.call(row.key, isolation.Call("nvgg.runner:run_row", {"row": row}))
    except (isolation.RowFailure, isolation.RowError) as exc:
        result = row.failed("error", str(exc))
    except NvggError as exc:
        result = row.failed("error" if row.submission else "unsupported", str(exc))
    result.wall_s = time.perf_counter() - t0
    return result


def rows_of(cases: list[Case], strategy_names: list[str], backend_names: list[str], *,
            submissions: list[str] = (), tensormaps: list[str] | None = None, **common) -> list[Row]:
    """cases x strategies x backends (the persistent strategy once per tensor-map mode listed,
    None: once in the default mode), then each submission, case by case."""
    rows = []
    for case in cases:
        rows += [Row(case, s, b, m, **common) for b in backend_names for s in strategy_names
                 for m in (tensormaps if tensormaps and s == "persistent" else [None])]
        rows += [Row(case, submission=str(path), **common) for path in submissions]
    return rows


def run_many(rows: list[Row], *, timeout_s: float | None = None, on_result=None, on_start=None) -> list[Result]:
    """Every row, each in its backend's worker (isolation.py), in order; `on_start(row)` as each
    begins and `on_result(result)` as it finishes. A row that fails in any way is a row, never the
    end of the run."""
    from . import isolation
    results = []
    with isolation.Pool(timeout_s) as pool:
        for row in rows:
            if on_start:
                on_start(row)
            res = run_isolated(pool, row)
            results.append(res)
            if on_result:
                on_result(res)
    return results
