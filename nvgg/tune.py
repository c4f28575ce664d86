"""`nvgg tune`'s sweep, case by case, of a target's space: a submission's declared TUNE
(backends/submission.py: the file's CONFIG set to the point before each row, in the worker that
runs the file) or our persistent kernel's knobs (nvgg/space.py: the family's own refusals listed,
never run). Every point is a row of its own, checked against the reference and timed as `run`
times but for the energy a call and the half-second span of `± rerun` (about a second a point
between them: a first pass only picks the finalists); then the finalists (the fastest point,
the default, and up to FINALISTS - 2 more whose first times the gate cannot tell from the
fastest) are measured again in interleaved rounds (ab.py) before anything is called a winner.
Per case: the winner, the points not told apart from it, where the default stands and what the
winner gains over it.
"""

from __future__ import annotations

import functools
import itertools
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from . import ab, gate, procs, rows, versions
from .cases import Case
from .errors import NvggError
from .result import Result, Row, point_name as name_of

FINALISTS = 4      # points measured again in interleaved rounds, a case
# a point of our kernel, built before its row, that takes HANG_FACTOR times the case's median row
# (HANG_FLOOR_S at least) is a hang: its row is stopped there, not at the rows' usual limit (one
# build deadlocked on case 4 every time it ran: NOTES.md, Sweeps)
HANG_FACTOR, HANG_FLOOR_S = 20.0, 10.0
SAME_PCT = 5.0     # the gate's allowed change when picking finalists from the first pass


def points_of(space: dict[str, list]) -> list[tuple]:
    """Every combination of the knobs' values, as ((knob, value), ...), the default (each knob's
    first value) first."""
    names = list(space)
    return [tuple(zip(names, values)) for values in itertools.product(*(space[n] for n in names))]


class SubmissionTarget:
    """A submission's space: its TUNE, read in the worker that runs its rows; every point on every
    case, each knob's first value the default."""

    def __init__(self, version):
        self.version, self.name, self.revision, self.arch = version, version.name, version.revision, ""

    def space(self, pool: procs.BasePool) -> dict[str, list]:
        from .backends import submission as sub
        try:
            return pool.call(f"submission:{self.version.path}", sub.declared_space, path=self.version.path)
        except (procs.ChildFailure, procs.ChildError) as exc:
            raise NvggError(f"submission {self.name}: reading its TUNE failed: {exc}") from None

    def points(self, case: Case, space: dict) -> tuple[list[tuple], tuple, dict]:
        every = points_of(space)
        return every, every[0], {}

    def build_all(self, cases: list[Case], space: dict) -> None:
        """Before the first pass: nothing (the file builds what it builds inside its calls)."""

    def prepare(self, pool: procs.BasePool, case: Case, point: tuple, walls: list[float]) -> float | None:
        """Before a point's row: nothing (the file builds what it builds inside its calls, so no
        row time tells a hang from a build); the row keeps the pool's time limit."""
        return None

    def row(self, case: Case, point: tuple) -> Row:
        v = self.version
        return versions.row(case, self.version, point=point, energy=False, span=False)


