"""`nvgg profile`: the same path under other observers: CUPTI kernel records (--cupti), Nsight
Compute (--ncu), occupancy (--occupancy), the instrumented persistent kernel (--phases); on the
benchmark cases unless --case narrows it, one table across the cases for each observer, and a
verdict a row from what was measured. `--submission FILE` profiles a user's submission.py in its
own process (CUPTI, Nsight Compute, and --phases: the marks its kernels write through nvgg.probe)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import backends, cases as casesmod, env as envmod, isolation, runner, verdict as verdictmod
from ..cli import command
from ..errors import NvggError
from ..report import (document, ncu_table, occupancy_table, phase_table, results_table, setup_table,
                      submission_phase_table, write_json)
from .common import (CasesFile, JsonOut, Profile, Progress, RowTimeout, Shape, TensorMaps, check_folder, check_submission, check_writable, emit_json,
                     mode_value, pick_cases)


def register(app: typer.Typer) -> None:
    @app.command("profile")
    @command
    def profile_cmd(case: Annotated[Optional[str], typer.Option("--case", help="Case id(s); default: the benchmarks.")] = None,
                    strategy: Annotated[Optional[str], typer.Option("--strategy", help="persistent, multistream, graph or sequential.")] = None,
                    backend: Annotated[Optional[str], typer.Option("--backend", help="cute or torch.")] = None,
                    submission: Annotated[Optional[str], typer.Option("--submission", help="Profile a competition-format submission.py (with --cupti, --ncu and/or --phases).")] = None,
                    cupti: Annotated[bool, typer.Option("--cupti", help="CUPTI kernel records beside the event time.")] = False,
                    ncu: Annotated[bool, typer.Option("--ncu", help="Nsight Compute on the kernels of one call.")] = False,
                    phases: Annotated[bool, typer.Option("--phases", help="Timestamps inside the kernel: our persistent kernel's instrumented build, or a submission's probe marks.")] = False,
                    occupancy: Annotated[bool, typer.Option("--occupancy", help="Theoretical and CUDA-API occupancy, SM coverage and waves.")] = False,
                    trace: Annotated[Optional[str], typer.Option("--trace", help="With --phases: write a Chrome/Perfetto trace here (one case).")] = None,
                    clock_control: Annotated[Optional[str], typer.Option("--clock-control", help="With --ncu: ncu's clock control, none (default) or base.")] = None,
                    out_dir: Annotated[Optional[str], typer.Option("--out", help="With --ncu: the folder for .ncu-rep and CSV files (default nvgg-results).")] = None,
                    tensormaps: TensorMaps = None, timeout: RowTimeout = None, shape: Shape = None,
                    cases_file: CasesFile = None, profile: Profile = None, json_out: JsonOut = None) -> None:
        """Why is it slow: kernel time vs host overhead (CUPTI), counters (ncu), occupancy, phases."""
        if not (cupti or ncu or phases or occupancy):
            raise NvggError("choose what to profile: --cupti, --ncu, --phases and/or --occupancy")
        if submission and (occupancy or strategy or backend or tensormaps):
            raise NvggError("a submission is profiled with --cupti, --ncu and --phases (its kernels' occupancy is in "
                            "ncu's Occupancy section); --occupancy, --strategy, --backend and --tensormaps need our kernels")
        if (clock_control is not None or out_dir is not None) and not ncu:
            raise NvggError("--clock-control and --out are Nsight Compute's: add --ncu, or drop them")
        if clock_control not in (None, "none", "base"):
            raise NvggError(f"--clock-control {clock_control!r}: choose none or base")
        clock_control, out_dir = clock_control or "none", out_dir or "nvgg-results"
        if ncu:
            check_folder("--out", out_dir)
        if trace and not phases:
            raise NvggError("--trace writes the phases inside the kernel: add --phases")
        if phases and not submission and (strategy not in (None, "persistent") or backend not in (None, "cute")):
            raise NvggError("--phases instruments the persistent cute kernel: drop --strategy/--backend, or profile "
                            "the other strategy without --phases")
        picked = pick_cases(case, shape, cases_file, default="benchmarks")
        if trace and len(picked) != 1:
            raise NvggError("--trace writes one case's phases: pass one --case")
        check_writable("--trace", trace)
        check_writable("--json", json_out, stdout_ok=True)
        if submission:
            submission = check_submission(submission)
        device = runner.default_device()
        if device.type != "cuda":
            raise NvggError("profiling needs a CUDA GPU and none is visible")
        mode = mode_value(tensormaps)
        be_name = backend or backends.best(device)
        st_name = strategy or ("persistent" if phases else runner.default_strategy(backends.get(be_name, tensormaps=mode), device))
        target = {"submission": str(submission)} if submission else {"strategy": st_name, "backend": be_name, "tensormaps": mode}
        results, ncu_reports, occ_rows, phase_runs, failures = {}, {}, [], {}, []
        # whatever launches kernels runs in the pool's workers (a fault or a hang costs that case:
        # a failed row or a failure line); ncu and a submission's phases run in processes of their own
        observers = [name for name, on in (("cupti", cupti), ("ncu", ncu), ("occupancy", occupancy), ("phases", phases)) if on]
        with isolation.Pool(timeout) as pool, Progress(len(picked), "profiling") as progress:
            for c in picked:
                progress.start(f"case {c.id} ({', '.join(observers)})")
                failed_before = len(failures)
                if cupti:
                    row = (runner.Row(c, submission=submission, profile=profile, timer="cupti") if submission else
                           runner.Row(c, st_name, be_name, mode, profile=profile, timer="cupti"))
                    results[c.id] = runner.run_isolated(pool, row)
                if ncu:
                    from ..profiling import ncu as ncumod
                    report = ncumod.profile(dict(target, case=c.to_dict()), out_dir, clock_control=clock_control)
                    report.sol_bytes = c.bytes
                    ncu_reports[c.id] = report
                if occupancy:
                    from ..profiling.occupancy import report as occupancy_report
                    occ_rows += [dict(row, case=c.id) for row in occupancy_report(
                        c, backends.get(be_name, tensormaps=mode), st_name, device, profile)]
                if phases and submission:
                    fatal = _submission_phases(submission, c, timeout, phase_runs, failures)
                    if fatal:
                        break
                elif phases:
                    try:
                        phase_runs[c.id] = pool.call("backend:cute", isolation.Call(
                            "nvgg.profiling.device_phases:run", {"case": c, "profile": profile, "tensormaps": mode}))
                    except (isolation.RowFailure, isolation.RowError, NvggError) as exc:
                        # a case the instrumented build got wrong, or could not run, costs that case
                        failures.append(f"case {c.id}: phases: {exc}")
                bad = len(failures) > failed_before or (cupti and results[c.id].status != "ok")
                progress.finish(f"case {c.id}", "failed" if bad else "done")
        _render(picked, results, ncu_reports, occ_rows, phase_runs, trace, json_out, device)
        _fail(failures)


def _submission_phases(path, case, timeout, runs: dict, failures: list) -> bool:
    """Profile one case's phases; its failure goes to `failures`. True: the failure is the
    submission's own (no marks, no import, a misused probe), so the other cases would fail alike."""
    from ..profiling import submission_phases
    try:
        runs[case.id] = run = submission_phases.run(path, case, timeout_s=timeout)
    except submission_phases.CaseFailure as exc:
        failures.append(str(exc))
        return False
    except NvggError as exc:
        failures.append(str(exc))
        return True
    failures += [f"case {case.id}: {e}" for e in run.errors]
    return False


