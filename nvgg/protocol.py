"""The competition's evaluator as data: its protocols (one `protocols/NAME.toml` each, a version of
the evaluator's script or a proposal to change it), the plan of passes a mode runs, its stop rule,
its statistics, and why its mean departs from nvgg's steady state.

Nothing here touches a GPU: `nvgg/leaderboard.py` runs a plan in one worker; this module decides
what to run, when a pass stops and what its numbers say, so all of it is tested on the CPU.

`--protocol NAME[:MODE]` names a protocol (or the alias `evaluator`, the newest script) and its
mode (benchmark, the default, or leaderboard).
"""

from __future__ import annotations

import math
import statistics
import tomllib
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from . import data
from .errors import NvggError

ALIASES = {"evaluator": "evaluator-2026-01-29"}
DEFAULT_MODE = "benchmark"
WARMUPS = ("first", "each")
INPUTS = ("originals", "fresh-clones")


@dataclass(frozen=True)
class Stop:
    """The stop rule (see `stops`)."""

    min_index: int
    min_elapsed_ns: float
    rel_err: float
    wall_ns: float


@dataclass(frozen=True)
class Mode:
    """A mode's passes: warm-ups (`warmup`: the first benchmark or each, before any timed pass),
    then a timed pass of each benchmark in order."""

    name: str
    warmup: str
    warmup_repeats: int
    warmup_budget_ns: float
    repeats: int
    budget_ns: float
    recheck: str | bool          # False, or "last": only the last input's verdict of a repetition counts
    timed_inputs: str            # INPUTS
    warmup_inputs: str
    keep_clones: int
    stop_at_failure: bool


@dataclass(frozen=True)
class Protocol:
    name: str
    date: str
    source: str
    about: str
    inputs: int
    seed_step: int
    rtol: float
    atol: float
    clear_shape: tuple[int, ...]
    environment: dict = field(hash=False)
    stop: Stop = field(hash=False)
    modes: dict = field(hash=False)

    @property
    def clear_bytes(self) -> int:
        """What the L2 clear allocates (fp32)."""
        return 4 * math.prod(self.clear_shape)

    def mode(self, name: str | None) -> Mode:
        if name is not None and not name.strip():
            raise NvggError(f"protocol {self.name}: no mode after ':': choose {' or '.join(self.modes)}")
        name = (name or DEFAULT_MODE).strip().lower()
        if name not in self.modes:
            raise NvggError(f"protocol {self.name} has no mode {name!r}: choose {' or '.join(self.modes)} "
                            f"(as in {self.name}:{next(iter(self.modes))})")
        return self.modes[name]

    def describe(self, mode: Mode, order: list[str]) -> dict:
        """What the JSON says ran."""
        return {"name": self.name, "mode": mode.name, "date": self.date, "source": self.source,
                "about": self.about, "order": list(order)}


@dataclass(frozen=True)
class Pass:
    """One pass of a plan: benchmark `index` (of the file's order) generated, checked and timed."""

    case: str
    index: int
    warmup: bool
    repeats: int
    budget_ns: float
    recheck: str | bool
    inputs: str
    keep_clones: int


def folder() -> Path:
    return data.folder("protocols")


def names() -> list[str]:
    return sorted(p.stem for p in folder().glob("*.toml"))


