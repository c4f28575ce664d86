"""A fair A/B: versions of one case measured in rounds, looked at after a fixed schedule of rounds
(`Design`) until the interval of each version's time ratio to the first is decided against the
floor, or the last look or the time budget ends it. Each version is first set up, checked and timed
whole in a warm worker of its own (datapath.run_round: its `first` result); then each round refills
every version's inputs with new values, alternates their timed windows (one leaderboard repetition
each, a random order each round, then reversed: A B B A ...) for a quarter of a second or as long as
the rest of the last round took (round_window_s) with every version's launching thread on one core,
the next round on the next core, and checks what each version's timed calls returned
(rows.round_in).

Per case: each version's rounds, the ratio of its time to the first version's (the 20%-trimmed
mean of the per-round log ratios: a round's two measurements ran back to back, so a drift lands on
both; a round that a pause of the host hit on one version only is trimmed), its interval (Yuen's,
Student's t over the rounds kept) and a class: `faster` or `slower` where the whole interval lies
beyond the floor, `same` where it lies within it, `unsure` otherwise. A case may stop at any of its
looks, so each look's interval is drawn at a level of its own (the 5% a wrong interval is allowed,
spent over the looks: Bonferroni), and the interval printed where the case stops holds the truth
95% of the time whichever look that was. Over the cases: the geometric mean of the ratios with its
interval.
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
from .timing import t_quantile
from .result import Result, Row

MIN_ROUNDS = 5  # the first look
# The share of wrong intervals allowed over an A/B's looks of a case: each look's interval gets a
# part (Design), so the one printed where the case stops holds the truth at least 1 - ALPHA of the
# time. A fixed level at every round from the fifth, stopping at the first decided one, called a
# small true change same, or a smaller one slower, well beyond ALPHA in simulated A/Bs
# (benchmarks/ab_coverage.py; lab log).
ALPHA = 0.05
LOOK_GROWTH = 1.5  # each look after the first this many times the rounds of the one before
# A host-bound case (a version's host time to issue a call timing.HOST_SHARE of the call or more)
# spreads wide from round to round: its last look is HOST_ROUNDS times --rounds, so a change of a
# few percent can still clear the floor there instead of being called same within a wider band.
HOST_ROUNDS = 3
# The share of rounds trimmed from each end of the log ratios (Yuen's trimmed mean; 20% is the usual
# choice in robust statistics, e.g. Wilcox, "Introduction to Robust Estimation"). A host-bound
# round now and then lands a pause of the host on one version only (one round's ratio far off
# rounds close together), and one such round widened a plain t interval past the floor. A/Bs of
# the same build replayed round by round with the same stopping rule were called same more often
# trimmed than plain, and neither called one faster or slower (lab log).
TRIM = 0.2
ROUND_MAX_S = 2.0  # the longest a round's windows take turns (round_window_s)


def _two_sided(level: float, dof: float) -> float:
    """Student's t for a two-sided interval at `level` (0.95: its 97.5% quantile)."""
    return t_quantile(1 - (1 - level) / 2, dof)