def _fail(failures: list) -> None:
    """Everything measured is out (tables, JSON, trace); now each failure is one line and the exit is 2."""
    for line in failures[:-1]:
        typer.secho(f"nvgg: {line}", err=True, fg=typer.colors.RED)
    if failures:
        raise NvggError(failures[-1])


def _render(picked, results, ncu_reports, occ_rows, phase_runs, trace, json_out, device) -> None:
    """One table an observer across the cases; each CUPTI row's verdict with every observer's evidence."""
    payload: dict = {"cases": [c.id for c in picked]}
    shown: list[str] = []
    for cid, res in results.items():
        run = phase_runs.get(cid)
        report = (run.main if hasattr(run, "main") else run.report) if run else None
        found = verdictmod.judge(res, phases=report, ncu=ncu_reports.get(cid), behind=getattr(run, "behind", None))
        res.verdict = found.to_dict() if found else {}
    if results:
        env = next((r.env for r in results.values() if r.env), None) or envmod.collect(device)
        shown.append(f"card: {envmod.card(env)}")
        shown.append(results_table(list(results.values())))
        shown.append(setup_table(list(results.values())))
        shown.append(_kernels_table(results))
        payload.update(document(list(results.values()), env, {c.id for c in casesmod.benchmarks()}))
    if ncu_reports:
        shown.append(ncu_table(ncu_reports))
        payload["ncu"] = {cid: r.to_dict() for cid, r in ncu_reports.items()}
    if occ_rows:
        shown.append(occupancy_table(occ_rows))
        payload["occupancy"] = occ_rows
    if phase_runs:
        for cid, run in phase_runs.items():
            table = submission_phase_table(run) if hasattr(run, "kernels") else phase_table(run)
            shown.append(f"\ncase {cid}:\n{table}")
        payload["phases"] = {cid: run.to_dict() for cid, run in phase_runs.items()}
        if trace and phase_runs:
            from ..profiling import phases as phasesmod
            run = next(iter(phase_runs.values()))
            if hasattr(run, "kernels"):
                write_json(trace, phasesmod.chrome_trace_launches(run.layouts()))
            else:
                phasesmod.write_trace(run.buffer, trace, run.layout)
            typer.echo(f"wrote {trace} (a trace: open it in Perfetto or chrome://tracing)", err=True)
    if not emit_json(json_out, payload):
        typer.echo("\n".join(line for line in shown if line))


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
