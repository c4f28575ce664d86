"""Static tile schedules for the persistent kernels of both architectures, made on the host.

A schedule is (runs, order): CTA (or CTA pair) c runs tiles order[runs[c]:runs[c + 1]], in that
order; the kernels read both from device memory, so none searches for its work. Costs are each
tile's relative time in kernel order. Two makers:

- `schedule` (sm_90a): deals tiles out by cost class (at most a few classes: wide, full, half tiles),
  so that cheaper tiles can shorten the longest CTA.
- `contiguous` (sm_100a): splits the tiles, in kernel order, into one contiguous run per CTA with
  the smallest longest run, then as even as that limit allows; a run of consecutive tiles stays in
  one group for long, so a CTA needs few groups' tensor maps (any number of cost classes).
- `split_k` (sm_90a, split build): cuts the tiles' k stages, in kernel order, into one contiguous
  run per CTA of even work, so that a tile may be shared by CTAs (`Piece`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import product


def schedule(costs: list[float], ctas: int) -> tuple[list[int], list[int]]:
    """Each CTA's list of tiles, as (runs, order): CTA c takes tiles order[runs[c]:runs[c + 1]].

    Tiles are dealt out by cost class (wide, full, half), each class in kernel order: CTA c takes
    the next few of each class, choosing the counts that fill a cost limit L best (ties: more of
    the costlier tiles); L is the smallest sum of tile costs that places every tile on at most
    `ctas` CTAs that way. With full tiles alone this is the even split into runs of ceil(tiles / ctas).
    Mixing the classes is what lets cheaper tiles shorten the longest CTA: contiguous runs in
    kernel order could not pair them (case 1: a limit of 3 full tiles either way, 2.75 mixed), and
    filling each CTA to the limit, not class by class, is what packs wide tiles (case 2 with wide
    tiles: 4.39 against 4.74 at the measured costs). Meant for a few classes: the fill tries every
    count of each class."""
    classes = sorted({c for c in costs}, reverse=True)
    queues = [[t for t, c in enumerate(costs) if c == cost] for cost in classes]

    def fill(limit: float, left: list[int]) -> tuple[int, ...]:
        """How many of each class's next tiles to take: the most load within `limit`."""
        def load(counts):
            return sum(n * cost for n, cost in zip(counts, classes))
        choices = product(*(range(min(n, int(limit / cost + 1e-9)) + 1) for n, cost in zip(left, classes)))
        return max((c for c in choices if load(c) <= limit + 1e-9), key=lambda c: (round(load(c), 9),) + c)

    def deal(limit: float):
        lists, heads, fills = [], [0] * len(classes), {}
        caps = [int(limit / cost + 1e-9) for cost in classes]
        for _ in range(ctas):
            # only the counts the limit can use matter: most CTAs ask the same question
            left = tuple(min(len(q) - h, cap) for q, h, cap in zip(queues, heads, caps))
            if left not in fills:
                fills[left] = fill(limit, list(left))
            counts = fills[left]
            mine = []
            for i, n in enumerate(counts):
                mine += queues[i][heads[i]:heads[i] + n]
                heads[i] += n
            lists.append(mine)
        return lists if heads == [len(q) for q in queues] else None

    # the limit that matters is some CTA's load: try every sum of tile costs between the mean (no
    # CTA list can be shorter) and the even split by count (which always fits), smallest first.
    # (A bisection would not do: with mixed classes a deal may fail at a limit above one it meets.)
    lo, hi = sum(costs) / ctas - 1e-9, max(costs, default=0.0) * -(-len(costs) // ctas) + 1e-9
    sums = {0.0}
    for cost in classes:
        sums = {round(x + n * cost, 9) for x in sums for n in range(int((hi - x) / cost + 1e-9) + 1)}
    best = None
    for limit in sorted(x for x in sums if x >= lo):
        best = deal(limit + 1e-9)
        if best is not None:
            break
    if best is None:
        best = deal(hi)
    runs, order = [0], []
    for tiles in best:
        order += tiles
        runs.append(len(order))
    return runs, order


def contiguous(costs: list[float], ctas: int) -> tuple[list[int], list[int]]:
    """Tiles in kernel order split into `ctas` contiguous runs (empty ones only where tiles are
    fewer than CTAs): first the smallest limit L on a run's cost that `ctas` runs can meet, then,
    CTA by CTA, the run whose cost is nearest the remaining cost over the remaining CTAs among those
    within L that leave the rest feasible and at least a tile for every later CTA. With equal costs
    this is runs of floor and ceil of tiles / ctas, the longer ones spread out."""
    if ctas < 1:
        raise ValueError(f"a schedule needs at least one CTA, got {ctas}")
    n = len(costs)
    prefix = [0.0]
    for c in costs:
        if c <= 0:
            raise ValueError(f"tile costs must be positive, got {c}")
        prefix.append(prefix[-1] + c)
    eps = 1e-9 * max(1.0, prefix[-1])

    def reach(limit: float) -> list[int]:
        """For each start s, the furthest end e with cost(s:e) <= limit (two pointers)."""
        ends, e = [], 0
        for s in range(n):
            e = max(e, s + 1)
            while e < n and prefix[e + 1] - prefix[s] <= limit + eps:
                e += 1
            ends.append(e)
        return ends

    def runs_needed(limit: float) -> int:
        ends, s, count = reach(limit), 0, 0
        while s < n:
            s, count = ends[s], count + 1
        return count

    lo, hi = max(costs, default=0.0), prefix[-1]
    if n and runs_needed(lo) > ctas:
        for _ in range(100):  # bisection to float precision: feasibility is monotone in the limit
            mid = (lo + hi) / 2
            if runs_needed(mid) <= ctas:
                hi = mid
            else:
                lo = mid
            if hi - lo <= eps:
                break
        limit = hi
    else:
        limit = lo
    ends = reach(limit)
    need = [0] * (n + 1)  # fewest runs the tiles from s on need within the limit
    for s in range(n - 1, -1, -1):
        need[s] = 1 + need[ends[s]]
    runs, s = [0], 0
    for cta in range(ctas):
        left = ctas - cta
        if n - s < left:  # no more tiles than CTAs left: one each
            s = min(s + 1, n)
        else:
            # within the limit, leaving a feasible rest and a tile for each CTA after this one
            # (n - (left - 1) itself always qualifies: see the module tests)
            target = (prefix[n] - prefix[s]) / left
            last = min(ends[s], n - (left - 1))
            s = min((e for e in range(s + 1, last + 1) if need[e] <= left - 1),
                    key=lambda e: (abs(prefix[e] - prefix[s] - target), e))
        runs.append(s)
    return runs, list(range(n))


# a piece's part in its tile: the whole of it, one of the parts whose partial sum another CTA adds
# in (a writer), or the part that adds them in and stores the tile (the reader)
WHOLE, WRITER, READER = 0, 1, 2


@dataclass(frozen=True)
class Piece:
    """Stages kb .. ke - 1 of tile `tile`. A writer leaves its partial sum in slot `slot`, which
    its tile's reader (the same `slot`) adds in."""

    tile: int
    kb: int
    ke: int
    role: int = WHOLE
    slot: int = 0


def split_k(costs: list[float], stages: list[int], ctas: int, overhead: float = 0.0,
            least: int = 2) -> tuple[list[int], list[Piece]]:
    """Each CTA's list of pieces, as (runs, pieces): CTA c takes pieces[runs[c]:runs[c + 1]].

    Every tile's stages (stages[t] of them, each costing costs[t]) lie end to end, the costliest
    class of tiles first (kernel order within a class: mixing classes left CTAs short where a
    cheap tile's tail met a costly tile too large to cut), and CTA after CTA takes them up to a
    limit L on its work: a tile that does not fit is cut where
    the limit falls, into a head (its first stages, a writer piece, the CTA's last) and a tail (the
    next CTA's first piece, its reader), each at least `least` stages and the tail within the
    limit; otherwise the CTA ends before it. A tile is cut at most once (a tail that does not fit whole makes L too small), so
    each writer and reader (charged `overhead` more work: the partial sum written or read) has one
    partner. L is the smallest limit at which every stage finds a CTA (by bisection, then by a
    scan in steps of a quarter of the cheapest stage from the mean up). In each CTA's list its writer
    comes first, then its whole tiles, then its reader: a reader waits for its tile's writer, which
    waits for nothing, so no CTA waits for one that waits (the grid is resident at once)."""
    if ctas < 1:
        raise ValueError(f"a schedule needs at least one CTA, got {ctas}")
    if len(stages) != len(costs) or any(s < 1 for s in stages) or any(c <= 0 for c in costs):
        raise ValueError("every tile needs a positive cost and at least one stage")
    eps = 1e-9 * max(1.0, sum(c * s for c, s in zip(costs, stages)))

    walk = sorted(range(len(costs)), key=lambda t: -costs[t])  # by cost class, kernel order within

    def fill(limit: float):
        """The CTAs' lists of [tile, kb, ke] at this limit, or None where they need more CTAs."""
        lists, mine, load, i, kb = [], [], 0.0, 0, 0
        while i < len(walk):
            t = walk[i]
            rest = (stages[t] - kb) * costs[t] + (overhead if kb else 0.0)
            if load + rest <= limit + eps:
                mine.append([t, kb, stages[t]])
                load, i, kb = load + rest, i + 1, 0
                continue
            if kb:  # a tail that does not fit whole would cut its tile twice
                return None
            # the head that fills this CTA, leaving a tail that the next one holds whole
            q = min(int((limit - load - overhead + eps) // costs[t]), stages[t] - least)
            if q >= max(least, stages[t] - int((limit - overhead + eps) // costs[t])):
                mine.append([t, 0, q])
                kb = q
            elif not mine:  # an empty CTA cannot take this tile's head either
                return None
            lists.append(mine)
            mine, load = [], 0.0
            if len(lists) >= ctas:
                return None
        lists.append(mine)
        return lists + [[] for _ in range(ctas - len(lists))]

    total = sum(c * s for c, s in zip(costs, stages))
    lo, hi = total / ctas, max(total, max(c * s for c, s in zip(costs, stages)))
    best = fill(hi)
    for _ in range(60):
        mid = (lo + hi) / 2
        got = fill(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
        if hi - lo <= eps:
            break
    # a limit fits or not by where its cuts fall, not monotonically: the first of a fine scan
    # from the mean up that fits may lie below the bisection's
    step, limit = min(costs) / 4, total / ctas
    while limit < hi - eps:
        got = fill(limit)
        if got is not None:
            best = got
            break
        limit += step
    made, slots = {}, 0
    cut = {}
    for mine in best:
        for p in mine:
            cut.setdefault(p[0], []).append(p)
    for t, ps in sorted(cut.items()):
        if len(ps) == 1:
            made[id(ps[0])] = Piece(t, ps[0][1], ps[0][2])
        else:
            head, tail = sorted(ps, key=lambda p: p[1])
            made[id(head)] = Piece(t, head[1], head[2], WRITER, slots)
            made[id(tail)] = Piece(t, tail[1], tail[2], READER, slots)
            slots += 1
    runs, pieces = [0], []
    for mine in best:
        pieces += sorted((made[id(p)] for p in mine), key=lambda p: (WRITER, WHOLE, READER).index(p.role))
        runs.append(len(pieces))
    return runs, pieces


def piece_loads(costs: list[float], runs: list[int], pieces: list[Piece], overhead: float = 0.0) -> list[float]:
    """The work of each CTA's list in a `split_k` schedule, in stages × tile costs, each writer and
    reader charged `overhead` more (its partial sum written or read)."""
    return [sum(costs[p.tile] * (p.ke - p.kb) + (overhead if p.role != WHOLE else 0.0)
                for p in pieces[a:b]) for a, b in zip(runs, runs[1:])]


def loads(costs: list[float], runs: list[int], order: list[int]) -> list[float]:
    """The cost of each CTA's list in a schedule."""
    return [sum(costs[t] for t in order[a:b]) for a, b in zip(runs, runs[1:])]


def makespan(costs: list[float], runs: list[int], order: list[int]) -> float:
    """The cost of the longest CTA's list in a schedule."""
    return max(loads(costs, runs, order), default=0.0)


def visits(groups_of: list[int], runs: list[int], order: list[int]) -> int:
    """The most groups any CTA's list moves through (a group counted again each time the list
    re-enters it): the tensor-map slots a CTA needs when it never rewrites a map in use."""
    most = 0
    for a, b in zip(runs, runs[1:]):
        seen, last = 0, None
        for t in order[a:b]:
            if groups_of[t] != last:
                seen, last = seen + 1, groups_of[t]
        most = max(most, seen)
    return most