@dataclass(frozen=True)
class Ratio:
    """A version's time over the first version's: the estimate and its interval, drawn at `level`
    (a look's share of ALPHA: Design.level)."""

    ratio: float
    lo: float
    hi: float
    n: int
    df: float | None = None  # the interval's degrees of freedom (None: n - 1, nothing trimmed)
    level: float = 1 - ALPHA

    @property
    def dof(self) -> float:
        return self.n - 1 if self.df is None else self.df

    def classify(self, floor: float) -> str:
        """faster / slower where the whole interval lies beyond ±floor (0.02: a 2% change is one
        that matters), same where it lies within it, unsure otherwise: so a ratio called same is one
        whose interval excludes every change of the floor or more."""
        if self.hi < 1 - floor:
            return "faster"
        if self.lo > 1 + floor:
            return "slower"
        if self.lo >= 1 - floor and self.hi <= 1 + floor:
            return "same"
        return "unsure"

    @property
    def spread(self) -> float:
        """The rounds' spread: the standard deviation of their log ratios as the interval sees it
        (its standard error times the square root of the rounds)."""
        return (math.log(self.hi) - math.log(self.lo)) / 2 / _two_sided(self.level, self.dof) * math.sqrt(self.n)

    def rounds_to_decide(self, floor: float, level: float | None = None) -> int:
        """About how many rounds at this spread would narrow the interval enough to class this ratio:
        the fewest whose interval (t at `level`, this interval's own unless given, with the degrees
        of freedom that many rounds keep, `kept`) fits under the distance from the estimate to the
        nearer edge of ±floor where it lies inside, or past that edge where it lies beyond; more than
        the rounds run where it is not classed yet (at 5 rounds, 3 kept, t is large)."""
        if self.classify(floor) != "unsure":
            return self.n
        level = self.level if level is None else level
        m = math.log(self.ratio)
        inside = min(math.log(1 + floor) - m, m - math.log(1 - floor))
        beyond = max(m - math.log(1 + floor), math.log(1 - floor) - m)
        distance = max(inside, beyond)
        if distance <= 0:
            return 10**9
        # from the count the normal quantile gives (t is no narrower) up to where t reaches it
        k = max(self.n + 1, math.ceil((_two_sided(level, 10**6) * self.spread / distance) ** 2))
        while _two_sided(level, kept(k) - 1) * self.spread / math.sqrt(k) > distance:
            k += 1
        return k


def kept(n: int, trim: float = TRIM) -> int:
    """How many of n rounds a trimmed ratio keeps: `trim` of them off each end (at 20%: none under 5)."""
    return n - 2 * int(trim * n)


def ratio(base: list[float], other: list[float], trim: float = TRIM, level: float = 1 - ALPHA) -> Ratio | None:
    """Paired by round: the trimmed mean of log(other/base) (`trim` of the rounds off each end,
    none under 5 rounds) and Yuen's t interval at `level` (the winsorized spread over the rounds
    kept); None under 2 rounds. With nothing trimmed: the geometric mean and the plain t interval."""
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
    half = _two_sided(level, h - 1) * math.sqrt((n - 1) * statistics.variance(wins) / (h * (h - 1)))
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, h - 1, level)


@dataclass(frozen=True)
class Design:
    """When a case's rounds are looked at, and at what level: looks after MIN_ROUNDS rounds, then
    each LOOK_GROWTH times the one before, the last at the case's most rounds; the last look gets half
    of ALPHA, the others share the other half (Bonferroni: whichever look a case stops at, the
    chance that any look's interval missed is at most ALPHA). A look the time budget forces before
    its round takes the level of the next look in the schedule, which it then replaces."""

    looks: tuple[int, ...]
    alphas: tuple[float, ...]

    @classmethod
    def of(cls, most: int) -> "Design":
        looks = [MIN_ROUNDS]
        while math.ceil(looks[-1] * LOOK_GROWTH) < most:
            looks.append(math.ceil(looks[-1] * LOOK_GROWTH))
        if most > looks[-1]:
            looks.append(most)
        if len(looks) == 1:
            return cls(tuple(looks), (ALPHA,))
        early = ALPHA / 2 / (len(looks) - 1)
        return cls(tuple(looks), (early,) * (len(looks) - 1) + (ALPHA / 2,))

    @property
    def most(self) -> int:
        return self.looks[-1]

    def look(self, rounds: int) -> int:
        """The look that `rounds` rounds take: the first scheduled at or after it."""
        return next((k for k, n in enumerate(self.looks) if n >= rounds), len(self.looks) - 1)

    def level(self, rounds: int) -> float:
        """The level of the interval looked at after `rounds` rounds."""
        return 1 - self.alphas[self.look(rounds)]

    def to_dict(self) -> dict:
        return {"looks": list(self.looks), "levels": [1 - a for a in self.alphas], "alpha": ALPHA}

    @classmethod
    def from_dict(cls, raw: dict) -> "Design":
        return cls(tuple(raw["looks"]), tuple(1 - level for level in raw["levels"]))