@lru_cache(maxsize=None)
def get(name: str) -> Protocol:
    """The protocol of that name (or alias); NvggError naming the ones there are."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    path = folder() / f"{key}.toml"
    if not key or not path.is_file():
        known = ", ".join(names() + sorted(ALIASES))
        raise NvggError(f"unknown protocol {name!r}: choose from {known}")
    return _parse(path)


def parse(spec: str) -> tuple[Protocol, Mode]:
    """`NAME[:MODE]` -> (protocol, mode); NvggError (exit 2) for a name or mode there is not."""
    if not spec or not spec.strip():
        raise NvggError(f"no protocol named: name one of {', '.join(names() + sorted(ALIASES))}, "
                        f"with :benchmark or :leaderboard")
    name, _, mode = spec.partition(":")
    protocol = get(name)
    return protocol, protocol.mode(mode if _ else None)


def _parse(path: Path) -> Protocol:
    """A protocol file, every key checked: a file that lacks one is nvgg's own error, said plainly."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        stop = Stop(**{k: (int if k == "min_index" else float)(v) for k, v in raw["stop"].items()})
        modes = {}
        for name, m in raw["modes"].items():
            mode = Mode(name=name, **m)
            if mode.warmup not in WARMUPS or mode.timed_inputs not in INPUTS or mode.warmup_inputs not in INPUTS \
                    or mode.recheck not in (False, "last"):
                raise ValueError(f"mode {name}: warmup, inputs or recheck not one nvgg knows")
            modes[name] = mode
        return Protocol(name=raw["name"], date=raw["date"], source=raw["source"], about=raw["about"],
                        inputs=int(raw["inputs"]), seed_step=int(raw["seed_step"]), rtol=float(raw["rtol"]),
                        atol=float(raw["atol"]), clear_shape=tuple(int(x) for x in raw["clear_shape"]),
                        environment={str(k): str(v) for k, v in raw.get("environment", {}).items()},
                        stop=stop, modes=modes)
    except (KeyError, TypeError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise NvggError(f"protocol file {path} is malformed ({type(exc).__name__}: {exc}): "
                        "reinstall nvgg or fix the file") from None


def plan(protocol: Protocol, mode: Mode, cases: list[str]) -> list[Pass]:
    """The passes a mode runs on benchmarks `cases` (the file's order): its warm-ups first (the
    first benchmark's, or each one's), then each benchmark's timed pass."""
    warm = cases[:1] if mode.warmup == "first" else list(cases)
    out = [Pass(c, cases.index(c), True, mode.warmup_repeats, mode.warmup_budget_ns, False, mode.warmup_inputs,
                mode.keep_clones) for c in warm]
    out += [Pass(c, i, False, mode.repeats, mode.budget_ns, mode.recheck, mode.timed_inputs, mode.keep_clones)
            for i, c in enumerate(cases)]
    return out


@dataclass(frozen=True)
class Stats:
    """The evaluator's statistics of a pass, in ns a call as it reports them."""

    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float


def stats(durations_ns: list[float]) -> Stats:
    """The evaluator's statistics: mean, sample standard deviation (n - 1), err = std / sqrt(n),
    best and worst; one duration has std 0 (the evaluator's own would divide by zero)."""
    n = len(durations_ns)
    if n == 0:
        raise ValueError("no durations")
    mean = sum(durations_ns) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in durations_ns) / (n - 1)) if n > 1 else 0.0
    return Stats(runs=n, mean=mean, std=std, err=std / math.sqrt(n), best=float(min(durations_ns)),
                 worst=float(max(durations_ns)))


def stops(stop: Stop, durations_ns: list[float], elapsed_ns: float, budget_ns: float) -> bool:
    """After a repetition (the last of `durations_ns`, `elapsed_ns` since the pass's first began):
    whether the pass stops before its repetition limit. Looked at from repetition min_index + 1 on,
    once min_elapsed_ns have passed: err / mean under rel_err, mean x runs over `budget_ns` (a
    call's mean times the runs, not the time spent: the budget rarely binds), or wall_ns passed."""
    i = len(durations_ns) - 1
    if i <= stop.min_index or elapsed_ns <= stop.min_elapsed_ns:
        return False
    s = stats(durations_ns)
    return s.err / s.mean < stop.rel_err or s.mean * s.runs > budget_ns or elapsed_ns > stop.wall_ns


def geomean(values: list[float]) -> float | None:
    """The leaderboard's ranking over the benchmarks' means (None where any is missing)."""
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


# ---------------------------------------------------------------- why the mean departs

# under this share of the steady state a departure is not explained: the two clear L2 differently
# (nvgg's flush of twice the L2 against the evaluator's 62.5 GiB randn) and run in other processes
FLOOR = 0.02
# a cause is named where it moves the mean by this share of it or more (and beyond the pass's noise)
CAUSE_FLOOR = 0.01
# a repetition is an outlier where it lies this many median absolute deviations (scaled to a
# standard deviation) above the median, and over OUTLIER_FLOOR above it
OUTLIER_MADS = 5.0
# the host's time to issue a repetition's calls within this range of the clear's head start: the
# mean hangs on the host's speed that run (per_shape.py on case 1: NOTES.md, Leaderboard prediction)
EDGE = (0.75, 1.25)
OUTLIER_FLOOR = 0.05


@dataclass
class Departure:
    """The prediction's mean against the steady state, and the cause nvgg measured."""

    departs: bool
    difference_us: float
    noise_us: float
    cause: str
    caveat: str = ""   # where the host's time to issue sits near the clear's head start (EDGE)

    def to_dict(self) -> dict:
        return asdict(self)


