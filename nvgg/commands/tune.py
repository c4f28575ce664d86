"""`nvgg tune`: a target's space swept on each case, every point checked and timed, the finalists
measured again in interleaved rounds before a winner is named (nvgg/tune.py). The target is a
submission's declared TUNE (`--submission`), or our persistent kernel's knobs on this GPU's arch
(`--backend cute`; the same space `nvgg compile --space` builds). The winners as a config map
(`--out`) that `run`, `compare` and `ab` take (`--config`)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from .. import output
from ..errors import NvggError, no_gpu
from .common import (CaseIds, CasesFile, GpusOpt, JsonOut, Progress, RowTimeout, Shape, check_distinct, check_outputs,
                     check_writable, command, pick_cases, pick_gpus, read_files, show, submissions, warn_if_slow_on_cpu,
                     within, write_file)

if TYPE_CHECKING:
    from .. import tune as tunemod

WRITE_EVERY_S = 2.0  # the sweep's files rewritten at most this often as points finish (a file grows to megabytes)
# a point's time limit on a GPU where --timeout is not given: a first-pass row takes a second or
# less (NOTES.md, Sweeps), a cold build in its worker seconds more; a point that hangs (a build that
# deadlocks on one case) costs this, not the rows' usual limit
POINT_TIMEOUT_S = 60.0
# a case's finalists where --finalists is not given (nvgg/tune.py's FINALISTS), as a number here:
# the command line is read before the library and torch are imported (commands/__init__.py);
# tests/test_tune.py holds the two equal
FINALISTS = 4


@command
def tune_cmd(submission: Annotated[Optional[List[str]], typer.Option("--submission", metavar="FILE", help="The submission.py to sweep (or PATH@REV): it declares TUNE = {'knob': [values, ...]} and reads CONFIG.")] = None,
             backend: Annotated[Optional[str], typer.Option("--backend", metavar="NAME", help="cute: sweep our persistent kernel's knobs on this GPU's arch instead.")] = None,
             case: CaseIds = None,
             budget: Annotated[float, typer.Option("--budget", metavar="MINUTES", callback=within(0.1), help="Time for the whole sweep (0.1 or more); what is left unmeasured is said.")] = 10.0,
             floor: Annotated[float, typer.Option("--floor", metavar="PCT", callback=within(0.1, 50.0), help="The change that matters between finalists, in percent (0.1 to 50).")] = 2.0,
             rounds: Annotated[int, typer.Option("--rounds", metavar="N", callback=within(5, 1000), help="The most interleaved rounds of the finalists a case (5 to 1000).")] = 20,
             finalists: Annotated[int, typer.Option("--finalists", metavar="N", callback=within(2, 16), help="Points a case measured again in rounds (2 to 16): the fastest, the default, then the next fastest the gate cannot tell from it.")] = FINALISTS,
             out: Annotated[Optional[str], typer.Option("--out", metavar="FILE", help="Write the winners as a config map (case -> point) for --config.")] = None,
             resume: Annotated[bool, typer.Option("--resume", help="Go on from the sweep in --json FILE (one stopped or cut short): its measured points are not run again.")] = False,
             shape: Shape = None, cases_file: CasesFile = None, timeout: RowTimeout = None,
             gpus: GpusOpt = None,
             ray: Annotated[Optional[str], typer.Option("--ray", metavar="ADDRESS", help="Sweep over a Ray cluster's GPUs (auto, or its address): an actor on each, the same checks and files (pip install 'nvgg[ray]').")] = None,
             json_out: JsonOut = None) -> None:
    """Sweep the configurations of a submission (its TUNE) or of our kernel per case: checked, timed, the winner told from noise."""
    from .. import rows, selection, tune as tunemod  # here, not at the top: commands/__init__.py
    from ..report.tune import Tune, config_map, near_points
    picked = pick_cases(case, shape, cases_file, default="benchmarks")
    if bool(submission) == (backend is not None):
        raise NvggError("nvgg tune sweeps one target: pass --submission FILE (its declared TUNE) or --backend "
                        "cute (our persistent kernel's knobs)")
    if len(submission or []) > 1:
        raise NvggError("nvgg tune sweeps one submission: pass --submission once (compare versions with nvgg ab)")
    if backend is not None and backend.strip().lower() != "cute":
        raise NvggError(f"--backend {backend}: only the cute backend's kernels have knobs to sweep")
    reads = read_files(submission=submission, cases_file=cases_file)
    targets = check_outputs("tune", json=json_out, reads=reads)
    check_writable("--out", out)
    check_distinct(("--json", json_out), ("--out", out), reads=reads)
    earlier = _earlier(json_out) if resume else None
    if ray is not None and gpus is not None:
        raise NvggError("--ray sweeps over the cluster's GPUs, --gpus over this host's: pass one")
    spread = pick_gpus(gpus)
    ray_gpus = 0
    if ray is not None:
        from .. import cluster
        ray_gpus = cluster.connect(ray)
    device = selection.default_device()
    if timeout is None and device.type == "cuda":
        timeout = POINT_TIMEOUT_S
    with submissions(submission) as versions:
        target = tunemod.SubmissionTarget(versions.items[0]) if submission else _kernels(device)
        for c in picked:
            rows.precheck(target.row(c, ()))
        files = output.Live(Tune(target, floor / 100), targets, every_s=WRITE_EVERY_S)
        done, space = _sweep(picked, target, device, earlier, budget, floor, rounds, timeout, files, spread,
                             ray_gpus, finalists)
    files.report.env = next((r.env for ct in done for r in ct.first.values() if r.env), {})
    if out:
        write_file("--out", out, config_map(done, target, space))
        typer.echo(f"wrote {out} (the winners: pass it to run, compare or ab as --config)", err=True)
    files.update(force=True)
    show(files)
    near = sum(len(near_points(ct, floor / 100)) for ct in done)
    if near:
        typer.echo(f"{near} first-pass point(s) within {floor:g}% of a case's fastest were not measured again: "
                   f"--finalists N (now {finalists}) takes more into the rounds", err=True)
    if any(ct.winner is None for ct in done):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_cmd)


def _kernels(device) -> tunemod.KernelTarget:
    """Our persistent kernel on this GPU: its arch's space, its SMs."""
    from .. import tune as tunemod
    if device.type != "cuda":
        raise no_gpu("tuning our kernels times them on their GPU and none is visible: nvgg compile --space builds "
                     "their space here")
    import torch

    from ..backends.base import arch_of
    return tunemod.KernelTarget(arch_of(device), torch.cuda.get_device_properties(device).multi_processor_count,
                                str(device))