class KernelTarget:
    """Our persistent kernel's space on `arch` (nvgg/space.py): the family's knobs, its refusals
    by case, its own choice the default."""

    def __init__(self, arch: str, sms: int | None, device: str | None = None):
        from .backends import cute
        self.family, self.arch, self.sms, self.device = cute.family(arch), arch, sms, device
        self.name, self.revision = "persistent/cute", ""

    def space(self, pool: procs.BasePool) -> dict[str, list]:
        return {k.name: list(k.values) for k in self.family.knobs()}

    def points(self, case: Case, space: dict) -> tuple[list[tuple], tuple, dict]:
        from . import space as spacemod
        found = spacemod.points(self.family, case, self.sms)
        default = next(p.knobs for p in found if p.default)
        # the default first: where it stands is known even when the budget cuts the first pass
        return ([default] + [p.knobs for p in found if not p.refused and p.knobs != default], default,
                {p.knobs: p.refused for p in found if p.refused})

    def build_all(self, cases: list[Case], space: dict) -> None:
        """Before the first pass: every case's accepted points built on the CPU cores at once
        (space.compile_all; a warm cache answers at once), so no row waits for a compile."""
        from . import space as spacemod
        spacemod.compile_all(self.family, cases, self.arch, self.sms, jobs=spacemod.default_jobs())

    def prepare(self, pool: procs.BasePool, case: Case, point: tuple, walls: list[float]) -> float | None:
        """Build the point in its row's worker (a compile's time is never taken for a hang), then
        the row's time limit: HANG_FACTOR x the median of the case's rows so far (`walls`, once
        there are 3), None (the pool's) before."""
        from . import space as spacemod
        try:
            pool.call(self.row(case, point).key, spacemod.build, arch=self.arch, case=case, point=dict(point),
                      sms=self.sms)
        except (procs.ChildFailure, procs.ChildError, NvggError):
            return None  # the row fails the same way and says why
        if len(walls) < 3:
            return None
        return max(HANG_FLOOR_S, HANG_FACTOR * statistics.median(walls))

    def row(self, case: Case, point: tuple) -> Row:
        return versions.row(case, strategy="persistent", backend="cute", point=point, device=self.device, energy=False,
                            span=False)


@dataclass
class CaseTune:
    """One case's sweep: the first pass over every point, the finalists' rounds, the answer."""

    case: str
    points: list[tuple]
    default: tuple
    first: dict[tuple, Result] = field(default_factory=dict)   # point -> its first-pass result
    final: ab.CaseAB | None = None                              # the finalists' rounds (the first the base)
    final_points: list[tuple] = field(default_factory=list)
    winner: tuple | None = None
    not_apart: list[tuple] = field(default_factory=list)        # finalists the rounds cannot tell from the winner
    stopped: str = ""
    refused: dict[tuple, str] = field(default_factory=dict)     # point -> the kernel family's reason (never run)
    out: dict[tuple, str] = field(default_factory=dict)         # finalist -> why its rounds put it out (never the winner)
    out_results: dict[tuple, Result] = field(default_factory=dict)  # finalist -> the result that put it out

    def good(self) -> list[tuple]:
        """Points measured right, fastest first."""
        ok = [p for p, r in self.first.items() if r.status == "ok" and r.stats is not None and not r.suspect]
        return sorted(ok, key=lambda p: self.first[p].time_us)

    def against_winner(self, point: tuple) -> ab.Ratio | None:
        """A finalist's time over the winner's, from the rounds (None for the winner, or outside them)."""
        if self.final is None or point not in self.final_points or point == self.winner:
            return None
        ratios = self.final.ratios()
        base = self.final_points[0]
        mine = ratios[self.final_points.index(point)]
        if self.winner == base:
            return mine
        theirs = ratios[self.final_points.index(self.winner)]
        if theirs is None:
            return None
        if point == base:  # the base over the winner: the winner's ratio turned over
            return ab.Ratio(1 / theirs.ratio, 1 / theirs.hi, 1 / theirs.lo, theirs.n, theirs.df, theirs.level)
        if mine is None:
            return None
        # both against the same base: their quotient, its interval from the two (it holds where both
        # do: its level the two misses added)
        return ab.Ratio(mine.ratio / theirs.ratio, mine.lo / theirs.hi, mine.hi / theirs.lo, min(mine.n, theirs.n),
                        min(mine.dof, theirs.dof), mine.level + theirs.level - 1)

    def gain(self) -> ab.Ratio | None:
        """The default's time over the winner's (1.05: the winner is 5% faster)."""
        return self.against_winner(self.default)


