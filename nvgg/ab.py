"""A fair A/B: versions of one case measured in rounds, until the 95% interval of each version's
time ratio to the first is decided against the floor, or the round limit or the time budget ends
it. Each version is first set up, checked and timed whole in a warm worker of its own
(datapath.run_round: its `first` result); then each round refills every version's inputs with new
values, alternates their timed windows (one leaderboard repetition each, a random order each
round, then reversed: A B B A ...) for a quarter of a second or as long as the rest of the last
round took (round_window_s) with every version's launching thread on one core, the next round on
the next core, and checks what each version's timed calls returned (rows.round_in).

Per case: each version's rounds, the ratio of its time to the first version's (the 20%-trimmed
mean of the per-round log ratios: a round's two measurements ran back to back, so a drift lands on
both; a round that a pause of the host hit on one version only is trimmed), its 95% interval
(Yuen's, Student's t over the rounds kept) and a class: `faster` or `slower` where
the whole interval lies beyond the floor, `same` where it lies within it, `unsure` otherwise. Over
the cases: the geometric mean of the ratios with its interval.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

from . import procs, rows, timing
from .timing import t975
from .result import Result, Row

MIN_ROUNDS = 5
# A host-bound version's rounds spread wide: the same build as A and as B, its workers' layout fixed
# (procs.fixed_layout), gave intervals of ±1.2-4.5% (median over 5 A/Bs a case; multistream/cute and
# a torch submission, cases 1-4, H100, 2026-11-27), too wide to call same at 2% in the rounds an A/B
# has. In a case where a version is host-bound (its host time to issue a call timing.HOST_SHARE of
# the call or more) an interval within this floor is same. One wholly beyond the asked floor is
# still faster or slower: no interval of the same build lay wholly beyond ±2% (106 host-bound
# case-tries, four A/Bs side by side on a 4-GPU H100 host, 2026-11-27), while the 3% slower copy's
# case 4, host-bound there, lay at 1.034-1.038. (One did later on a host loaded past its cores, in a
# case not host-bound by this measure: CaseAB.oversubscribed.)
HOST_FLOOR = 0.05
# The share of rounds trimmed from each end of the log ratios (Yuen's trimmed mean; 20% is the usual
# choice in robust statistics, e.g. Wilcox, "Introduction to Robust Estimation"). A host-bound
# round now and then lands a pause of the host on one version only (a round's ratio 1.3-1.5 among
# rounds within 1-2%), and one such round widened a plain t interval past the floor. 13 A/Bs of
# the same build (multistream/cute and a torch submission, cases 1-4, two A/Bs side by side on a
# 2-GPU H100 host, 2026-11-27), replayed round by round with the same stopping rule: trimmed, 42 of
# 52 case-tries same (2 more still open where the kept rounds end), plain 35; neither called one
# faster or slower.
TRIM = 0.2
ROUND_MAX_S = 2.0  # the longest a round's windows take turns (round_window_s)


@dataclass(frozen=True)
class Ratio:
    """A version's time over the first version's: the estimate and its 95% interval."""

    ratio: float
    lo: float
    hi: float
    n: int
    df: int | None = None  # the interval's degrees of freedom (None: n - 1, nothing trimmed)

    @property
    def dof(self) -> int:
        return self.n - 1 if self.df is None else self.df

    def classify(self, floor: float, same_within: float | None = None) -> str:
        """faster / slower where the whole interval lies beyond the floor (0.02: a 2% change is one
        that matters), same where it lies within `same_within` (the floor unless given: a host-bound
        case's ab.HOST_FLOOR), unsure otherwise."""
        within = floor if same_within is None else same_within
        if self.hi < 1 - floor:
            return "faster"
        if self.lo > 1 + floor:
            return "slower"
        if self.lo >= 1 - within and self.hi <= 1 + within:
            return "same"
        return "unsure"

    @property
    def spread(self) -> float:
        """The rounds' spread: the standard deviation of their log ratios as the interval sees it
        (its standard error times the square root of the rounds)."""
        return (math.log(self.hi) - math.log(self.lo)) / 2 / t975(self.dof) * math.sqrt(self.n)

    def rounds_to_decide(self, floor: float, same_within: float | None = None) -> int:
        """About how many rounds at this spread would narrow the interval enough to class this ratio
        (`classify`'s widths): the fewest whose interval (t with the degrees of freedom that many
        rounds keep, `kept`) fits under the distance from the estimate to the nearer edge of
        ±same_within where it lies inside, or past the edge of ±floor where it lies beyond; more than
        the rounds run where it is not classed yet (at 5 rounds, 3 kept, t is 4.3, not 1.96)."""
        if self.classify(floor, same_within) != "unsure":
            return self.n
        m = math.log(self.ratio)
        within = floor if same_within is None else same_within
        inside = min(math.log(1 + within) - m, m - math.log(1 - within))
        beyond = max(m - math.log(1 + floor), math.log(1 - floor) - m)
        distance = max(inside, beyond)
        if distance <= 0:
            return 10**9
        # from the count the normal quantile gives (t is no narrower) up to where t is 1.96 (df > 120)
        k = max(self.n + 1, math.ceil((1.96 * self.spread / distance) ** 2))
        while t975(kept(k) - 1) * self.spread / math.sqrt(k) > distance:
            k += 1
        return k


def kept(n: int, trim: float = TRIM) -> int:
    """How many of n rounds a trimmed ratio keeps: `trim` of them off each end (at 20%: none under 5)."""
    return n - 2 * int(trim * n)


def ratio(base: list[float], other: list[float], trim: float = TRIM) -> Ratio | None:
    """Paired by round: the trimmed mean of log(other/base) (`trim` of the rounds off each end,
    none under 5 rounds) and Yuen's t interval (the winsorized spread over the rounds kept); None
    under 2 rounds. With nothing trimmed: the geometric mean and the plain t interval."""
    logs = [math.log(o / b) for b, o in zip(base, other) if b > 0 and o > 0]
    n = len(logs)
    if n < 2:
        return None
    h = kept(n, trim)
    cut = (n - h) // 2
    ordered = sorted(logs)
    mean = sum(ordered[cut:n - cut]) / h
    low, high = ordered[cut], ordered[n - cut - 1]
    wins = [min(max(x, low), high) for x in logs]  # winsorized: the cut rounds set to the nearest kept
    half = t975(h - 1) * math.sqrt((n - 1) * statistics.variance(wins) / (h * (h - 1)))
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, h - 1)


