"""`nvgg ab`: is my change faster? Versions of a submission (files, or PATH@REV) measured in
alternating rounds on each case, each version's time against the first's with a 95% interval and a
class, and the geometric mean over the cases (nvgg/ab.py)."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from .. import output
from ..errors import NvggError
from ..report import check_text
from .common import (CaseIds, CasesFile, ConfigMap, JsonOut, JunitOut, L2, L2Opt, OutputOpt, Profile, Progress,
                     ProtocolOpt, RowTimeout, Shape, check_l2, check_outputs, check_points_taken, check_profile,
                     check_protocol, check_protocol_fits, command, config_points, pick_cases, read_files, show,
                     submissions, warn_if_slow_on_cpu, within)

# the A/B's first look (nvgg/ab.py's MIN_ROUNDS), the least --rounds, as a number here: the command
# line is read before the library and torch are imported (commands/__init__.py); tests/test_ab.py
# holds the two equal
MIN_ROUNDS = 5


@command
def ab_cmd(submission: Annotated[Optional[List[str]], typer.Option("--submission", metavar="FILE", help="A version: a submission.py, or PATH@REV for the file at a git revision; two or more, the first the base.")] = None,
           case: CaseIds = None,
           floor: Annotated[float, typer.Option("--floor", metavar="PCT", callback=within(0.1, 50.0), help="The change that matters, in percent (0.1 to 50): an interval inside ±PCT is same, one wholly beyond it faster or slower.")] = 2.0,
           rounds: Annotated[int, typer.Option("--rounds", metavar="N", callback=within(MIN_ROUNDS, 1000), help=f"The most rounds a case, its last look ({MIN_ROUNDS} to 1000; each round the versions' timed windows taking turns for 0.25-2 s, every version's calls then checked); a host-bound case looks up to 3 times as many.")] = 30,
           budget: Annotated[float, typer.Option("--budget", metavar="SECONDS", callback=within(1.0), help=f"Time for all cases together (1 or more), their first runs included; each case still gets {MIN_ROUNDS} rounds.")] = 120.0,
           shape: Shape = None, cases_file: CasesFile = None, profile: Profile = None, timeout: RowTimeout = None,
           l2: L2Opt = L2.nvgg, config: ConfigMap = None, protocol: ProtocolOpt = None,
           json_out: JsonOut = None, junit: JunitOut = None, output_to: OutputOpt = None) -> None:
    """A fair A/B of versions of a submission: alternating rounds, looked at on a schedule, until each ratio's interval is decided."""
    from .. import ab as abmod, rows, selection  # here, not at the top: commands/__init__.py
    from ..report.ab import AB
    picked = pick_cases(case, shape, cases_file, default="benchmarks")
    if len(submission or []) < 2:
        raise NvggError("nvgg ab compares versions: pass --submission at least twice (the first is the base)")
    predicting = check_protocol(protocol, config=config)
    targets = check_outputs("ab", json=json_out, junit=junit, more=output_to,
                            reads=read_files(submission=submission, config=config, cases_file=cases_file))
    check_profile(profile)
    device = selection.default_device()
    points = config_points(config, picked, submission, device)
    if points is not None and points.kernel:
        raise NvggError("nvgg ab compares submissions; --config holds our kernel's builds: compare them with nvgg "
                        "compare --config")
    check_l2(l2, device)
    with submissions(submission) as versions:
        todo = [rows.rows_of([c], [], [], submissions=versions.items, points=points, device=str(device),
                             profile=profile, l2=l2.value) for c in picked]
        check_points_taken(config, points, [r for case_rows in todo for r in case_rows], versions.items)
        check_protocol_fits(predicting, device, picked)
        for row in (r for case_rows in todo for r in case_rows):
            rows.precheck(row)
        by_id = {c.id: c for c in picked}
        report = AB(floor / 100, abmod.geomeans)
        files = output.Live(report, targets)
        with Progress(len(picked), "A/B") as progress:
            def on_case(ab, finished: bool) -> None:
                if finished:
                    report.done.append(ab)
                    files.update()
                    progress.finish(f"case {ab.case}", ab.stopped)
                else:
                    warn_if_slow_on_cpu(by_id[ab.case], device)
                    progress.start(f"case {ab.case}")
            done = abmod.run(todo, floor=floor / 100, max_rounds=rounds, budget_s=budget, timeout_s=timeout,
                             on_case=on_case)
        if predicting:
            report.predicted = _predict(todo, done, protocol)
            files.update()
    show(files)
    failed = [ab for ab in done if ab.failed() is not None]
    for ab in failed:
        bad = ab.failed()
        typer.secho(f"failed: case {ab.case}: {bad.source or bad.strategy}: {check_text(bad)}", err=True,
                    fg=typer.colors.RED)
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("ab")(ab_cmd)


def _predict(todo, done, spec: str):
    """--protocol after the rounds: each version's prediction (leaderboard.predict_versions), with
    progress on stderr; (its Results, the document's keys)."""
    from .. import leaderboard
    with Progress(len(todo[0]), "predicting the leaderboard") as progress:
        return leaderboard.predict_versions(
            todo, done, spec, on_start=lambda name: progress.start(f"{name} under {spec}"),
            on_result=lambda name, g: progress.finish(name, "ok" if g is not None else "FAILED"))
