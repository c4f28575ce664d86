"""Scheduling rows: which rows a command runs, each checked before it starts, each in its worker
(procs.Pool: one a backend, one a submission file; a pool on each GPU asked for, or a Ray
cluster's: `pools`), each result handed back as it finishes (the command's files rewritten then:
nvgg/output/live.py).

A row that fails in any way (unsupported, wrong, raised, crashed, timed out) is a row with its
reason, never the end of the run. The worker runs the one data path (`datapath.run_row`); the
parent only schedules, enforces timeouts and hands results back.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

import torch

from . import datapath, prebuild, procs, versions
from .cases import Case
from .errors import NvggError
from .result import Result, Row
from .selection import default_device, select


def rows_of(cases: list[Case], strategy_names: list[str], backend_names: list[str], *,
            submissions: list = (), tensormaps: list[str] | None = None, points=None,
            **common) -> list[Row]:
    """cases x strategies x backends (the persistent strategy once per tensor-map mode listed,
    None: once in the default mode), then each submission (versions.Version), case by case;
    `points` a config map's points (commands.common.Points): a submission's CONFIG, or our
    persistent cute kernel's build."""
    rows = []
    for case in cases:
        rows += [versions.row(case, strategy=s, backend=b, tensormaps=m,
                              point=points.ours(case.id, s, b) if points else (), **common)
                 for b in backend_names for s in strategy_names
                 for m in (tensormaps if tensormaps and s == "persistent" else [None])]
        point = points.submission(case.id) if points else ()
        rows += [versions.row(case, v, point=point, **common) for v in submissions]
    return rows


def precheck(row: Row) -> None:
    """What `datapath.setup` checks first, in the calling process: an unsupported row (or one whose
    inputs cannot fit) is answered without starting a worker. NvggError if unsupported."""
    device = torch.device(row.device) if row.device else default_device()
    if not row.submission:
        select(row.case, row.strategy, row.backend, row.tensormaps, device, dict(row.point))
    datapath.check_memory(row.case, device, datapath.batch_size(device, row.batch), row.l2)


def run_in(pool: procs.BasePool, row: Row, rounds: bool = False, limit_s: float | None = None) -> Result:
    """The row's Result from the pool's worker for it (`rounds`: one round of an A/B, the worker
    keeping the row's session for the next, datapath.run_round; `limit_s`: its time limit where
    not the pool's); a hang or a crash becomes the row's failed Result with its reason."""
    t0 = time.perf_counter()

    def call():
        precheck(row)
        return pool.call(row.key, datapath.run_round if rounds else datapath.run_row, limit_s=limit_s, row=row)
    result = _answered(row, call)
    result.wall_s = time.perf_counter() - t0
    return result


def _answered(row: Row, call: Callable[[], Result | None]) -> Result | None:
    """`call()`'s answer for `row`, a hang, a crash or a refusal made the row's failed Result."""
    try:
        return call()
    except (procs.ChildFailure, procs.ChildError) as exc:
        return row.failed("error", str(exc))
    except NvggError as exc:
        return row.failed("error" if row.submission else "unsupported", str(exc))


# An A/B's round (ab.py): the versions' timed windows take turns, each one repetition, for ROUND_S
# or longer (ab.round_window_s; at least MIN_WINDOWS a version, at most MAX_WINDOWS), so a level
# the host or the card sits at lands on every version alike. Rounds of one leaderboard measurement
# a version, one after the other with each version's check between them, paired a host-bound row's
# windows too far apart for its level to carry (benchmarks/host_spread.py --modes: lab log).
ROUND_S = 0.25
MIN_WINDOWS = 3
MAX_WINDOWS = 50