def geomean(ratios: list[Ratio]) -> Ratio | None:
    """Over the cases: the geometric mean of the ratios, with an interval from each case's (their
    log half-widths as t-scaled standard errors, added in quadrature)."""
    if not ratios:
        return None
    logs = [math.log(r.ratio) for r in ratios]
    ses = [(math.log(r.hi) - math.log(r.lo)) / 2 / t975(r.dof) for r in ratios]
    mean = sum(logs) / len(logs)
    se = math.sqrt(sum(s * s for s in ses)) / len(ses)
    dof = sum(r.dof for r in ratios)
    half = t975(dof) * se
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), min(r.n for r in ratios), dof)


def geomeans(done: list["CaseAB"]) -> dict[str, Ratio | None]:
    """Each version after the first: the geometric mean of its ratios over the cases that have one."""
    names = done[0].versions if done else []
    return {name: geomean([ab.ratios()[v] for ab in done if ab.ratios()[v] is not None])
            for v, name in enumerate(names) if v}


@dataclass
class CaseAB:
    """One case's rounds: every version's results, round by round (None where a round failed)."""

    case: str
    versions: list[str]
    results: list[list[Result]] = field(default_factory=list)  # [version][round]
    stopped: str = ""
    first: list[Result | None] = field(default_factory=list)  # [version]: set up, checked, timed whole
    load: float | None = None  # the host's highest load seen in the case (timing.host_load), on `cores` cores
    cores: int = 0

    def saw_load(self) -> None:
        """Keep the host's load now where it is the case's highest yet."""
        now = timing.host_load()
        if now is not None and (self.load is None or now[0] > self.load):
            self.load, self.cores = now

    @property
    def oversubscribed(self) -> bool:
        """Whether the host's load average reached its cores during the case (timing.host_load). The
        rounds' interval covers what changes from round to round; a version's worker slowed for the
        whole case is a bias it cannot show. On such a host (four A/Bs side by side, load 76 on 64
        cores) the same torch submission twice was once slower in every round of case 1, called
        slower at 1.043 (1.027-1.060), and alone on 16-core hosts (load under 2) same in 20 of 20 tries
        (H100, 2026-11-28, benchmarks/ab_trust.py)."""
        return self.load is not None and self.load >= self.cores

    def load_text(self) -> str:
        """How loaded the host was, for a note: "the host's load average reached 76 on 64 cores"."""
        return f"the host's load average reached {self.load:.0f} on {self.cores} cores"

    def times(self, v: int) -> list[float]:
        return [r.time_us for r in self.results[v] if _good(r)]

    def ratios(self) -> list[Ratio | None]:
        """Each version against the first, over the rounds where both measured."""
        out = []
        for v in range(len(self.versions)):
            pairs = [(a.time_us, b.time_us) for a, b in zip(self.results[0], self.results[v]) if _good(a) and _good(b)]
            out.append(ratio([p[0] for p in pairs], [p[1] for p in pairs]) if v else None)
        return out

    def failed(self) -> Result | None:
        """The first failed result (wrong, an error, a crash) or suspect one (a time that cannot be
        the work's: below the speed of light, work escaping the events): the case's A/B ends there."""
        return next((r for r in self.every() if r.status != "ok" or r.suspect), None)

    @property
    def host_bound(self) -> bool:
        """Whether a version's first run on a GPU was host-bound (timing.HOST_SHARE; a CPU run's calls
        are all host time, and no GPU waits for them)."""
        return any(r is not None and r.status == "ok" and r.stats is not None and r.stats.clock == "cuda events"
                   and r.time_us and r.setup_us.get("launch_host", 0.0) >= timing.HOST_SHARE * r.time_us
                   for r in self.first)

    def same_within(self, asked: float) -> float:
        """Within what an interval is same here: the asked floor, or HOST_FLOOR where it is host-bound."""
        return max(asked, HOST_FLOOR) if self.host_bound else asked

    def classify(self, r: Ratio, asked: float) -> str:
        """A ratio's class here: against the asked floor, same within `same_within(asked)`."""
        return r.classify(asked, self.same_within(asked))

    def every(self) -> list[Result]:
        """Every result of the case: the versions' first runs, then their rounds."""
        return [r for r in self.first if r is not None] + [r for results in self.results for r in results]


