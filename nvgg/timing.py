"""The one timing module: the leaderboard's event timer, a queue-ahead variant, per-call timing,
CPU timing, and the statistics reducer.

The leaderboard's method (GPU MODE eval for nvfp4_group_gemm): a batch of 15 different inputs
per repetition, L2 cleared before each repetition, CUDA events around the 15 calls on the caller's
stream, per-call time = batch time / 15, repeated until the standard error of the mean falls under
0.1% of it or the time budget runs out. Host work inside the calls is timed, as there.

`queue_ahead=True` is the same measurement with the GPU held in a spin kernel while the host
enqueues the batch, so host launch latency is hidden whenever the host enqueues faster than the
GPU runs: the difference between the two modes is the host-side cost the leaderboard sees.
Compilation and warm-up happen before; the timed closures only launch.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Callable, Protocol, Sequence

import torch

from .errors import NvggError

Launch = Callable[[], None]

MIN_REPS = 3
MAX_REPS = 100
TARGET_REL_ERR = 1e-3
BUDGET_S = 10.0
CPU_BUDGET_S = 5.0  # a row on the CPU (cpu_budget_s)
# A host-bound row's time wanders: windows of one batch correlate with their neighbours for about
# BLOCK_S and not past HOST_BLOCK_S, between two levels (multistream/cute on case 3,
# benchmarks/host_spread.py --modes: lab log). So repetitions are grouped into blocks of
# BLOCK_S, the spread between blocks is what a rerun sees, and a GPU run is timed for at least
# MIN_SPAN_S to have blocks enough to measure it.
BLOCK_S = 0.1
MIN_SPAN_S = 0.5
MIN_BLOCKS = 3
# Half a second can sit at one level: the first run's interval missed later runs' means of
# multistream/cute (case 3, benchmarks/rerun.py: lab log). A row whose host time to issue
# a call is HOST_SHARE of the call's measured time or more (a change of the host's level moves the
# call's time; multistream/cute on case 3 lies above it, our persistent kernel well below) is timed
# for HOST_SPAN_S in blocks of HOST_BLOCK_S, past the time its windows stay correlated.
HOST_SHARE = 0.6
HOST_SPAN_S = 2.0
HOST_BLOCK_S = 0.2
# A host-bound row's mean is a mix of the host's levels, and a rerun mixes them in
# other shares: over minutes, later runs' means drifted past the t-interval of the first run's
# blocks (multistream/cute and the torch submission on cases 3-4, benchmarks/rerun.py: lab log).
# A rerun's mean is still a mix of levels the blocks, moved core to core, have seen; so a
# host-bound row's rerun interval reaches from its mean at least to its fastest and its slowest
# block.
# Where a row's launching thread runs changes its host time: a host-bound row's level holds for
# seconds in one process and differs between processes (the same build as A and as B, each in a
# worker of its own, was called slower or faster, and first runs' intervals missed fresh
# processes' means: lab log). So a timed run moves its thread to the next core at each block (its
# blocks then sample the cores' levels, as reruns do), and an A/B's versions take one core
# together a round (ab.py).
_ALLOWED = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []


def cores() -> list[int]:
    """The cores this process may run on (empty where the platform cannot pin a thread)."""
    return list(_ALLOWED)


def core_for(n: int) -> int | None:
    """The core of a process's `n`-th block or round: the next core each time, from one chosen by
    the process id (processes side by side start apart); None where no thread can be pinned."""
    return _ALLOWED[(os.getpid() + n) % len(_ALLOWED)] if _ALLOWED else None


def host_load() -> tuple[float, int] | None:
    """The host's one-minute load average (`os.getloadavg`: every process's threads running or
    waiting to run, on Linux those in uninterruptible waits too) and its cores; None where the
    platform reports no load."""
    try:
        return os.getloadavg()[0], os.cpu_count() or 1
    except (AttributeError, OSError):
        return None


def pin(core: int | None) -> None:
    """Run the calling thread on `core` alone (None: on every core it may use again)."""
    if _ALLOWED:
        os.sched_setaffinity(0, {core} if core is not None else set(_ALLOWED))


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile: the x with P(T <= x) = p for `df` degrees of freedom (any df > 0, also
    a fractional Welch-Satterthwaite one), by bisection on the distribution function; inf at df < 1."""
    if df < 1:
        return math.inf
    return _t_quantile(round(p, 12), float(df))


