"""`nvgg profile`: the same path under other observers: CUPTI kernel records (--cupti), Nsight
Compute (--ncu), occupancy (--occupancy), the instrumented persistent kernel (--phases); on the
benchmark cases unless --case narrows it, one table across the cases for each observer, and a
verdict a row from what was measured. `--submission FILE` profiles a user's submission.py in its
own process (CUPTI and Nsight Compute)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import backends, cases as casesmod, env as envmod, runner, verdict as verdictmod
from ..cli import command
from ..errors import NvggError
from ..report import document, ncu_table, occupancy_table, phase_table, results_table, setup_table, write_json
from .common import (CasesFile, JsonOut, Profile, Shape, SubmissionTimeout, TensorMaps, check_timeout, mode_value,
                     pick_cases)


def register(app: typer.Typer) -> None:
    @app.command("profile")
    @command
    def profile_cmd(case: Annotated[Optional[str], typer.Option("--case", help="Case id(s); default: the benchmarks.")] = None,
                    strategy: Annotated[Optional[str], typer.Option("--strategy", help="persistent, multistream, graph or sequential.")] = None,
                    backend: Annotated[Optional[str], typer.Option("--backend", help="cute or torch.")] = None,
                    submission: Annotated[Optional[str], typer.Option("--submission", help="Profile a competition-format submission.py (with --cupti and/or --ncu).")] = None,
                    cupti: Annotated[bool, typer.Option("--cupti", help="CUPTI kernel records beside the event time.")] = False,
                    ncu: Annotated[bool, typer.Option("--ncu", help="Nsight Compute on the kernels of one call.")] = False,
                    phases: Annotated[bool, typer.Option("--phases", help="Timestamps inside the persistent kernel (instrumented build).")] = False,
                    occupancy: Annotated[bool, typer.Option("--occupancy", help="Theoretical and CUDA-API occupancy, SM coverage and waves.")] = False,
                    trace: Annotated[Optional[str], typer.Option("--trace", help="With --phases: write a Chrome/Perfetto trace here (one case).")] = None,
                    clock_control: Annotated[str, typer.Option("--clock-control", help="ncu's clock control: none (default) or base.")] = "none",
                    out_dir: Annotated[str, typer.Option("--out", help="Folder for .ncu-rep and CSV files.")] = "nvgg-results",
                    tensormaps: TensorMaps = None, timeout: SubmissionTimeout = None, shape: Shape = None,
                    cases_file: CasesFile = None, profile: Profile = None, json_out: JsonOut = None) -> None:
        """Why is it slow: kernel time vs host overhead (CUPTI), counters (ncu), occupancy, phases."""
        if not (cupti or ncu or phases or occupancy):
            raise NvggError("choose what to profile: --cupti, --ncu, --phases and/or --occupancy")
        if submission and (phases or occupancy or strategy or backend or tensormaps):
            raise NvggError("a submission is profiled with --cupti and --ncu (its kernels' occupancy is in ncu's "
                            "Occupancy section); --phases, --occupancy, --strategy, --backend and --tensormaps "
                            "need our kernels")
        check_timeout(timeout, submission)
        if trace and not phases:
            raise NvggError("--trace writes the persistent kernel's phases: add --phases")
        if phases and (strategy not in (None, "persistent") or backend not in (None, "cute")):
            raise NvggError("--phases instruments the persistent cute kernel: drop --strategy/--backend, or profile "
                            "the other strategy without --phases")
        picked = pick_cases(case, shape, cases_file, default="benchmarks")
        if trace and len(picked) != 1:
            raise NvggError("--trace writes one case's phases: pass one --case")
        device = runner.default_device()
        if device.type != "cuda":
            raise NvggError("profiling needs a CUDA GPU and none is visible")
        mode = mode_value(tensormaps)
        be_name = backend or backends.best(device)
        st_name = strategy or ("persistent" if phases else runner.default_strategy(backends.get(be_name, tensormaps=mode), device))
        target = {"submission": str(submission)} if submission else {"strategy": st_name, "backend": be_name, "tensormaps": mode}
        results, ncu_reports, occ_rows, phase_runs = {}, {}, [], {}
        for c in picked:
            if cupti:
                results[c.id] = _cupti_run(c, submission, st_name, be_name, mode, profile, timeout)
            if ncu:
                from ..profiling import ncu as ncumod
                report = ncumod.profile(dict(target, case=c.to_dict()), out_dir, clock_control=clock_control)
                report.sol_bytes = c.bytes
                ncu_reports[c.id] = report
            if occupancy:
                from ..profiling.occupancy import report as occupancy_report
                occ_rows += [dict(row, case=c.id) for row in occupancy_report(
                    c, backends.get(be_name, tensormaps=mode), st_name, device, profile)]
            if phases:
                from ..profiling import device_phases
                phase_runs[c.id] = device_phases.run(c, profile=profile, tensormaps=mode)
        _render(picked, results, ncu_reports, occ_rows, phase_runs, trace, json_out, device)


def _cupti_run(case, submission, strategy, backend, mode, profile, timeout):
    if submission:
        from ..backends import submission as sub
        return sub.run_submission(submission, case, profile=profile, timer="cupti",
                                  timeout_s=timeout)
    return runner.run_one(case, strategy=strategy, backend=backend, profile=profile, timer="cupti", tensormaps=mode)


def _render(picked, results, ncu_reports, occ_rows, phase_runs, trace, json_out, device) -> None:
    """One table an observer across the cases; each CUPTI row's verdict with every observer's evidence."""
    payload: dict = {"cases": [c.id for c in picked]}
    for cid, res in results.items():
        run = phase_runs.get(cid)
        found = verdictmod.judge(res, phases=run.report if run else None, ncu=ncu_reports.get(cid),
                                 behind=run.behind if run else None)
        res.verdict = found.to_dict() if found else {}
    if results:
        env = next((r.env for r in results.values() if r.env), None) or envmod.collect(device)
        typer.echo(f"card: {envmod.card(env)}")
        typer.echo(results_table(list(results.values())))
        typer.echo(setup_table(list(results.values())))
        typer.echo(_kernels_table(results))
        payload.update(document(list(results.values()), env, {c.id for c in casesmod.benchmarks()}))
    if ncu_reports:
        typer.echo(ncu_table(ncu_reports))
        payload["ncu"] = {cid: r.to_dict() for cid, r in ncu_reports.items()}
    if occ_rows:
        typer.echo(occupancy_table(occ_rows))
        payload["occupancy"] = occ_rows
    if phase_runs:
        for cid, run in phase_runs.items():
            typer.echo(f"\ncase {cid}:\n{phase_table(run)}")
        payload["phases"] = {cid: run.to_dict() for cid, run in phase_runs.items()}
        if trace:
            from ..profiling import phases as phasesmod
            (run,) = phase_runs.values()
            phasesmod.write_trace(run.buffer, trace, run.layout)
            typer.echo(f"trace: {trace} (open in Perfetto or chrome://tracing)")
    if json_out:
        write_json(json_out, payload)


def _kernels_table(results) -> str:
    """The kernels each call launched, by name (CUPTI): a submission's as much as ours."""
    from tabulate import tabulate
    rows = []
    for cid, res in results.items():
        for k in (res.cupti or {}).get("kernels", []):
            rows.append([cid, k["name"][:70], f"{k['per_call']:g}", f"{k['mean_us']:.2f}"])
    if not rows:
        return ""
    return tabulate(rows, headers=["case", "kernel (CUPTI)", "launches a call", "µs each"], tablefmt="github",
                    disable_numparse=True)