def finalists(ct: CaseTune, most: int = FINALISTS, without: set | dict = frozenset()) -> list[tuple]:
    """The fastest point first, then the default, then the next fastest the gate cannot tell from
    the fastest (its 'same' against it), up to `most` (--finalists). A first pass spread over
    several GPUs ranks points timed on different cards, and a card a little faster lifts all of its
    points: so each card's own fastest point (if 'same') goes before the rest, and the rounds, on
    one card, decide between them. `without`: points out of the rounds already (picked as if never
    measured, so the next fastest sets the band)."""
    good = [p for p in ct.good() if p not in without]
    if not good:
        return []
    best = good[0]
    picked = [best] + ([ct.default] if ct.default in good and ct.default != best else [])
    by_card: dict[str, tuple] = {}
    for p in good:  # fastest first: the first point seen of a card is its fastest
        by_card.setdefault(card_of(ct.first[p]), p)
    for p in [*by_card.values(), *good[1:]]:
        if len(picked) >= most:
            break
        if p not in picked and gate.compare(ct.first[p].to_dict(), ct.first[best].to_dict(), SAME_PCT).kind == "same":
            picked.append(p)
    return picked


def card_of(result: Result) -> str:
    """Which card measured a result: its UUID (the host's index, or its device, where NVML gave none)."""
    env = result.env or {}
    return str(env.get("gpu_uuid") or env.get("gpu_index") or env.get("device") or "")


def kept_cases(doc: dict) -> dict[str, CaseTune]:
    """What a sweep's JSON (report.tune_document) holds, to resume from: a case with a winner (or
    none possible) whole, a case cut short its first-pass points."""
    from .result import Result
    out = {}
    for case in doc.get("cases", []):
        points = [tuple(p["point"].items()) for p in case["points"]]
        ct = CaseTune(case["case"], points, tuple(case["default"].items()),
                      {tuple(p["point"].items()): Result.from_dict(p) for p in case["points"]},
                      refused={tuple(r["point"].items()): r["reason"] for r in case.get("refused", [])})
        if case["winner"] is not None:
            ct.winner, ct.stopped = tuple(case["winner"].items()), case["stopped"]
            ct.not_apart = [tuple(p.items()) for p in case["not_apart"]]
            ct.out = {tuple(o["point"].items()): o["reason"] for o in case.get("out", [])}
            ct.final_points = [tuple(f["point"].items()) for f in case["finalists"]]
            if ct.final_points:
                ct.final = ab.CaseAB.kept(ct.case, [name_of(p) for p in ct.final_points],
                                          [[Result.from_dict(r) for r in f["rounds"]] for f in case["finalists"]],
                                          "as measured before the sweep was resumed", case.get("rule", {}))
        out[ct.case] = ct
    return out


FIRST_SHARE = 0.7  # of a case's share of the budget, what its first pass may take (the rest: its rounds)


def sweep(cases: list[Case], target, *, budget_s: float, floor: float, rounds: int, timeout_s: float | None = None,
          resume: dict | None = None, on_space: Callable[[dict], None] | None = None,
          on_point: Callable[[CaseTune, Result], None] | None = None,
          on_case: Callable[[CaseTune], None] | None = None, gpus: list[int] | None = None,
          ray_gpus: int = 0, most: int = FINALISTS) -> list[CaseTune]:
    """The target's space (`on_space(space)` then), and every case's points (first pass), then its
    finalists in rounds. The budget is shared by the cases in order: case i's first pass stops at
    (i + FIRST_SHARE) / n of it, its rounds get what is left of its share. `gpus` (--gpus, checked):
    a pool of workers on each; a free GPU takes the next case whose points are all in for its
    rounds (all of them on that GPU), else the next point, so one case's rounds overlap the next
    case's points. `target` a SubmissionTarget or a KernelTarget; `resume` an earlier sweep's JSON
    of the same target and space: its finished cases kept whole, its measured points not run
    again. The callbacks run one at a time. NvggError where the target has no space to sweep, or
    the sweep to resume swept another (before any row). `ray_gpus` (--ray, connected: cluster.py):
    that many GPUs of the Ray cluster, an actor each, in place of this host's. `most`: the
    finalists a case (--finalists)."""
    with rows.pools(gpus, timeout_s, ray_gpus=ray_gpus) as pools:
        space = target.space(pools[0])
        if resume is not None and (resume.get("space") != space or resume.get("target") != target.name):
            raise NvggError(f"the sweep to resume was of {resume.get('target')} over {resume.get('space')}, not "
                            f"{target.name} over {space}: start a new sweep")
        if on_space:
            on_space(space)
        target.build_all(cases, space)
        plan = _Plan(cases, target, space, kept_cases(resume) if resume is not None else {}, budget_s, on_point,
                     on_case, _Rounds(floor, rounds, timeout_s, most))
        serve = [functools.partial(plan.serve, pool) for pool in pools]
        if len(pools) == 1:
            serve[0](threading.Event())
        else:
            procs.side_by_side(serve, "nvgg-tune-gpu")
    return [plan.tunes[c.id] for c in cases if c.id in plan.tunes]


