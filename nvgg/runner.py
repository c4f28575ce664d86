"""The one data path: case -> inputs -> strategy x backend -> checked run -> timed run -> Result.

`run` is this once, `compare` is it over strategies x cases, `profile` is it under another
observer. Nothing here knows the CLI; the reference, SOL and timer know nothing of strategies.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from . import backends, env as envmod, inputs, reference, sol as solmod, strategies, timing
from . import verdict as verdictmod
from .cases import Case
from .errors import NvggError
from .backends.base import arch_of
from .profiles import Profile, for_gpu_name, get as get_profile

CPU_BATCH = 3  # a CPU run times 3 inputs a repetition (not 15) so it finishes in seconds


@dataclass
class Result:
    case: str
    strategy: str
    backend: str
    status: str                    # ok | wrong | error | unsupported
    message: str = ""
    tensormaps: str = ""           # the persistent cute kernel's tensor maps: device or host ("" otherwise)
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

    @property
    def correct(self) -> bool | None:
        return {"ok": True, "wrong": False}.get(self.status)

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
        out.update(correct=self.correct, time_us=self.time_us, gap_to_sol=self.gap)
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

    count = batch or (inputs.BATCH if device.type == "cuda" else CPU_BATCH)
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
    """Time the prepared launches (checked before) with the chosen timer."""
    result, device, launches = session.result, session.device, session.launches
    result.setup_us["launch_host"] = launch_host_us(launches, device)
    clock = timing.make_timer(device, "leaderboard" if timer == "cupti" else timer)
    result.stats = clock.per_call(launches) if timer == "per-call" else clock.batch(launches)
    if timer == "cupti" and device.type == "cuda":
        result.cupti = cupti_per_call(launches, device, result.stats.mean_us)
    found = verdictmod.judge(result)
    result.verdict = found.to_dict() if found else {}


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


def run_many(cases: list[Case], strategy_names: list[str], backend_names: list[str], *, on_result=None,
             submission: str | None = None, submission_timeout_s: float | None = None,
             tensormaps: list[str] | None = None, **kwargs) -> list[Result]:
    """`run_one` over cases x strategies x backends; an unsupported pair becomes a row, not an abort.
    `tensormaps`: the persistent strategy once per mode listed (None: once, in the default mode);
    `submission`: a submission.py run beside them on each case, in its own process."""
    from .backends import submission as sub
    results = []
    for case in cases:
        combos = [(s, b, m) for b in backend_names for s in strategy_names
                  for m in (tensormaps if tensormaps and s == "persistent" else [None])]
        for st_name, be_name, mode in combos:
            try:
                res = run_one(case, strategy=st_name, backend=be_name, tensormaps=mode, **kwargs)
            except NvggError as exc:
                res = Result(case=case.id, strategy=st_name, backend=be_name, status="unsupported", message=str(exc),
                             tensormaps=mode or "")
            results.append(res)
            if on_result:
                on_result(res)
        if submission:
            res = sub.run_submission(submission, case, timeout_s=submission_timeout_s, **kwargs)
            results.append(res)
            if on_result:
                on_result(res)
    return results