def round_in(pool, rows: list[Row], core: int | None = None, window_s: float = ROUND_S) -> list[Result]:
    """One round of an A/B for each row (its session kept by its first `run_in(..., rounds=True)`),
    in the order given: each begins (new values, its worker's thread on `core`), their windows
    alternate (A B B A A B ...) for about `window_s`, then each ends (what the timed calls returned checked): a Result
    a row, a failed one where a call raised, hung or crashed."""
    out: dict[int, Result] = {}
    t0 = time.perf_counter()

    def ask(i: int, fn, **kwargs):  # (each row was prechecked for its first run: not again between windows)
        return _answered(rows[i], lambda: pool.call(rows[i].key, fn, row=rows[i], **kwargs))

    live = []
    for i in range(len(rows)):
        failed = ask(i, datapath.round_begin, core=core)
        if failed is not None:
            out[i] = failed
        else:
            live.append(i)
    started, k = time.perf_counter(), 0
    while live and k < MAX_WINDOWS and (k < MIN_WINDOWS or time.perf_counter() - started < window_s):
        for i in (live if k % 2 == 0 else live[::-1]):
            failed = ask(i, datapath.round_window, reps=1)
            if failed is not None:
                out[i] = failed
        live = [i for i in live if i not in out]
        k += 1
    for i in live:
        out[i] = ask(i, datapath.round_end)
    wall = time.perf_counter() - t0
    for r in out.values():
        if not r.wall_s:
            r.wall_s = wall
    return [out[i] for i in range(len(rows))]


def run_many(rows: list[Row], *, timeout_s: float | None = None, on_result: Callable[[Result], None] | None = None,
             on_start: Callable[[Row], None] | None = None, strict: bool = False,
             gpus: list[int] | None = None, on_note: Callable[[str], None] | None = None) -> list[Result]:
    """Every row, each in its worker, in order; `on_start(row)` as each begins and
    `on_result(result)` as it finishes. `strict`: an unsupported row is an NvggError before any
    row starts (one row asked for by name), instead of a row of its own. `gpus` (--gpus, checked by
    commands.common.parse_gpus): a pool of workers on each, the rows taken in order by whichever
    is free (`spread`); the results still in the rows' order. The kernels the rows lack are built
    first, side by side (prebuild.ahead; `on_note(sentence)` says so)."""
    if strict:
        for row in rows:
            precheck(row)
    prebuild.ahead(rows, timeout_s=timeout_s, on_note=on_note)
    return spread(rows, gpus, lambda pool, row: run_in(pool, row), timeout_s=timeout_s, on_start=on_start,
                  on_result=on_result)


@contextlib.contextmanager
def pools(gpus: list[int] | None = None, timeout_s: float | None = None, *,
          ray_gpus: int = 0) -> Iterator[list[procs.BasePool]]:
    """The pools a command's rows run in, all closed at the end: one on each GPU of `gpus` (--gpus,
    checked by commands.common.parse_gpus), one on whatever this process sees where None; or one on
    each of `ray_gpus` GPUs of the Ray cluster this process joined (cluster.connect), in their
    place."""
    with contextlib.ExitStack() as stack:
        if ray_gpus:
            from . import cluster
            made = [stack.enter_context(p) for p in cluster.pools(ray_gpus, timeout_s)]
        else:
            made = [stack.enter_context(procs.Pool(timeout_s, gpu=g, preload=datapath.WORKER_PRELOAD))
                    for g in gpus or [None]]
        yield made


def spread(items: list, gpus: list[int] | None, run: Callable[[procs.BasePool, object], object], *,
           timeout_s: float | None = None, on_start: Callable | None = None,
           on_result: Callable[[object], None] | None = None) -> list:
    """`run(pool, item)` for every item (a row, a case a command profiles), over the pools of
    `gpus` (`pools`; None: one pool, the items in order in the calling thread): a thread a GPU takes
    the next item whenever its last is done. The callbacks run one at a time (under a lock),
    `on_result` in the order items finish; the values come back in the items' order. An exception
    in a thread (not a row's failure: those are results) ends the spread and is raised here once
    the other threads' items are done."""
    with pools(gpus, timeout_s) as made:
        return procs.take_turns(items, len(made), lambda server, item: run(made[server], item), "nvgg-gpu",
                                on_start=on_start, on_result=on_result)