class _Plan:
    """What is left of a sweep, shared by the GPUs' threads (one lock): each case's points not yet
    handed out, how many are being measured, whether its rounds began and ended."""

    def __init__(self, cases, target, space, kept, budget_s, on_point, on_case, rounds: "_Rounds"):
        self.cases, self.target, self.budget_s, self.rounds = cases, target, budget_s, rounds
        self.on_point, self.on_case = on_point, on_case
        self.started = time.monotonic()
        self.cond = threading.Condition()
        self.tunes: dict[str, CaseTune] = {}
        self.pending: dict[str, list[tuple]] = {}
        self.busy: dict[str, int] = {}
        self.state: dict[str, str] = {}  # "points", "rounds", "done"
        self.failed = False  # a GPU's loop raised: the others end at their next task
        for case in cases:
            before = kept.get(case.id)
            if before is not None and before.winner is not None:  # finished before: kept whole
                self.tunes[case.id], self.state[case.id] = before, "done"
                if on_case:
                    on_case(before)
                continue
            every, default, refused = target.points(case, space)
            ct = self.tunes[case.id] = CaseTune(case.id, every, default, refused=refused)
            if before is not None:
                ct.first.update({p: r for p, r in before.first.items() if p in every})
            self.pending[case.id] = [p for p in every if p not in ct.first]
            self.busy[case.id], self.state[case.id] = 0, "points"

    def _slot_end(self, i: int, share: float) -> float:
        return self.started + self.budget_s * (i + share) / len(self.cases)

    def _next(self):
        """The next task, ("rounds", i) or ("point", i, point), None when all is done; waits while
        nothing can start yet (the last points of a case being measured elsewhere)."""
        while not self.failed:
            waiting = False
            for i, case in enumerate(self.cases):
                cid = case.id
                if self.state[cid] != "points":
                    waiting = waiting or self.state[cid] == "rounds"
                    continue
                ct, pending = self.tunes[cid], self.pending[cid]
                if pending and ct.first and time.monotonic() > self._slot_end(i, FIRST_SHARE):
                    ct.stopped = f"budget spent after {len(ct.first) + self.busy[cid]} of {len(ct.points)} points"
                    pending.clear()
                if not pending and not self.busy[cid]:
                    self.state[cid] = "rounds"
                    return ("rounds", i)
                if pending:
                    self.busy[cid] += 1
                    return ("point", i, pending.pop(0))
                waiting = True
            if not waiting:
                return None
            self.cond.wait(0.5)
        return None

    def serve(self, pool: procs.BasePool, stop: threading.Event) -> None:
        """One GPU's loop: tasks until none is left (or another GPU's loop raised: procs.side_by_side
        raises it)."""
        try:
            while True:
                with self.cond:
                    task = self._next()
                if task is None or stop.is_set():
                    return
                case = self.cases[task[1]]
                ct = self.tunes[case.id]
                if task[0] == "point":
                    with self.cond:
                        walls = [r.wall_s for r in ct.first.values() if r.status == "ok"]
                    limit = self.target.prepare(pool, case, task[2], walls)
                    res = rows.run_in(pool, self.target.row(case, task[2]), limit_s=limit)
                    with self.cond:
                        ct.first[task[2]] = res
                        self.busy[case.id] -= 1
                        if self.on_point:
                            self.on_point(ct, res)
                        self.cond.notify_all()
                else:
                    budget = max(1.0, self._slot_end(task[1], 1.0) - time.monotonic())
                    settle = _final_rounds(ct, case, self.target, self.rounds, budget, pool)
                    with self.cond:
                        settle()
                        self.state[case.id] = "done"
                        if self.on_case:
                            self.on_case(ct)
                        self.cond.notify_all()
        except BaseException:
            with self.cond:  # the other GPUs' loops waiting for a task end now
                self.failed = True
                self.cond.notify_all()
            raise