def _sweep(picked, target, device, earlier, budget, floor, rounds, timeout, files, spread=None, ray_gpus=0,
           most=FINALISTS):
    """The sweep with its progress (points done and left, the best so far) and its files
    (`files`: output.Live over a report.tune.Tune) rewritten as points finish."""
    from .. import tune as tunemod
    tunes: dict = {}  # case -> its CaseTune
    state: dict = {}  # "progress": the bar, once the space says how many points there are
    report, order = files.report, [c.id for c in picked]

    def write(ct=None, force: bool = True) -> None:
        """The files (cases in the order asked: over several GPUs they progress side by side), at
        most every WRITE_EVERY_S for a point, always for a case's end; at the sweep's end what a
        point's write held back."""
        if ct is None:
            files.flush()
            return
        tunes[ct.case] = ct
        report.done = sorted(tunes.values(), key=lambda t: order.index(t.case))
        files.update(force=force)

    with contextlib.ExitStack() as stack:
        def on_space(space: dict) -> None:
            report.space = space
            total = sum(len(target.points(c, space)[0]) for c in picked)
            if isinstance(target, tunemod.KernelTarget):
                from ..space import default_jobs
                typer.echo(f"building the {total} points first, {default_jobs()} at once (from the cache where built "
                           "before)", err=True)
            state["progress"] = stack.enter_context(Progress(total, "tuning"))

        def on_point(ct, result) -> None:
            if len(ct.first) == 1:
                warn_if_slow_on_cpu(next(c for c in picked if c.id == ct.case), device)
            good = ct.good()
            best = f"; best so far {ct.first[good[0]].time_us:.1f} µs" if good else ""
            said = f"{result.status} {result.time_us:.1f} µs" if result.time_us else result.status
            state["progress"].finish(f"case {ct.case} {tunemod.name_of(tuple(result.point.items()))}", said + best)
            write(ct, force=False)

        try:
            done = tunemod.sweep(picked, target, budget_s=budget * 60, floor=floor / 100, rounds=rounds,
                                 timeout_s=timeout, resume=earlier, on_space=on_space, on_point=on_point,
                                 on_case=write, gpus=spread, ray_gpus=ray_gpus, most=most)
        finally:  # stopped from outside (Ctrl-C, SIGTERM) too: the points measured since the last write
            write()
    return done, report.space


def _earlier(json_out: str | None) -> dict:
    """--resume: the sweep in --json FILE, read before any work."""
    from ..result import read_document
    if not json_out or json_out == "-":
        raise NvggError("--resume goes on from the sweep in --json FILE: name that file with --json")
    doc = read_document(json_out, "sweep to resume", "pass --json FILE of an earlier nvgg tune, or drop --resume")
    if doc["kind"] != "tune":
        raise NvggError(f"sweep to resume {json_out} is an nvgg {doc['kind']} file: pass --json FILE of an earlier "
                        "nvgg tune, or drop --resume")
    return doc