def _good(r: Result) -> bool:
    return r.status == "ok" and not r.suspect and bool(r.time_us)


def run(case_rows: list[list[Row]], *, floor: float, max_rounds: int, budget_s: float, timeout_s: float | None = None,
        seed: int = 0, on_case: Callable[[CaseAB, bool], None] | None = None,
        pool: procs.Pool | None = None) -> list[CaseAB]:
    """Each case's versions (its rows, the first the base) in rounds, a random order each round,
    all in one pool (a worker a version, kept across cases and rounds; `pool`: one the caller
    holds); a case stops once every ratio is decided after MIN_ROUNDS, at `max_rounds`, on a
    failure, or when its share of the budget is spent and it has had MIN_ROUNDS. `on_case(ab,
    done)` as each case starts (done False) and ends (True)."""
    if pool is None:
        with procs.Pool(timeout_s, preload=("nvgg.datapath",)) as own:
            return run(case_rows, floor=floor, max_rounds=max_rounds, budget_s=budget_s, timeout_s=timeout_s,
                       seed=seed, on_case=on_case, pool=own)
    order = random.Random(seed)
    done_rounds = 0
    out = []
    started = time.monotonic()
    for i, versions in enumerate(case_rows):
        ab = CaseAB(versions[0].case.id, [r.label if r.submission else r.name.split(" ", 1)[1] for r in versions],
                    [[] for _ in versions])
        if on_case:
            on_case(ab, False)
        ab.saw_load()
        # each set up, checked and timed whole (one window: the rounds are the A/B's blocks), its energy measured
        ab.first = [rows.run_in(pool, dataclasses.replace(row, span=False), rounds=True) for row in versions]
        # the case's rounds get an equal share of the budget left once its first runs are done (spent:
        # MIN_ROUNDS), so the workers' start, which lands on the first case, is shared by all cases:
        # charged to the first case's share, it left the torch submission's case 1 its 5 rounds (first
        # runs 21-31 s of a 30-s share; H100, 2026-11-27)
        left = max(0.0, budget_s - (time.monotonic() - started))
        deadline = time.monotonic() + left / (len(case_rows) - i)
        window_s = rows.ROUND_S
        for n in range(max_rounds if ab.failed() is None else 0):
            turn = list(range(len(versions)))
            order.shuffle(turn)
            core = timing.core_for(done_rounds)  # a round's versions share a core, the next round the next core
            done_rounds += 1
            began = time.monotonic()
            for v, result in zip(turn, rows.round_in(pool, [versions[v] for v in turn], core=core, window_s=window_s)):
                ab.results[v].append(result)
            window_s = round_window_s(time.monotonic() - began, window_s)
            ab.saw_load()
            ab.stopped = _stop(ab, n + 1, floor, deadline)
            if ab.stopped:
                break
        else:
            ab.stopped = _stop(ab, 0, floor, deadline) if ab.failed() is not None else f"{max_rounds} rounds"
        out.append(ab)
        if on_case:
            on_case(ab, True)
    return out


