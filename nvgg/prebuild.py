"""Builds ahead of a run's rows: the kernels its rows will compile, compiled before the first row
starts, side by side in processes of their own, so that each row's worker reads them from the disk
cache (kernels/cache.py) instead of compiling them one after another. On a bare machine a row's
worker built every kernel of the run in turn (NOTES.md: `compare strategies --case all`).

A row compiles what its setup asks of its backend (`compile`, datapath.setup); a per-group
strategy's kernels are asked a group at a time here, so a case of eight groups is eight builds side
by side. Only what the cache lacks is built (`kernels.cache.cached_only` finds it), and only where
two or more builds are missing: one alone the rows' worker, started ahead, builds as soon. No row
is timed while they build, and the build processes are gone before the first row starts. Best
effort: a build that fails here is left to its row, which builds it again and says what failed.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from . import procs
from .backends.base import arch_of
from .cases import Case
from .errors import NvggError
from .kernels import cache as kcache
from .result import Row
from .selection import default_device, select
from .space import default_jobs


@dataclass(frozen=True)
class Ahead:
    """What was built ahead: the builds started, the processes they ran in, how long it took and
    how many failed (their rows build them again)."""

    builds: int = 0
    jobs: int = 0
    seconds: float = 0.0
    failed: int = 0


def ahead(rows: list[Row], *, jobs: int | None = None, timeout_s: float | None = None,
          on_note: Callable[[str], None] | None = None) -> Ahead:
    """The builds `rows` lack, made in up to `jobs` processes at once (None: one a core, 16 at
    most), each within `timeout_s`; `on_note(sentence)` before and after. Nothing where the rows
    run in nvgg's own process (NVGG_ISOLATION=off) or fewer than two builds are missing."""
    if not procs.isolated():
        return Ahead()
    todo = missing(rows)
    if len(todo) < 2:
        return Ahead()
    jobs = max(1, min(jobs or default_jobs(), len(todo)))
    if on_note:
        on_note(f"building the rows' kernels ahead: {len(todo)} builds, {jobs} at once")
    t0 = time.perf_counter()

    def one(server: int, unit: Row) -> int | None:
        try:
            return pool.call(f"build:{server}", build, row=unit)
        except (procs.ChildError, procs.ChildFailure, NvggError):
            return None

    with procs.Pool(timeout_s, spare=False) as pool:
        pids = procs.take_turns(todo, jobs, one, "nvgg-build")
    _gone({p for p in pids if p is not None})
    done = Ahead(len(todo), jobs, time.perf_counter() - t0, sum(p is None for p in pids))
    if on_note:
        left = f" ({done.failed} left to their rows)" if done.failed else ""
        on_note(f"built {done.builds} ahead in {done.seconds:.1f} s{left}")
    return done


def missing(rows: list[Row]) -> list[Row]:
    """What to build ahead: each row of our kernels as its worker would compile it (a per-group
    strategy's a group shape at a time, as a one-group case) where the disk cache lacks a build of
    it, once a missing build (the first it would make: one case's per-group strategies share
    theirs, cases may share a persistent build). A row that is unsupported, a submission's or on
    no GPU has nothing to build ahead."""
    units, seen = [], set()
    for row in rows:
        device = torch.device(row.device) if row.device else default_device()
        if row.submission or device.type != "cuda":
            continue
        try:
            be, st = select(row.case, row.strategy, row.backend, row.tensormaps, device, dict(row.point))
            arch, sms = arch_of(device), _sms(device)
        except NvggError:  # unsupported here: its row says so itself
            continue
        parts = [row.case] if st.grouped else [_one_group(row.case, g) for g in dict.fromkeys(row.case.groups)]
        for case in parts:
            try:
                with kcache.cached_only():
                    be.compile(case, arch, grouped=st.grouped, sms=sms)
            except kcache.NotCached as exc:
                if exc.key not in seen:
                    seen.add(exc.key)
                    units.append(dataclasses.replace(row, case=case))
            # a lookup that fails otherwise (a shape refused, a record unreadable) fails its row too,
            # which says why
            except Exception:  # noqa: BLE001
                continue
    return units


def build(row: Row) -> int:
    """In a build process: what `row`'s setup compiles (datapath.setup's `compile`, on this GPU's
    SM count), into the disk cache; this process's id."""
    device = torch.device(row.device) if row.device else default_device()
    be, st = select(row.case, row.strategy, row.backend, row.tensormaps, device, dict(row.point))
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else None
    be.compile(row.case, arch_of(device), grouped=st.grouped, sms=sms)
    return os.getpid()


def _one_group(case: Case, group: tuple[int, int, int]) -> Case:
    m, n, k = group
    return dataclasses.replace(case, id=f"{case.id}:{m}x{n}x{k}", m=(m,), n=(n,), k=(k,))


def _sms(device: torch.device) -> int | None:
    """The GPU's SM count from its profile (NVML's name: nvgg's own process starts no CUDA), None
    where no profile matches (the family's nominal count then; the build processes ask CUDA)."""
    from .profiles import for_gpu_name, nvml_query, visible_index
    index = visible_index(device.index or 0)
    name = None if index is None else nvml_query(lambda nvml, handle: nvml.nvmlDeviceGetName(handle), index)
    name = name.decode() if isinstance(name, bytes) else name
    profile = for_gpu_name(name) if name else None
    return profile.sm_count if profile else None


def _gone(pids: set[int], limit_s: float = 10.0) -> None:
    """Wait, up to `limit_s`, until the build processes have ended (killed as their pool closed):
    their CUDA contexts go with them, before the first row is timed."""
    deadline = time.monotonic() + limit_s
    for pid in pids:
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.01)


def _running(pid: int) -> bool:
    """Whether process `pid` still runs (Linux's /proc; a zombie has ended). False where /proc
    cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]
