"""`nvgg compare [strategies|backends]`: strategies (or backends) side by side on the cases, as a
table and JSON, with the geometric mean over the benchmarks and a regression gate for CI."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, List, Optional

import typer

from .. import cases as casesmod, output
from ..errors import NO_GPU, NvggError
from ..report import check_text, label
from .common import (CaseIds, CasesFile, Command, ConfigMap, GpusOpt, JsonOut, JunitOut, L2, L2Opt, OutputOpt, Profile,
                     Progress, ProtocolOpt, RowTimeout, Shape, Timer, TimerOpt, check_l2, check_outputs,
                     check_points_taken, check_profile, check_protocol, check_protocol_fits, check_timer, command,
                     config_points, names, pick_cases, pick_gpus, predict_leaderboard, read_files, show, submissions,
                     tensormaps_option, within)


class What(str, Enum):
    strategies = "strategies"
    backends = "backends"


@command
def compare_cmd(what: Annotated[What, typer.Argument(metavar="WHAT", case_sensitive=False, help="strategies (default) or backends.")] = What.strategies,
                case: CaseIds = None,
                strategy: Annotated[Optional[str], typer.Option("--strategy", metavar="NAMES", help="all or names, comma-separated; none: the submissions alone.")] = None,
                backend: Annotated[Optional[str], typer.Option("--backend", metavar="NAMES", help="all or names, comma-separated.")] = None,
                submission: Annotated[Optional[List[str]], typer.Option("--submission", metavar="FILE", help="Add a competition-format submission.py, or PATH@REV for the file at a git revision (repeat for several).")] = None,
                tensormaps: Annotated[Optional[str], typer.Option("--tensormaps", metavar="MODES", help="The persistent cute kernel's tensor maps: device, host, or both (device,host or all), a row each.")] = None,
                shape: Shape = None, cases_file: CasesFile = None, profile: Profile = None,
                timer: TimerOpt = Timer.leaderboard, l2: L2Opt = L2.nvgg, json_out: JsonOut = None,
                timeout: RowTimeout = None, config: ConfigMap = None, gpus: GpusOpt = None,
                protocol: ProtocolOpt = None,
                markdown: Annotated[Optional[str], typer.Option("--markdown", metavar="FILE", help="Also write the tables as GitHub-flavoured Markdown to this file (a CI job summary).")] = None,
                junit: JunitOut = None, output_to: OutputOpt = None,
                baseline: Annotated[Optional[str], typer.Option("--baseline", metavar="FILE", help="An earlier --json file to gate against.")] = None,
                max_regression: Annotated[Optional[float], typer.Option("--max-regression", metavar="PCT", callback=within(0.0), help="Allowed slowdown in percent with --baseline (0 or more; default 5); only a slowdown beyond it and beyond both runs' noise fails.")] = None) -> None:
    """Strategies x cases (or backends x cases for one strategy): time, speedup, SOL gap, correctness.
    Every row runs in a worker process: a fault or a hang costs that row, and the files are written as rows finish."""
    from .. import rows, selection  # here, not at the top: commands/__init__.py
    if baseline is None and max_regression is not None:
        raise NvggError("--max-regression is the slowdown --baseline allows: add --baseline FILE (an earlier --json)")
    device = selection.default_device()
    picked = pick_cases(case, shape, cases_file, default="benchmarks")
    predicting = check_protocol(protocol, timer=timer, config=config, gpus=gpus)
    st_names, be_names = _strategies_and_backends(what, strategy, backend, device)
    modes = tensormaps_option(tensormaps)
    selection.check_modes_apply(modes, st_names)
    targets = check_outputs("results", json=json_out, markdown=markdown, junit=junit, more=output_to,
                            reads=read_files(submission=submission, config=config, cases_file=cases_file,
                                             baseline=baseline))
    check_profile(profile)
    check_timer(timer, device)
    check_l2(l2, device)
    points = config_points(config, picked, submission, device, tensormaps)
    spread = pick_gpus(gpus)
    with submissions(submission) as versions:
        if not st_names and not versions.items:
            raise NvggError("--strategy none leaves nothing to compare: add --submission FILE")
        todo = rows.rows_of(picked, st_names, be_names, submissions=versions.items, tensormaps=modes, points=points,
                            device=str(device), profile=profile, timer=timer.value, l2=l2.value)
        check_points_taken(config, points, todo, versions.items)
        _refuse_without_gpu(todo, device)
        check_protocol_fits(predicting, device, picked)
        _run(todo, targets, baseline, max_regression, timeout, device, spread, protocol if predicting else None)


def register(app: typer.Typer) -> None:
    app.command("compare", cls=Command)(compare_cmd)


def _run(todo, targets, baseline, max_regression, timeout, device, spread=None, protocol=None) -> None:
    """The rows of `compare` run (a submission's revisions checked out meanwhile), their files
    (`targets`, rewritten as rows finish), table and exit code."""
    from .. import rows
    from ..baseline import gate
    from ..report.results import Results, compare_outcome
    base = _baseline(baseline, todo)
    report = Results("compare", device, {c.id for c in casesmod.benchmarks()})
    files = output.Live(report, targets)
    regressed: list[str] = []
    with Progress(len(todo)) as progress:
        def advance(r) -> None:
            if base is not None:
                regressed.extend(gate([r], base, 5.0 if max_regression is None else max_regression))
            report.add(r)
            files.update()
            progress.finish(f"{r.case} {label(r)}", compare_outcome(r))
        results = rows.run_many(todo, timeout_s=timeout, on_result=advance, on_start=lambda row: progress.start(row.name),
                                gpus=spread, on_note=progress.note)
    if report.reorder(results):  # rows spread over GPUs finish out of order: the files list them as asked
        files.update()
    if protocol:
        predict_leaderboard(todo, results, protocol, files)
    show(files)
    failed = report.failing()
    for r in failed:
        why = check_text(r) if r.status != "ok" or r.suspect else f"under --protocol {protocol}: {r.protocol.get('message')}"
        typer.secho(f"failed: {r.case} {label(r)}: {why}", err=True, fg=typer.colors.RED)
    for line in regressed:
        typer.secho(f"regression: {line}", err=True, fg=typer.colors.RED)
    if not any(r.status == "ok" and r.stats is not None for r in results):
        typer.secho("nvgg: nothing was measured: every row failed or is unsupported here", err=True, fg=typer.colors.RED)
        raise typer.Exit(1)
    if regressed or failed:
        raise typer.Exit(1)


def _refuse_without_gpu(todo, device) -> None:
    """Where every row needs a GPU and none is visible (`compare --backend cute` on a CPU), the
    first row's reason and exit 3 (errors.NO_GPU) before any row runs, as `run` says it, rather
    than a table of rows that could not run."""
    from .. import rows
    if device.type == "cuda":
        return
    first = None
    for row in todo:
        try:
            rows.precheck(row)
        except NvggError as exc:
            if exc.code == NO_GPU:
                first = first or exc
                continue
        return
    if first is not None:
        raise first


def _baseline(path: str | None, todo) -> dict | None:
    """The baseline's rows, refused before any work where it shares no row with this run (a gate
    that would check nothing)."""
    from ..baseline import in_baseline, load_baseline
    if path is None:
        return None
    base = load_baseline(path)
    if not any(in_baseline(row, base) for row in todo):
        cases = sorted({k[0] for k in base})
        labels = sorted({f"{k[1]}/{k[2]}" for k in base})
        raise NvggError(f"baseline {path} shares no row with this run (it holds cases {', '.join(cases)} of "
                        f"{', '.join(labels)}): compare the same cases, strategies and backends, or write a new "
                        "baseline with --json")
    return base


def _strategies_and_backends(what: What, strategy: str | None, backend: str | None, device) -> tuple[list[str], list[str]]:
    from .. import backends, selection, strategies
    if strategy is not None and "none" in [s.strip().lower() for s in strategy.split(",")]:  # the submissions alone
        if strategy.strip().lower() != "none":
            raise NvggError(f"--strategy {strategy!r}: none stands alone (the submissions without our strategies)")
        if backend:
            raise NvggError("--strategy none runs the submissions alone: drop --backend")
        return [], []
    if what is What.strategies:
        return (names(strategy or "all", strategies.NAMES, "strategy"),
                names(backend, backends.NAMES, "backend") if backend else [selection.default_backend(device)])
    st_names = names(strategy or selection.choose(None, None, None, device)[0], strategies.NAMES, "strategy")
    if len(st_names) != 1:
        raise NvggError("`nvgg compare backends` compares backends for one strategy: pass --strategy NAME")
    return st_names, names(backend or "all", backends.NAMES, "backend")