def explain(durations_us: list[float], steady_us: float | None, steady_noise_us: float | None, *,
            inputs: str, host_us: list[float] | None = None, clear_us: float | None = None,
            calls: int = 15) -> Departure:
    """Whether the mean of `durations_us` (a timed pass, µs a call) departs from the steady state
    `steady_us` beyond noise (the 95% half-width, t x err, of the repetitions after the first, plus
    the steady state's rerun half-width `steady_noise_us`; FLOOR of it at least), and the one cause
    nvgg measured for it, in words:
    - the first repetition's cost, on the inputs' `originals` (the first calls on tensors the
      check never saw: it checked clones) or on `fresh-clones` (every repetition's calls are first
      sights), with what it adds to the mean;
    - outliers among the other repetitions;
    - host work the L2 clear hides (`host_us`: the host's time to issue each repetition's calls,
      `clear_us`: the clear's time on the device, which runs while the host issues them) or does not.
    """
    s = stats(durations_us)
    mean = s.mean
    if steady_us is None:
        return Departure(False, 0.0, 0.0, "no steady state to compare with (the row was not timed)")
    first, rest = durations_us[0], durations_us[1:]
    spread = stats(rest) if len(rest) > 1 else s  # (a first repetition's cost is no noise: it comes every run)
    own = _t975(spread.runs - 1) * spread.err if spread.runs > 1 else 0.0  # the pass's own noise
    noise = max(own + (steady_noise_us or 0.0), FLOOR * steady_us)
    diff = mean - steady_us
    departs = abs(diff) > noise
    rest_mean = sum(rest) / len(rest) if rest else first
    first_share = (first - rest_mean) / s.runs  # what the first repetition adds to the mean
    found: list[tuple[float, str]] = []  # (what it moves the mean by, in µs; the words)
    if inputs == "fresh-clones":
        med = statistics.median(durations_us)
        found.append((med - steady_us,
                      f"every repetition's calls run on fresh clones, tensors the submission has not seen: "
                      f"{med:.1f} µs a call (median) against {steady_us:.1f} µs on tensors it has seen, "
                      f"so per-tensor work is paid on every call"))
    elif rest:
        found.append((first_share,
                      f"the first timed repetition took {first:.1f} µs a call ({first / rest_mean:.1f}x the rest): "
                      f"its {calls} calls were the first on the inputs' originals, tensors the check never saw (it "
                      f"ran on clones); it adds {first_share:.1f} µs to the mean of {s.runs} "
                      f"({rest_mean:.1f} µs without it)"))
    out = _outliers(rest)
    if out:
        added = (sum(out) - len(out) * statistics.median(rest)) / s.runs
        found.append((added, f"{len(out)} outlying repetition(s) after the first (up to {max(out):.1f} µs a call "
                             f"against a median of {statistics.median(rest):.1f}) add {added:.1f} µs to the mean"))
    caveat = ""
    if host_us and clear_us is not None:
        host = statistics.median(host_us) / calls
        if diff < 0:
            timed = ("the device's work alone" if host * calls <= clear_us else
                     f"only the {host * calls - clear_us:.0f} µs of it past that")
            found.append((-min(abs(diff), host),
                          f"host work hidden: the host takes {host * calls:.0f} µs to issue a repetition's {calls} "
                          f"calls and the L2 clear gives it a {clear_us:.0f} µs head start on the device, so the "
                          f"events time {timed} (the steady state counts {host:.1f} µs a call of host time)"))
        elif host * calls > clear_us:
            found.append(((host * calls - clear_us) / calls,
                          f"host work not hidden: the host takes {host * calls:.0f} µs to issue a repetition's "
                          f"{calls} calls, past the L2 clear's {clear_us:.0f} µs head start"))
        if EDGE[0] <= host * calls / clear_us <= EDGE[1]:
            caveat = (f"at the edge: the host's {host * calls:.0f} µs to issue a repetition's calls is within "
                      f"{EDGE[1] - 1:.0%} of the clear's {clear_us:.0f} µs head start, so a slower or faster host "
                      f"(another process, another core) moves this mean by up to {host * (EDGE[1] - 1):.0f} µs")
    if not departs:
        return Departure(False, diff, noise, "", caveat)
    # every cause that moves the mean beyond the pass's own noise (CAUSE_FLOOR of it at least), the
    # largest first: the first repetition's cost is named wherever it counts, beside a larger cause
    named = [words for size, words in sorted(found, key=lambda f: -abs(f[0])) if abs(size) > max(own, CAUSE_FLOOR * mean)]
    cause = "; ".join(named) if named else (f"no cause nvgg measured: no first-repetition cost, outlier or host work "
                                            f"explains {diff:+.1f} µs")
    return Departure(True, diff, noise, cause, caveat)


def _outliers(values: list[float]) -> list[float]:
    if len(values) < 3:
        return []
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values) * 1.4826
    return [v for v in values if v > med + max(OUTLIER_MADS * mad, OUTLIER_FLOOR * med)]


def _t975(df: int) -> float:
    from .timing import t975  # (timing imports torch: only when a departure is judged)
    return t975(df)
