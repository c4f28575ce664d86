"""`nvgg run`: generate the case's inputs, run one strategy, check it against the exact
reference, time it the leaderboard's way, and report the gap to the speed of light."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from .. import cases as casesmod, output
from ..errors import NvggError
from ..report import label
from .common import (L2, CasesFile, ConfigMap, GpusOpt, JsonOut, L2Opt, Profile, Progress, ProtocolOpt, RowTimeout, Shape,
                     TensorMaps, Timer, TimerOpt, check_l2, check_outputs, check_points_taken, check_profile,
                     check_protocol, check_protocol_fits, check_timer, command, config_points, mode_value, pick_cases,
                     pick_gpus, predict_leaderboard, read_files, show, submissions, warn_if_slow_on_cpu)

if TYPE_CHECKING:
    from ..result import Row


@command
def run_cmd(case: Annotated[Optional[str], typer.Option("--case", metavar="ID", help="Case id (see `nvgg cases`).")] = None,
            strategy: Annotated[Optional[str], typer.Option("--strategy", metavar="NAME", help="persistent, multistream, graph or sequential.")] = None,
            backend: Annotated[Optional[str], typer.Option("--backend", metavar="NAME", help="cute or torch (default: the best this machine has).")] = None,
            submission: Annotated[Optional[List[str]], typer.Option("--submission", metavar="FILE", help="Run a competition-format submission.py instead, or PATH@REV for the file at a git revision (repeat for several).")] = None,
            tensormaps: TensorMaps = None, timeout: RowTimeout = None, shape: Shape = None,
            cases_file: CasesFile = None,
            profile: Profile = None, timer: TimerOpt = Timer.leaderboard, l2: L2Opt = L2.nvgg,
            config: ConfigMap = None, gpus: GpusOpt = None,
            quick: Annotated[bool, typer.Option("--quick", help="Time one window only, as a sweep's first pass: about a second sooner, without the interval a rerun falls in (±) or the energy a call.")] = False,
            protocol: ProtocolOpt = None, json_out: JsonOut = None) -> None:
    """Check and time one strategy on one case (default: the best strategy and backend here)."""
    from .. import rows, selection  # here, not at the top: commands/__init__.py
    from ..report.results import Results, compare_outcome
    picked = pick_cases(case, shape, cases_file)
    if len(picked) != 1:
        raise NvggError("nvgg run takes one case: use `nvgg compare` for several")
    if submission and (strategy or backend or tensormaps):
        raise NvggError("--submission brings its own launch scheme: drop --strategy/--backend/--tensormaps")
    device = selection.default_device()
    predicting = check_protocol(protocol, quick=quick, timer=timer, config=config, gpus=gpus)
    targets = check_outputs("results", json=json_out, reads=read_files(submission=submission, config=config,
                                                                       cases_file=cases_file))
    check_profile(profile)
    points = config_points(config, picked, submission, device, tensormaps)
    check_timer(timer, device)
    check_l2(l2, device)
    spread = pick_gpus(gpus)
    common = dict(device=str(device), profile=profile, timer=timer.value, l2=l2.value,
                  **(dict(span=False, energy=False) if quick else {}))
    with submissions(submission) as versions:
        todo = (rows.rows_of(picked, [], [], submissions=versions.items, points=points, **common) if submission else
                [_ours(picked[0], strategy, backend, mode_value(tensormaps), device, points, common)])
        check_points_taken(config, points, todo, versions.items)
        check_protocol_fits(predicting, device, picked)
        report = Results("run", device, {c.id for c in casesmod.benchmarks()}, rerun=not quick)
        files = output.Live(report, targets)
        with Progress(len(todo), "running") as progress:
            results = rows.run_many(todo, timeout_s=timeout, on_start=lambda r: _starting(r, device, progress),
                                    on_result=lambda r: progress.finish(f"{r.case} {label(r)}", compare_outcome(r)),
                                    strict=True, gpus=spread, on_note=progress.note)
    for result in results:
        if result.status == "unsupported":  # found out in the worker (a shape no kernel takes, a cache it cannot write)
            raise NvggError(result.message)
        report.add(result)
        files.update()
    if predicting:
        predict_leaderboard(todo, results, protocol, files)
    show(files)
    if report.failing():
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run_cmd)


def _starting(row: Row, device, progress: Progress) -> None:
    warn_if_slow_on_cpu(row.case, device)
    progress.start(row.name)


def _ours(case, strategy, backend, tensormaps, device, points, common) -> Row:
    """The row of our kernels: the strategy and backend asked for (or this machine's best), with
    a config map's point where the map is our persistent kernel's."""
    from .. import selection
    from ..result import Row
    st, be = selection.choose(strategy or ("persistent" if points else None), backend or ("cute" if points else None),
                              tensormaps, device)
    point = points.ours(case.id, st, be) if points else ()
    if points and not point:
        raise NvggError("--config holds builds of the persistent cute kernel: drop --strategy/--backend, or --config")
    return Row(case, st, be, tensormaps, point=point, **common)