@functools.lru_cache(maxsize=4096)
def _t_quantile(p: float, df: float) -> float:
    if p < 0.5:
        return -_t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def _t_cdf(x: float, df: float) -> float:
    """P(T <= x), x >= 0: 1 - I_{df/(df+x^2)}(df/2, 1/2) / 2 (I the regularized incomplete beta)."""
    return 1 - 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + x * x))


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's method),
    on the side of x where it converges fast (the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) otherwise)."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - _incomplete_beta(b, a, 1 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-15:
            break
    return front * f


def t975(df: float) -> float:
    """The two-sided 95% quantile of Student's t with `df` degrees of freedom."""
    return t_quantile(0.975, df)


@dataclass(frozen=True)
class Stats:
    """Per-call times in microseconds over `runs` repetitions of a batch of `batch` calls."""

    runs: int
    batch: int
    mean_us: float
    std_us: float
    err_us: float
    best_us: float
    worst_us: float
    median_us: float
    method: str   # leaderboard | queue-ahead | per-call | cpu
    clock: str    # "cuda events" or "host clock (CPU run)"
    # a call's share of how long the device stayed busy after the end event had completed (the
    # median over repetitions): work the calls left on another stream, which the events miss
    escaped_us: float | None = None
    # the repetitions grouped into blocks of BLOCK_S: how many, the standard error of the mean from
    # the spread of their means, and the 95% half-width of where a rerun's mean will fall (None
    # under MIN_BLOCKS blocks: a run too short to tell)
    blocks: int = 0
    block_err_us: float | None = None
    rerun_us: float | None = None
    block_s: float | None = None  # the blocks' length (HOST_BLOCK_S for a host-bound row)
    # the fastest and the slowest block's mean (None under MIN_BLOCKS blocks)
    block_lo_us: float | None = None
    block_hi_us: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _host_bound(span_s: float) -> bool:
    """Whether a measurement timed for `span_s` was a host-bound row's (`_enough` set its span)."""
    return span_s >= HOST_SPAN_S


def _block_s(span_s: float) -> float:
    """The block length of a measurement timed for `span_s`: HOST_BLOCK_S for a host-bound row's."""
    return HOST_BLOCK_S if _host_bound(span_s) else BLOCK_S


def reduce(samples_us: Sequence[float], *, batch: int, method: str, clock: str,
           escaped_us: Sequence[float] = (), ends_s: Sequence[float] = (), block_s: float = BLOCK_S,
           host_bound: bool = False) -> Stats:
    """Samples -> statistics, as the competition's calculate_stats (sample std, err = std/√n);
    `escaped_us` the per-call busy time after each repetition's end event (median kept); `ends_s`
    when each repetition ended (perf_counter), for the blocks of `block_s` (`blocks_of`) and the
    rerun interval, which for a `host_bound` row reaches at least its farthest block
    (the note after HOST_BLOCK_S)."""
    n = len(samples_us)
    if n == 0:
        raise ValueError("no samples to reduce")
    mean = sum(samples_us) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in samples_us) / (n - 1)) if n > 1 else 0.0
    err = std / math.sqrt(n)
    means = [sum(b) / len(b) for b in blocks_of(samples_us, ends_s, block_s)] if ends_s else []
    block_err = rerun = lo = hi = None
    if len(means) >= MIN_BLOCKS:
        m = sum(means) / len(means)
        block_err = math.sqrt(sum((x - m) ** 2 for x in means) / (len(means) - 1) / len(means))
        # a rerun's mean and this one each carry the error: their difference √2 times it
        rerun = t975(len(means) - 1) * math.sqrt(2) * max(err, block_err)
        lo, hi = min(means), max(means)
        if host_bound:
            rerun = max(rerun, mean - lo, hi - mean)
    return Stats(runs=n, batch=batch, mean_us=mean, std_us=std, err_us=err,
                 best_us=min(samples_us), worst_us=max(samples_us),
                 median_us=statistics.median(samples_us), method=method, clock=clock,
                 escaped_us=statistics.median(escaped_us) if escaped_us else None,
                 blocks=len(means), block_err_us=block_err, rerun_us=rerun, block_s=block_s if means else None,
                 block_lo_us=lo, block_hi_us=hi)


