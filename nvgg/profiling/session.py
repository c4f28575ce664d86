"""`nvgg profile`'s work: each case under the observers asked for, one table an observer across the
cases, a verdict a row from every observer's evidence.

Whatever launches kernels runs in a child: CUPTI rows and our kernel's phases in the pool's
workers (rows.py), a submission's phases and ncu's target in children of their own
(procs.run_once). A fault or a hang costs that case, as a failed row or a failure line; the cases
measured before it are reported. The cases are rows as `run`'s are (rows.spread): in order in one
pool, or over a pool on each GPU asked for, a case's observers all on its GPU.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import backends, procs, rows, verdict as verdictmod, versions
from ..cases import Case
from ..errors import NvggError
from ..result import Result
from ..selection import choose
from .phases import Phases


@dataclass(frozen=True)
class Request:
    """What to profile: the cases, whose kernels (our strategy and backend, or a submission) and
    under which observers. Checked by the command before it is made."""

    cases: tuple[Case, ...]
    cupti: bool = False
    ncu: bool = False
    phases: bool = False
    occupancy: bool = False
    strategy: str | None = None
    backend: str | None = None
    tensormaps: str | None = None
    submission: str | None = None
    source: str = ""      # the submission's name in tables (versions.names)
    revision: str = ""    # the commit its file was taken from (PATH@REV)
    profile: str | None = None
    timeout_s: float | None = None
    clock_control: str = "none"
    out_dir: str = "nvgg-results"
    points: dict | None = None  # --config: case id -> point, the submission's CONFIG or our persistent kernel's build

    @property
    def version(self) -> versions.Version | None:
        """The submission as a version (None: our kernels)."""
        return versions.Version(self.submission, self.source, self.revision) if self.submission else None

    def point(self, case_id: str) -> tuple:
        """The case's point ((knob, value), ...), () without --config."""
        return tuple((self.points or {}).get(case_id, ()))

    @property
    def observers(self) -> list[str]:
        return [name for name in ("cupti", "ncu", "occupancy", "phases") if getattr(self, name)]


@dataclass
class Profiled:
    """What the observers measured, by case id; `failures`: a line a case that failed an observer."""

    request: Request
    strategy: str = ""
    backend: str = ""
    results: dict[str, Result] = field(default_factory=dict)   # CUPTI rows
    ncu: dict = field(default_factory=dict)                      # ncu.NcuReport
    occupancy: list[dict] = field(default_factory=list)
    phases: dict[str, Phases] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def profile(request: Request, device, *, gpus: list[int] | None = None,
            on_start: Callable[[str], None] | None = None,
            on_finish: Callable[[str, bool], None] | None = None) -> Profiled:
    """Every case of the request under its observers, in order (`gpus`, checked: spread over a pool
    on each, the cases reported in their order still); `on_start(case id)` and `on_finish(case id,
    failed)` around each, one at a time. Where the submission itself cannot be profiled (it does
    not import, marks nothing), no case could be: its failure is the last, and the cases not
    started by then are not tried."""
    st_name, be_name = choose(request.strategy or ("persistent" if request.phases else None), request.backend,
                              request.tensormaps, device)
    lock, fatal = threading.Lock(), threading.Event()

    def one(pool: procs.BasePool, case: Case) -> tuple[Profiled, bool] | None:
        with lock:
            if fatal.is_set():
                return None
            if on_start:
                on_start(case.id)
        part = Profiled(request, st_name, be_name)
        own = _case(request, case, st_name, be_name, device, pool, part)
        with lock:
            if own:
                fatal.set()
            if on_finish:
                on_finish(case.id, bool(part.failures) or (request.cupti and part.results[case.id].status != "ok"))
        return part, own

    out = Profiled(request, st_name, be_name)
    last: list[str] = []  # the submission's own failure (alike wherever it came up), after every case's
    for part, own in filter(None, rows.spread(list(request.cases), gpus, one, timeout_s=request.timeout_s)):
        out.results.update(part.results)
        out.ncu.update(part.ncu)
        out.occupancy += part.occupancy
        out.phases.update(part.phases)
        out.failures += part.failures[:-1] if own else part.failures
        if own and part.failures[-1] not in last:
            last.append(part.failures[-1])
    out.failures += last
    for cid, res in out.results.items():
        run = out.phases.get(cid)
        res.verdict = verdictmod.judge(res, phases=run.main if run else None, ncu=out.ncu.get(cid),
                                       behind=run.behind if run else None)
    return out


