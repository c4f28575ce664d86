"""`nvgg tune`'s sweep, case by case, of a target's space: a submission's declared TUNE
(backends/submission.py: the file's CONFIG set to the point before each row, in the worker that
runs the file) or our persistent kernel's knobs (nvgg/space.py: the family's own refusals listed,
never run). Every point is a row of its own, checked against the reference and timed as `run`
times (without the energy a call: half a second a point); then the finalists (the fastest point,
the default, and up to FINALISTS - 2 more whose first times the gate cannot tell from the
fastest) are measured again in interleaved rounds (ab.py) before anything is called a winner.
Per case: the winner, the points not told apart from it, where the default stands and what the
winner gains over it.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable

from . import ab, gate, procs, rows
from .cases import Case
from .errors import NvggError
from .result import Result, Row, point_name as name_of

FINALISTS = 4      # points measured again in interleaved rounds, a case
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

    def space(self, pool: procs.Pool) -> dict[str, list]:
        from .backends import submission as sub
        try:
            return pool.call(f"submission:{self.version.path}", sub.declared_space, path=self.version.path)
        except (procs.ChildFailure, procs.ChildError) as exc:
            raise NvggError(f"submission {self.name}: reading its TUNE failed: {exc}") from None

    def points(self, case: Case, space: dict) -> tuple[list[tuple], tuple, dict]:
        every = points_of(space)
        return every, every[0], {}

    def row(self, case: Case, point: tuple) -> Row:
        v = self.version
        return Row(case, submission=v.path, source=v.name, revision=v.revision, point=point, energy=False)


class KernelTarget:
    """Our persistent kernel's space on `arch` (nvgg/space.py): the family's knobs, its refusals
    by case, its own choice the default."""

    def __init__(self, arch: str, sms: int | None, device: str | None = None):
        from .backends import cute
        self.family, self.arch, self.sms, self.device = cute.family(arch), arch, sms, device
        self.name, self.revision = "persistent/cute", ""

    def space(self, pool: procs.Pool) -> dict[str, list]:
        return {k.name: list(k.values) for k in self.family.knobs()}

    def points(self, case: Case, space: dict) -> tuple[list[tuple], tuple, dict]:
        from . import space as spacemod
        found = spacemod.points(self.family, case, self.sms)
        default = next(p.knobs for p in found if p.default)
        return ([p.knobs for p in found if not p.refused], default,
                {p.knobs: p.refused for p in found if p.refused})

    def row(self, case: Case, point: tuple) -> Row:
        return Row(case, "persistent", "cute", point=point, device=self.device, energy=False)


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
        if mine is None or theirs is None:
            return None
        # both against the same base: their quotient, its interval from the two (wider, not exact)
        return ab.Ratio(mine.ratio / theirs.ratio, mine.lo / theirs.hi, mine.hi / theirs.lo, min(mine.n, theirs.n))

    def gain(self) -> ab.Ratio | None:
        """The default's time over the winner's (1.05: the winner is 5% faster)."""
        return self.against_winner(self.default)


def finalists(ct: CaseTune) -> list[tuple]:
    """The fastest point first, then the default, then the next fastest the gate cannot tell from
    the fastest (its 'same' against it), up to FINALISTS."""
    good = ct.good()
    if not good:
        return []
    best = good[0]
    picked = [best] + ([ct.default] if ct.default in good and ct.default != best else [])
    for p in good[1:]:
        if len(picked) >= FINALISTS:
            break
        if p not in picked and gate.compare(ct.first[p].to_dict(), ct.first[best].to_dict(), SAME_PCT).kind == "same":
            picked.append(p)
    return picked


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
            ct.final_points = [tuple(f["point"].items()) for f in case["finalists"]]
            if ct.final_points:
                ct.final = ab.CaseAB(ct.case, [name_of(p) for p in ct.final_points],
                                     [[Result.from_dict(r) for r in f["rounds"]] for f in case["finalists"]],
                                     "as measured before the sweep was resumed")
        out[ct.case] = ct
    return out


def sweep(cases: list[Case], target, *, budget_s: float, floor: float, rounds: int, timeout_s: float | None = None,
          resume: dict | None = None, on_space: Callable[[dict], None] | None = None,
          on_point: Callable[[CaseTune, Result], None] | None = None,
          on_case: Callable[[CaseTune], None] | None = None) -> list[CaseTune]:
    """The target's space (`on_space(space)` then), and every case's points (first pass), then its
    finalists in rounds; the budget covers both, shared evenly by the cases left. `target` a
    SubmissionTarget or a KernelTarget; `resume` an earlier sweep's JSON of the same target and
    space: its finished cases kept whole, its measured points not run again. NvggError where the
    target has no space to sweep, or the sweep to resume swept another (before any row)."""
    out: list[CaseTune] = []
    budget_left = budget_s
    with procs.Pool(timeout_s, preload=("nvgg.datapath",)) as pool:
        space = target.space(pool)
        if resume is not None and (resume.get("space") != space or resume.get("target") != target.name):
            raise NvggError(f"the sweep to resume was of {resume.get('target')} over {resume.get('space')}, not "
                            f"{target.name} over {space}: start a new sweep")
        kept = kept_cases(resume) if resume is not None else {}
        if on_space:
            on_space(space)
        for i, case in enumerate(cases):
            started = time.monotonic()
            share = budget_left / (len(cases) - i)
            before = kept.get(case.id)
            if before is not None and before.winner is not None:
                out.append(before)
                if on_case:
                    on_case(before)
                continue
            every, default, refused = target.points(case, space)
            ct = CaseTune(case.id, every, default, refused=refused)
            for point in every:
                if before is not None and point in before.first:
                    ct.first[point] = before.first[point]
                    continue
                if ct.first and time.monotonic() - started > share * 0.7:  # keep some for the rounds
                    ct.stopped = f"budget spent after {len(ct.first)} of {len(every)} points"
                    break
                res = rows.run_in(pool, target.row(case, point))
                ct.first[point] = res
                if on_point:
                    on_point(ct, res)
            _final_rounds(ct, case, target, floor, rounds, max(1.0, share - (time.monotonic() - started)), timeout_s,
                          pool)
            budget_left = max(0.0, budget_left - (time.monotonic() - started))
            out.append(ct)
            if on_case:
                on_case(ct)
    return out


def _final_rounds(ct: CaseTune, case: Case, target, floor: float, rounds: int, budget_s: float,
                  timeout_s: float | None, pool: procs.Pool) -> None:
    picked = finalists(ct)
    if not picked:
        ct.stopped = ct.stopped or "no point ran right"
        return
    ct.winner = picked[0]
    if len(picked) == 1:
        return
    ct.final_points = picked
    (ct.final,) = ab.run([[target.row(case, p) for p in picked]], floor=floor, max_rounds=rounds, budget_s=budget_s,
                         timeout_s=timeout_s, pool=pool)
    ratios = ct.final.ratios()
    faster = [(r.ratio, p) for p, r in zip(picked, ratios) if r is not None and r.classify(floor) == "faster"]
    if faster:  # the rounds overturn the first pass: the fastest of those decidedly faster wins
        ct.winner = min(faster)[1]
    for p in picked:
        r = ct.against_winner(p)
        if p != ct.winner and r is not None and r.classify(floor) in ("same", "unsure"):
            ct.not_apart.append(p)
    if ct.final.failed() is not None:
        ct.stopped = ct.stopped or f"the rounds stopped: {ct.final.stopped}"