def geomean(ratios: list[Ratio]) -> Ratio | None:
    """Over the cases: the geometric mean of the ratios, its interval the cases' own half-widths (in
    logs, each at its own t and level) added in quadrature. Where one case's noise dominates, that
    is the case's own interval, as Welch-Satterthwaite's degrees of freedom would make it (summing
    the cases' degrees of freedom made it a third too narrow); where the cases are alike it is wider
    than a pooled t, which the cases' stopping at their looks needs (benchmarks/ab_coverage.py).
    Its degrees of freedom (Welch-Satterthwaite's) are kept for the record."""
    if not ratios:
        return None
    logs = [math.log(r.ratio) for r in ratios]
    halves = [(math.log(r.hi) - math.log(r.lo)) / 2 for r in ratios]
    mean = sum(logs) / len(logs)
    half = math.sqrt(sum(h * h for h in halves)) / len(halves)
    ses = [h / _two_sided(r.level, r.dof) for h, r in zip(halves, ratios)]
    total = sum(s * s for s in ses)
    dof = total * total / sum(s ** 4 / r.dof for s, r in zip(ses, ratios)) if total > 0 else min(r.dof for r in ratios)
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), min(r.n for r in ratios), dof,
                 1 - ALPHA)


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
    design: Design | None = None  # its looks, set once its first runs tell whether it is host-bound
    level: float = 1 - ALPHA      # the level of the last look taken (its ratios' intervals are drawn at it)
    planned_host_bound: bool = False  # whether its design was a host-bound case's

    def saw_load(self) -> None:
        """Keep the host's load now where it is the case's highest yet."""
        now = timing.host_load()
        if now is not None and (self.load is None or now[0] > self.load):
            self.load, self.cores = now

    @property
    def oversubscribed(self) -> bool:
        """Whether the host's load average reached its cores during the case (timing.host_load). The
        rounds' interval covers what changes from round to round; a version's worker slowed for the
        whole case is a bias it cannot show. On such a host (four A/Bs side by side) the same torch
        submission twice was once slower in every round of a case, and called slower, where alone
        it was same in every try (benchmarks/ab_trust.py; lab log, the A/B counts of 3c7f5a0)."""
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
            out.append(ratio([p[0] for p in pairs], [p[1] for p in pairs], level=self.level) if v else None)
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

    def plan(self, most: int) -> Design:
        """The case's looks: to `most` rounds (--rounds), HOST_ROUNDS times that where host-bound."""
        self.planned_host_bound = self.host_bound
        self.design = Design.of(most * (HOST_ROUNDS if self.planned_host_bound else 1))
        return self.design

    def look(self, rounds: int, floor: float, budget_spent: bool = False) -> str:
        """After `rounds` rounds: why the case stops now ("" to go on). A failure ends it at any round;
        otherwise it is looked at on its design's schedule, or before it where the budget is spent
        (after MIN_ROUNDS), its intervals drawn at that look's level, and it stops where every
        ratio is classed, the budget is spent, or the last look is reached."""
        bad = self.failed()
        if bad is not None:
            which = "its first run" if any(bad is r for r in self.first) else "a round"
            return f"{which} failed ({bad.status if bad.status != 'ok' else 'suspect: ' + ', '.join(f.kind for f in bad.flags)})"
        design = self.design or self.plan(rounds)
        if rounds < MIN_ROUNDS or (rounds not in design.looks and not budget_spent):
            return ""
        self.level = design.level(rounds)
        if all(r is not None and r.classify(floor) != "unsure" for r in self.ratios()[1:]):
            return f"decided after {rounds} rounds"
        if rounds >= design.most:
            return f"{rounds} rounds"
        # the budget ends a case only after MIN_ROUNDS: a case whose workers' start and first runs ate
        # its share would otherwise get 1-4 rounds and no class
        if budget_spent:
            return f"time budget spent after {rounds} rounds"
        return ""

    def rule(self, floor: float) -> dict:
        """The rule that classed the case's ratios, for the JSON and the table's notes."""
        return {"band": floor, "host_bound": self.planned_host_bound, "level": self.level,
                "coverage": 1 - ALPHA, **(self.design.to_dict() if self.design else {})}

    @classmethod
    def kept(cls, case: str, versions: list[str], results: list[list[Result]], stopped: str, rule: dict) -> "CaseAB":
        """A case as a result file kept it (`rule`: CaseAB.rule's; {} in files written before it)."""
        design = Design.from_dict(rule) if "looks" in rule else None
        return cls(case, versions, results, stopped, design=design, level=rule.get("level", 1 - ALPHA),
                   planned_host_bound=rule.get("host_bound", False))

    def every(self) -> list[Result]:
        """Every result of the case: the versions' first runs, then their rounds."""
        return [r for r in self.first if r is not None] + [r for results in self.results for r in results]