@dataclass(frozen=True)
class _Rounds:
    """How a sweep measures its finalists again: the floor that tells them apart (a fraction), the
    most rounds, a row's time limit, the most finalists a case."""

    floor: float
    most_rounds: int
    timeout_s: float | None
    finalists: int


def _final_rounds(ct: CaseTune, case: Case, target, how: _Rounds, budget_s: float,
                  pool: procs.BasePool) -> Callable[[], None]:
    """The finalists' rounds; what they decide comes back as a change to make to `ct` (under the
    sweep's lock: a file written meanwhile, of another case's point, shows this case unfinished).
    A finalist whose first run or any round failed or was suspect (ab.CaseAB.failed: wrong, an error,
    a time that cannot be the work's) is out, with its reason, and the rounds begin again on what is
    left of the budget among the finalists picked as if it had never run: the winner is a point every one of whose runs was good, and a
    case whose finalists all went out has none."""
    floor = how.floor
    out: dict[tuple, tuple[str, Result]] = {}
    left = finalists(ct, how.finalists)
    final = None
    deadline = time.monotonic() + budget_s
    while len(left) > 1:
        (final,) = ab.run([[target.row(case, p) for p in left]], floor=floor, max_rounds=how.most_rounds,
                          budget_s=max(1.0, deadline - time.monotonic()), timeout_s=how.timeout_s, pool=pool)
        bad = _put_out(final, left)
        if not bad:
            break
        out.update(bad)
        left, final = finalists(ct, how.finalists, without=out), None

    def settle() -> None:
        ct.out = {p: why for p, (why, _) in out.items()}
        ct.out_results = {p: r for p, (_, r) in out.items()}
        if not left:
            ct.stopped = ct.stopped or ("every finalist went out in the rounds" if out else "no point ran right")
            return
        ct.winner = left[0]
        if final is None:
            return
        ct.final_points, ct.final = left, final
        ratios = final.ratios()
        # the rounds, interleaved on one card, outrank the first pass: the finalist fastest in them
        # wins (decidedly or not; those the rounds cannot tell from it are named with it), so no
        # finalist reads below 1.000x the winner
        timed = [(r.ratio, p) for p, r in zip(left, ratios) if r is not None]
        if timed and min(timed)[0] < 1.0:
            ct.winner = min(timed)[1]
        for p in left:
            r = ct.against_winner(p)
            if p != ct.winner and r is not None and r.classify(floor) in ("same", "unsure"):
                ct.not_apart.append(p)
    return settle


def _put_out(final: ab.CaseAB, points: list[tuple]) -> dict[tuple, tuple[str, Result]]:
    """The finalists whose first run or a round failed or was suspect: point -> (why, the result)."""
    bad = {}
    for v, p in enumerate(points):
        first = final.first[v] if v < len(final.first) else None
        runs = [("its first run", first)] if first is not None else []
        runs += [(f"round {k + 1}", r) for k, r in enumerate(final.results[v])]
        for where, r in runs:
            if r.status != "ok" or r.suspect:
                what = r.status if r.status != "ok" else "suspect: " + ", ".join(f.kind for f in r.flags)
                bad[p] = (f"out in {where} of the finalists' rounds: {what}" + (f" ({r.message})" if r.message else ""), r)
                break
    return bad