def blocks_of(samples: Sequence[float], ends_s: Sequence[float], block_s: float = BLOCK_S) -> list[list[float]]:
    """Consecutive samples in blocks of `block_s` on a grid from the first one's end; a last block
    spanning under half of one (from the block before's last end) joins the block before."""
    grid: dict[int, list[int]] = {}
    for i, end in enumerate(ends_s):
        grid.setdefault(int((end - ends_s[0]) / block_s + 1e-9), []).append(i)
    blocks = list(grid.values())
    if len(blocks) > 1 and ends_s[blocks[-1][-1]] - ends_s[blocks[-2][-1]] < block_s / 2:
        tail = blocks.pop()
        blocks[-1] += tail
    return [[samples[i] for i in block] for block in blocks]


def _done(samples: list[float], started: float, min_reps: int, max_reps: int, target: float, budget_s: float,
          min_span_s: float = 0.0) -> bool:
    n = len(samples)
    elapsed = time.perf_counter() - started
    if n < min_reps:
        return False
    if elapsed > budget_s:
        return True
    if elapsed < min_span_s:
        return False
    if n >= max_reps:
        return True
    stats = reduce(samples, batch=1, method="", clock="")
    return stats.mean_us > 0 and stats.err_us / stats.mean_us < target


class L2Flush:
    """A buffer twice the L2 size; writing it evicts whatever the previous repetition left in L2."""

    def __init__(self, device: torch.device):
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
        self.bytes = 2 * l2
        self.buffer = torch.empty(self.bytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buffer.fill_(0x5A5A5A5A)


# The competition's evaluator (gpu-mode/reference-kernels, problems/nvidia/
# eval_better_bench_grouped_gemm.py) clears L2 before each repetition by making a new
# torch.randn((16000, 1024, 1024)) in fp32 and dropping it: 62.5 GiB written each time.
EVALUATOR_L2_SHAPE = (16000, 1024, 1024)
EVALUATOR_L2_BYTES = 16000 * 1024 * 1024 * 4


class EvaluatorL2Clear:
    """The evaluator's clear, as it does it: a new fp32 randn tensor of EVALUATOR_L2_SHAPE a
    repetition, dropped at once (torch's caching allocator keeps the block between repetitions,
    there as here)."""

    bytes = EVALUATOR_L2_BYTES

    def __init__(self, device: torch.device):
        self.device = device

    def __call__(self) -> None:
        torch.randn(EVALUATOR_L2_SHAPE, device=self.device)

    def release(self) -> None:
        """Give the kept block back to the device once timed: another worker's row (a version of
        the same case in its own process) needs it next."""
        torch.cuda.empty_cache()


L2_CLEARS = {"nvgg": L2Flush, "evaluator": EvaluatorL2Clear}  # what clears L2 before each repetition


_CYCLES_PER_US: dict[torch.device, float] = {}


def spin_cycles_per_us(device: torch.device) -> float:
    """Cycles a `torch.cuda._sleep` spin burns per microsecond, measured once (the SM clock under
    load; NVML's current clock reads the idle clock when the GPU has been resting)."""
    if device not in _CYCLES_PER_US:
        cycles = 2_000_000
        torch.cuda._sleep(cycles)  # wake the clocks
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _CYCLES_PER_US[device] = cycles / (start.elapsed_time(end) * 1e3)
    return _CYCLES_PER_US[device]


class Observer(Protocol):
    """What is measured beside a timer's repetitions (clocks.EnergyMeter): told as the first
    begins and after the last ends, and asked at each stop whether the span should go on for it
    (it keeps its own limit)."""

    def before_start(self) -> None: ...

    def wants_more(self) -> bool: ...

    def after_finish(self) -> None: ...


class Windowed:
    """A measurement in windows of repetitions: `begin`, `window` as often as wanted (an A/B's round:
    as often as the versions take turns), `end` for the statistics; `batch` is one run of them
    until the stopping rule (`_enough`) ends it, with the `observer` (if any) around its
    repetitions."""

    observer: Observer | None = None
    _ends: list[float]

    @property
    def ends(self) -> list[float]:
        """When each repetition of the last measurement ended (time.perf_counter, the energy meter's
        clock too): what its window counts the calls completed in."""
        return list(self._ends)

    def batch(self, launches: Sequence[Launch]) -> Stats:
        """Per-call time of the batch, the leaderboard's way: flush, events around all calls, / len."""
        self.begin(launches)
        with self._observed():
            self.run_out(launches)
        return self.end()

    @contextmanager
    def _observed(self):
        """The observer told the repetitions' start and end, the span between them exactly."""
        if self.observer is None:
            yield
            return
        self.observer.before_start()
        try:
            yield
        finally:
            self.observer.after_finish()

    def _held(self) -> bool:
        """Whether the observer holds the span past the timer's own stop."""
        return self.observer is not None and self.observer.wants_more()

    def run_out(self, launches: Sequence[Launch]) -> None:
        """Repetitions until the stopping rule says enough (from now)."""
        started = time.perf_counter()
        while not self._enough(started):
            self.window(launches, 1)


class EventTimer(Windowed):
    """Times a batch of launches with CUDA events on the caller's current stream.

    Two things are kept beside the times, so a caller can tell whether the calls did the work:
    `outputs`, what each call of the last repetition returned (checked after timing), and each
    repetition's escape: after the end event completes, the whole device is synchronised, and the
    host time that takes is work still running that the events did not see (another stream's).
    """

    def __init__(self, device: torch.device | str = "cuda", *, min_reps: int = MIN_REPS, max_reps: int = MAX_REPS,
                 target_rel_err: float = TARGET_REL_ERR, budget_s: float = BUDGET_S, flush: bool = True,
                 queue_ahead: bool = False, l2: str = "nvgg", min_span_s: float = MIN_SPAN_S,
                 host_us: float | None = None, rotate: bool = True, observer: Observer | None = None):
        self.device = torch.device(device)
        self.observer = observer
        self.rotate = rotate  # each block on the next core (`pin`); off where the caller pins (an A/B's round)
        self._block = 0
        self.host_us = host_us  # the host's time to issue one call (datapath.launch_host_us), where measured
        self.min_reps, self.max_reps = min_reps, max_reps
        self.min_span_s = min_span_s
        self.target, self.budget_s = target_rel_err, budget_s
        self.flush = L2_CLEARS[l2](self.device) if flush else (lambda: None)
        self.queue_ahead = queue_ahead
        self._spin_cycles = 0
        self.outputs: list = []
        self._samples: list[float] = []
        self._escaped: list[float] = []
        self._ends: list[float] = []
        self._span = 0.0
        self._baseline = 0.0

    def _calibrate_spin(self, launches: Sequence[Launch]) -> None:
        """Spin long enough for the host to enqueue the whole batch (twice its measured enqueue time)."""
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        for launch in launches:
            launch()
        enqueue_s = time.perf_counter() - t0
        torch.cuda.synchronize(self.device)
        self._spin_cycles = int(max(2 * enqueue_s * 1e6 + 50, 100) * spin_cycles_per_us(self.device))

    def _enough(self, started: float) -> bool:
        """Whether the repetitions so far end the measurement (`_done`); a host-bound row (its mean at
        or under `host_us` / HOST_SHARE) is timed for HOST_SPAN_S, so that its blocks of
        HOST_BLOCK_S see the levels its time wanders between."""
        span = self.min_span_s
        if span and self.host_us and self._samples and sum(self._samples) / len(self._samples) * HOST_SHARE <= self.host_us:
            span = max(span, HOST_SPAN_S)
        self._span = span
        return _done(self._samples, started, self.min_reps, self.max_reps, self.target, self.budget_s, span) \
            and not self._held()

    # A measurement in windows (an A/B's round: `begin`, `window` as often as the versions take
    # turns, `end`); `batch` is one run of them.
    def begin(self, launches: Sequence[Launch]) -> None:
        if self.queue_ahead:
            self._calibrate_spin(launches)
        self._samples, self._escaped, self._ends = [], [], []
        self._span = 0.0
        self._block = 0
        if self.rotate:
            pin(core_for(0))
        self._baseline = self._sync_baseline_us(torch.cuda.current_stream(self.device))

    def window(self, launches: Sequence[Launch], reps: int = 1, release: bool = False) -> None:
        """`reps` repetitions: flush, events around the batch's calls, the escape after; `release`:
        give the evaluator's clear back after them (a version in another process clears next)."""
        stream = torch.cuda.current_stream(self.device)
        for _ in range(reps):
            torch.cuda.synchronize(self.device)
            self.flush()
            if self.queue_ahead:
                torch.cuda._sleep(self._spin_cycles)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            outputs = [launch() for launch in launches]
            end.record(stream)
            end.synchronize()
            t0 = time.perf_counter()
            torch.cuda.synchronize(self.device)
            self._escaped.append(max(0.0, (time.perf_counter() - t0) * 1e6 - self._baseline) / len(launches))
            self._samples.append(start.elapsed_time(end) * 1e3 / len(launches))
            self._ends.append(time.perf_counter())
            self.outputs = outputs
            if self.rotate:
                block = int((self._ends[-1] - self._ends[0]) / _block_s(self._span))
                if block != self._block:
                    self._block = block
                    pin(core_for(block))
        if release:
            self._release()

    def end(self) -> Stats:
        self._release()
        if self.rotate:
            pin(None)
        method = "queue-ahead" if self.queue_ahead else "leaderboard"
        return reduce(self._samples, batch=len(self.outputs), method=method, clock="cuda events",
                      escaped_us=self._escaped, ends_s=self._ends, block_s=_block_s(self._span),
                      host_bound=_host_bound(self._span))

    def _sync_baseline_us(self, stream, reps: int = 5) -> float:
        """What the synchronise after a completed end event takes with no calls between the events,
        after this timer's L2 clear (the slowest of `reps`): the escape check counts only the time
        beyond it. After the evaluator's clear it is several times what it is after nvgg's, with
        nothing left running (NOTES.md, Timer and flags): the median of three let that spread alone
        flag our honest persistent kernel on case 4 as escaping (lab log)."""
        times = []
        for _ in range(reps):
            torch.cuda.synchronize(self.device)
            self.flush()
            start, end = torch.cuda.Event(), torch.cuda.Event()
            start.record(stream)
            end.record(stream)
            end.synchronize()
            t0 = time.perf_counter()
            torch.cuda.synchronize(self.device)
            times.append((time.perf_counter() - t0) * 1e6)
        return max(times)

    def _release(self) -> None:
        release = getattr(self.flush, "release", None)
        if release is not None:
            release()

    def per_call(self, launches: Sequence[Launch]) -> Stats:
        """Each call timed on its own (L2 flushed before each), over all launches of the batch."""
        stream = torch.cuda.current_stream(self.device)
        samples: list[float] = []
        self.outputs = [None] * len(launches)
        ends: list[float] = []
        started = time.perf_counter()
        i = 0
        with self._observed():
            while not _done(samples, started, max(self.min_reps, len(launches)), self.max_reps * len(launches),
                            self.target, self.budget_s, self.min_span_s) or self._held():
                launch = launches[i % len(launches)]
                torch.cuda.synchronize(self.device)
                self.flush()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record(stream)
                self.outputs[i % len(launches)] = launch()
                end.record(stream)
                end.synchronize()
                samples.append(start.elapsed_time(end) * 1e3)
                ends.append(time.perf_counter())
                i += 1
        self._release()
        self._ends = ends
        # no escape check here: one call's honest synchronise after its end event (see
        # flags.ESCAPE_FLOOR_US) is as large as the bound a batch is held to; the batch timers
        # catch work escaping the events
        return reduce(samples, batch=1, method="per-call", clock="cuda events", ends_s=ends)


class CpuTimer(Windowed):
    """Host-clock timing for runs on the CPU (labelled as such everywhere it is shown)."""

    def __init__(self, *, min_reps: int = MIN_REPS, max_reps: int = MAX_REPS, target_rel_err: float = TARGET_REL_ERR,
                 budget_s: float = CPU_BUDGET_S, min_span_s: float = 0.0, observer: Observer | None = None):
        self.min_reps, self.max_reps, self.target, self.budget_s = min_reps, max_reps, target_rel_err, budget_s
        self.observer = observer
        self.min_span_s = min_span_s  # a CPU run is slow enough already; its blocks come from its budget
        self.outputs: list = []
        self._samples: list[float] = []
        self._ends: list[float] = []

    def _enough(self, started: float) -> bool:
        return _done(self._samples, started, self.min_reps, self.max_reps, self.target, self.budget_s,
                     self.min_span_s) and not self._held()

    def begin(self, launches: Sequence[Launch]) -> None:
        self._samples, self._ends = [], []

    def window(self, launches: Sequence[Launch], reps: int = 1, release: bool = False) -> None:
        for _ in range(reps):
            t0 = time.perf_counter()
            self.outputs = [launch() for launch in launches]
            self._ends.append(time.perf_counter())
            self._samples.append((self._ends[-1] - t0) * 1e6 / len(launches))

    def end(self) -> Stats:
        return reduce(self._samples, batch=len(self.outputs), method="cpu", clock="host clock (CPU run)",
                      ends_s=self._ends)

    def per_call(self, launches: Sequence[Launch]) -> Stats:
        return self.batch(launches)


def cpu_budget_s() -> float:
    """How long a row on the CPU is timed at most: CPU_BUDGET_S, or NVGG_CPU_BUDGET_S seconds. A CPU
    run shows that the path works, its time is no kernel's; the test suite sets it short
    (tests/conftest.py), as its CPU rows' times are asserted only to exist."""
    value = os.environ.get("NVGG_CPU_BUDGET_S", "").strip()
    if not value:
        return CPU_BUDGET_S
    try:
        budget = float(value)
    except ValueError:
        budget = math.nan
    if not 0 < budget < math.inf:
        raise NvggError(f"NVGG_CPU_BUDGET_S={value!r}: set it to a number of seconds above 0")
    return budget


def make_timer(device: torch.device, mode: str = "leaderboard", l2: str = "nvgg", **kwargs):
    """The timer of `mode` on `device`, clearing L2 before each repetition the `l2` way (L2_CLEARS);
    `min_span_s=0` for one window only (an A/B's round: the rounds are its blocks); `observer`
    measured beside the repetitions of `batch` and `per_call` (Observer)."""
    if device.type != "cuda":
        return CpuTimer(budget_s=cpu_budget_s(), observer=kwargs.get("observer"))
    return EventTimer(device, queue_ahead=(mode == "queue-ahead"), l2=l2, **kwargs)


def host_time_us(fn: Callable[[], object], sync_device: torch.device | None = None) -> tuple[object, float]:
    """Run fn once and return (its result, wall time in µs), synchronizing the device around it."""
    if sync_device is not None and sync_device.type == "cuda":
        torch.cuda.synchronize(sync_device)
    t0 = time.perf_counter()
    out = fn()
    if sync_device is not None and sync_device.type == "cuda":
        torch.cuda.synchronize(sync_device)
    return out, (time.perf_counter() - t0) * 1e6