# occupancy's builds and queries run in nvgg's own process, one case at a time wherever the cases
# are spread: its kernel compiler is not known to be safe across threads
_IN_PARENT = threading.Lock()


def _case(request: Request, case: Case, st_name: str, be_name: str, device, pool: procs.BasePool,
          out: Profiled) -> bool:
    """One case under the request's observers, in `pool` (ncu's target and a submission's phase
    runs in children of their own on its GPU); True where the submission itself cannot be profiled
    (the last failure says why)."""
    point = request.point(case.id)
    target = ({"submission": request.submission} if request.submission else
              {"strategy": st_name, "backend": be_name, "tensormaps": request.tensormaps})
    if point:
        target["point"] = dict(point)
    if request.cupti:
        ours = {} if request.submission else {"strategy": st_name, "backend": be_name, "tensormaps": request.tensormaps}
        row = versions.row(case, request.version, point=point, profile=request.profile, timer="cupti", **ours)
        out.results[case.id] = rows.run_in(pool, row)
    if request.ncu:
        _observe(out, case, "ncu", lambda: _ncu(request, case, target, out, pool.gpu))
    if request.occupancy:
        here = device if pool.gpu is None else torch.device(device.type, pool.gpu)  # the pool's GPU, as seen here
        with _IN_PARENT:
            _observe(out, case, "occupancy", lambda: _occupancy(request, case, be_name, st_name, here, out))
    return bool(request.phases and _observe(out, case, "phases", lambda: _phases(request, case, pool, out)))


def _observe(out: Profiled, case: Case, what: str, measure: Callable[[], None]) -> bool:
    """One observer on one case; what it cannot do there is that case's failure line. True: the
    failure is the submission's own (every case would fail alike)."""
    from .submission_phases import CaseFailure
    try:
        measure()
    except CaseFailure as exc:
        out.failures.append(str(exc))
    except (procs.ChildFailure, procs.ChildError) as exc:
        out.failures.append(f"case {case.id}: {what}: {exc}")
    except NvggError as exc:
        if what == "phases" and out.request.submission:
            out.failures.append(str(exc))
            return True
        out.failures.append(f"case {case.id}: {what}: {exc}")
    return False


def _ncu(request: Request, case: Case, target: dict, out: Profiled, gpu: int | None) -> None:
    from . import ncu
    report = ncu.profile(case, request.out_dir, clock_control=request.clock_control,
                         timeout_s=request.timeout_s or 600, **target, **({"gpu": gpu} if gpu is not None else {}))
    report.sol_bytes = case.bytes
    out.ncu[case.id] = report


def _occupancy(request: Request, case: Case, be_name: str, st_name: str, device, out: Profiled) -> None:
    from .occupancy_report import report
    be = backends.get(be_name, tensormaps=request.tensormaps, point=dict(request.point(case.id)) or None)
    out.occupancy += [dict(row, case=case.id) for row in report(case, be, st_name, device, request.profile)]


def _phases(request: Request, case: Case, pool: procs.BasePool, out: Profiled) -> None:
    if request.submission:
        from . import submission_phases
        run = submission_phases.run(request.submission, case, timeout_s=request.timeout_s,
                                    **({"point": request.point(case.id)} if request.point(case.id) else {}),
                                    **({"gpu": pool.gpu} if pool.gpu is not None else {}))
        out.failures += [f"case {case.id}: {e}" for e in run.errors]
    else:
        from . import device_phases
        run = pool.call("backend:cute", device_phases.run, case=case, profile=request.profile,
                        tensormaps=request.tensormaps,
                        **({"point": dict(request.point(case.id))} if request.point(case.id) else {}))
    out.phases[case.id] = run
