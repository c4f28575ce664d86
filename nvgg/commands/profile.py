"""`nvgg profile`: the same path under other observers: CUPTI kernel records (--cupti), Nsight
Compute (--ncu), occupancy (--occupancy), timestamps inside the kernel (--phases); on the benchmark
cases unless --case narrows it, one table across the cases for each observer, and a verdict a row
from what was measured. `--submission FILE` profiles a user's submission.py in its own process
(CUPTI, Nsight Compute, and --phases: the marks its kernels write through nvgg.probe); given
several times (files or PATH@REV), each version in turn, its tables under its name. `--gpus`
spreads the cases over GPUs as `run` spreads its rows. The work is profiling/session.py's; this
module checks the options and renders."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, List, Optional

import typer

from .. import cases as casesmod
from ..errors import NvggError, no_gpu
from ..profiling.phases import chrome_trace_cases
from .common import (CasesFile, ConfigMap, GpusOpt, JsonOut, Profile, Progress, RowTimeout, Shape, TensorMaps,
                     check_distinct, check_folder, check_points_fit, check_points_taken, check_profile, check_writable,
                     command, config_points, emit_json, mode_value, pick_cases, pick_gpus, read_files, submissions,
                     write_file)

if TYPE_CHECKING:
    from ..profiling.session import Request


@command
def profile_cmd(case: Annotated[Optional[str], typer.Option("--case", metavar="IDS", help="Case id(s); default: the benchmarks.")] = None,
                strategy: Annotated[Optional[str], typer.Option("--strategy", metavar="NAME", help="persistent, multistream, graph or sequential.")] = None,
                backend: Annotated[Optional[str], typer.Option("--backend", metavar="NAME", help="cute or torch.")] = None,
                submission: Annotated[Optional[List[str]], typer.Option("--submission", metavar="FILE", help="Profile a competition-format submission.py (with --cupti, --ncu and/or --phases); PATH@REV for the file at a git revision; several: each version in turn.")] = None,
                cupti: Annotated[bool, typer.Option("--cupti", help="CUPTI kernel records beside the event time.")] = False,
                ncu: Annotated[bool, typer.Option("--ncu", help="Nsight Compute on the kernels of one call.")] = False,
                phases: Annotated[bool, typer.Option("--phases", help="Timestamps inside the kernel: our persistent kernel's instrumented build, or a submission's probe marks.")] = False,
                occupancy: Annotated[bool, typer.Option("--occupancy", help="Theoretical and CUDA-API occupancy, SM coverage and waves.")] = False,
                trace: Annotated[Optional[str], typer.Option("--trace", metavar="FILE", help="With --phases: write a Chrome/Perfetto trace here (a process a case and launch).")] = None,
                clock_control: Annotated[Optional[str], typer.Option("--clock-control", metavar="MODE", help="With --ncu: ncu's clock control, none (default) or base.")] = None,
                out_dir: Annotated[Optional[str], typer.Option("--out", metavar="FOLDER", help="With --ncu: the folder for .ncu-rep and CSV files (default nvgg-results).")] = None,
                tensormaps: TensorMaps = None, timeout: RowTimeout = None, shape: Shape = None,
                cases_file: CasesFile = None, profile: Profile = None, config: ConfigMap = None,
                gpus: GpusOpt = None, json_out: JsonOut = None) -> None:
    """Why is it slow: kernel time vs host overhead (CUPTI), counters (ncu), occupancy, phases."""
    from .. import env as envmod, selection  # here, not at the top: commands/__init__.py
    from ..profiling.session import profile as run_profile
    from ..report.profile import profile_document, profile_text
    request = _request(pick_cases(case, shape, cases_file, default="benchmarks"), strategy, backend, submission,
                       cupti, ncu, phases, occupancy, trace, clock_control, out_dir, mode_value(tensormaps), timeout,
                       profile, json_out, read_files(submission=submission, config=config, cases_file=cases_file))
    with submissions(submission) as versions:  # bad files and revisions refused before the GPU is asked for
        device = selection.default_device()
        # a map that cannot serve (missing, malformed, another arch's) is bad input, said before the missing GPU
        request = _with_points(request, config_points(config, request.cases, submission, device, request.tensormaps),
                               config, submission, versions.items)
        spread = pick_gpus(gpus)  # its form, then the GPUs there, as run checks them
        if device.type != "cuda":
            raise no_gpu("profiling needs a CUDA GPU and none is visible: run nvgg profile on a GPU machine")
        asked = [dataclasses.replace(request, submission=v.path, source=v.name, revision=v.revision)
                 for v in versions.items] or [request]
        done = []
        with Progress(len(request.cases) * len(asked), "profiling") as progress:
            for one in asked:
                named = f"{one.source}: " if len(asked) > 1 else ""
                done.append(run_profile(one, device, gpus=spread, on_start=lambda cid: progress.start(
                    f"{named}case {cid} ({', '.join(one.observers)})"), on_finish=lambda cid, bad: progress.finish(
                    f"{named}case {cid}", "failed" if bad else "done")))
    env = next((r.env for d in done for r in d.results.values() if r.env), None) or envmod.collect(device)
    if trace and done[0].phases:
        write_file("--trace", trace, chrome_trace_cases(done[0].phases))
        typer.echo(f"wrote {trace} (a trace: open it in Perfetto or chrome://tracing)", err=True)
    if not emit_json(json_out, profile_document(done, env, {c.id for c in casesmod.benchmarks()})):
        typer.echo(profile_text(done, envmod.card(env)))
    failures = [f"{d.request.source}: {line}" if len(done) > 1 else line for d in done for line in d.failures]
    for line in failures[:-1]:
        typer.secho(f"nvgg: {line}", err=True, fg=typer.colors.RED)
    if failures:  # everything measured is out (tables, JSON, trace); the last failure ends it
        raise NvggError(failures[-1])


def register(app: typer.Typer) -> None:
    app.command("profile")(profile_cmd)


def _with_points(request: Request, points, path, submission, versions=()) -> Request:
    """--config's points in the request: a submission's (its CONFIG a case, checked against each
    version), or our persistent kernel's builds, which need that strategy and backend (and no
    submission in their place)."""
    if points is None:
        return request
    if points.kernel and submission:
        check_points_taken(path, points, [])
    if not points.kernel:
        check_points_fit(path, points, versions)
    if points.kernel and (request.strategy not in (None, "persistent") or request.backend not in (None, "cute")):
        raise NvggError("--config holds builds of the persistent cute kernel: drop --strategy/--backend, or --config")
    by_case = {c.id: (points.submission(c.id) if not points.kernel else points.by_case[c.id]) for c in request.cases}
    return dataclasses.replace(request, points=by_case, **({"strategy": "persistent", "backend": "cute"} if points.kernel
                                                          else {}))


def _request(cases, strategy, backend, submission, cupti, ncu, phases, occupancy, trace, clock_control, out_dir,
             tensormaps, timeout, profile, json_out, reads=()) -> Request:
    """Every option of profile checked, before any work."""
    from ..profiling.session import Request
    if not (cupti or ncu or phases or occupancy):
        raise NvggError("choose what to profile: --cupti, --ncu, --phases and/or --occupancy")
    if submission and (occupancy or strategy or backend or tensormaps):
        raise NvggError("a submission is profiled with --cupti, --ncu and --phases (its kernels' occupancy is in "
                        "ncu's Occupancy section); --occupancy, --strategy, --backend and --tensormaps need our kernels")
    if (clock_control is not None or out_dir is not None) and not ncu:
        raise NvggError("--clock-control and --out are Nsight Compute's: add --ncu, or drop them")
    if clock_control not in (None, "none", "base"):
        raise NvggError(f"--clock-control {clock_control!r}: choose none or base")
    if trace and not phases:
        raise NvggError("--trace writes the phases inside the kernel: add --phases")
    if trace and len(submission or []) > 1:
        raise NvggError("--trace holds one version's phases: pass one --submission with --trace, or drop --trace")
    if phases and not submission and (strategy not in (None, "persistent") or backend not in (None, "cute")):
        raise NvggError("--phases instruments the persistent cute kernel: drop --strategy/--backend, or profile "
                        "the other strategy without --phases")
    if ncu:
        check_folder("--out", out_dir or "nvgg-results")
    check_writable("--trace", trace)
    check_writable("--json", json_out, stdout_ok=True)
    check_distinct(("--trace", trace), ("--json", json_out), reads=reads)
    check_profile(profile)
    return Request(tuple(cases), cupti=cupti, ncu=ncu, phases=phases, occupancy=occupancy, strategy=strategy,
                   backend=backend, tensormaps=tensormaps, submission=None,
                   profile=profile, timeout_s=timeout, clock_control=clock_control or "none",
                   out_dir=out_dir or "nvgg-results")