def _good(r: Result) -> bool:
    return r.status == "ok" and not r.suspect and bool(r.time_us)


def run(case_rows: list[list[Row]], *, floor: float, max_rounds: int, budget_s: float, timeout_s: float | None = None,
        seed: int = 0, on_case: Callable[[CaseAB, bool], None] | None = None,
        pool: procs.BasePool | None = None) -> list[CaseAB]:
    """Each case's versions (its rows, the first the base) in rounds, a random order each round,
    all in one pool (a worker a version, kept across cases and rounds; `pool`: one the caller
    holds); a case stops at a look of its design (`max_rounds` its last, HOST_ROUNDS times that
    where host-bound) once every ratio is decided, at its last look, on a failure, or when its
    share of the budget is spent and it has had MIN_ROUNDS (CaseAB.look). `on_case(ab, done)` as
    each case starts (done False) and ends (True)."""
    if pool is None:
        with rows.pools(None, timeout_s) as (own,):
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
        ab.plan(max_rounds)
        # the case's rounds get an equal share of the budget left once its first runs are done (spent:
        # MIN_ROUNDS), so the workers' start, which lands on the first case, is shared by all cases
        left = max(0.0, budget_s - (time.monotonic() - started))
        deadline = time.monotonic() + left / (len(case_rows) - i)
        window_s = rows.ROUND_S
        ab.stopped = ab.look(0, floor)
        n = 0
        while not ab.stopped:
            turn = list(range(len(versions)))
            order.shuffle(turn)
            core = timing.core_for(done_rounds)  # a round's versions share a core, the next round the next core
            done_rounds += 1
            began = time.monotonic()
            for v, result in zip(turn, rows.round_in(pool, [versions[v] for v in turn], core=core, window_s=window_s)):
                ab.results[v].append(result)
            window_s = round_window_s(time.monotonic() - began, window_s)
            ab.saw_load()
            n += 1
            ab.stopped = ab.look(n, floor, budget_spent=time.monotonic() >= deadline)
        out.append(ab)
        if on_case:
            on_case(ab, True)
    return out


def round_window_s(round_s: float, window_s: float) -> float:
    """How long the next round's windows take turns: as long as the rest of the last round took
    (its new values, each version's check; its length less the windows' `window_s`), within
    rows.ROUND_S and ROUND_MAX_S. So at least about half an A/B's time is timed windows, where a
    version's calls are long and its checks slow (the torch submission's case 1, whose rounds
    last several times a quarter-second and whose window fills much of one: lab log)."""
    return min(ROUND_MAX_S, max(rows.ROUND_S, round_s - window_s))