def round_window_s(round_s: float, window_s: float) -> float:
    """How long the next round's windows take turns: as long as the rest of the last round took
    (its new values, each version's check; its length less the windows' `window_s`), within
    rows.ROUND_S and ROUND_MAX_S. So at least about half an A/B's time is timed windows, where a
    version's calls are long and its checks slow (the torch submission's case 1: a 45-ms window
    and rounds of about 1 s, 3 windows a version in a quarter-second; H100, 2026-11-27)."""
    return min(ROUND_MAX_S, max(rows.ROUND_S, round_s - window_s))


def _stop(ab: CaseAB, rounds_done: int, floor: float, deadline: float) -> str:
    """Why the case's rounds end now ("" to go on)."""
    bad = ab.failed()
    if bad is not None:
        which = "its first run" if any(bad is r for r in ab.first) else "a round"
        return f"{which} failed ({bad.status if bad.status != 'ok' else 'suspect: ' + ', '.join(f.kind for f in bad.flags)})"
    if rounds_done >= MIN_ROUNDS and all(r is not None and ab.classify(r, floor) != "unsure" for r in ab.ratios()[1:]):
        return f"decided after {rounds_done} rounds"
    # the budget ends a case only after MIN_ROUNDS: a case whose workers' start and first runs ate
    # its share got 1-4 rounds and no class (the torch submission on case 1 beside three other
    # A/Bs: first runs 21-31 s of a 30-s share, 8 of 20 A/Bs unsure or without a ratio; H100,
    # 2026-11-27); a round takes 0.2-1.5 s there
    if rounds_done >= MIN_ROUNDS and time.monotonic() >= deadline:
        return f"time budget spent after {rounds_done} rounds"
    return ""
