"""`nvgg profile`: the same path under another observer: CUPTI kernel records (--cupti), Nsight
Compute (--ncu), or the instrumented persistent kernel (--phases)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import backends, cases as casesmod, env as envmod, runner
from ..cli import command
from ..errors import NvggError
from ..report import document, ncu_table, occupancy_table, phase_table, results_table, setup_table, write_json
from .common import CasesFile, JsonOut, Profile, Shape, TensorMaps, mode_value, pick_cases


def register(app: typer.Typer) -> None:
    @app.command("profile")
    @command
    def profile_cmd(case: Annotated[Optional[str], typer.Option("--case", help="Case id.")] = None,
                    strategy: Annotated[Optional[str], typer.Option("--strategy", help="persistent, multistream, graph or sequential.")] = None,
                    backend: Annotated[Optional[str], typer.Option("--backend", help="cute or torch.")] = None,
                    cupti: Annotated[bool, typer.Option("--cupti", help="CUPTI kernel records beside the event time.")] = False,
                    ncu: Annotated[bool, typer.Option("--ncu", help="Nsight Compute on the kernels of one call.")] = False,
                    phases: Annotated[bool, typer.Option("--phases", help="Timestamps inside the persistent kernel (instrumented build).")] = False,
                    occupancy: Annotated[bool, typer.Option("--occupancy", help="Theoretical and CUDA-API occupancy, SM coverage and waves.")] = False,
                    trace: Annotated[Optional[str], typer.Option("--trace", help="With --phases: write a Chrome/Perfetto trace here.")] = None,
                    clock_control: Annotated[str, typer.Option("--clock-control", help="ncu's clock control: none (default) or base.")] = "none",
                    out_dir: Annotated[str, typer.Option("--out", help="Folder for .ncu-rep and CSV files.")] = "nvgg-results",
                    tensormaps: TensorMaps = None, shape: Shape = None, cases_file: CasesFile = None,
                    profile: Profile = None, json_out: JsonOut = None) -> None:
        """Why is it slow: kernel time vs host overhead (CUPTI), counters and occupancy (ncu)."""
        picked = pick_cases(case, shape, cases_file)
        if len(picked) != 1:
            raise NvggError("nvgg profile takes one case")
        if not (cupti or ncu or phases or occupancy):
            raise NvggError("choose what to profile: --cupti, --ncu, --phases and/or --occupancy")
        the_case = picked[0]
        device = runner.default_device()
        if device.type != "cuda":
            raise NvggError("profiling needs a CUDA GPU and none is visible")
        be_name = backend or backends.best(device)
        mode = mode_value(tensormaps)
        st_name = strategy or runner.default_strategy(backends.get(be_name, tensormaps=mode), device)
        if phases:
            st_name = strategy or "persistent"
        payload = {}
        if cupti:
            result = runner.run_one(the_case, strategy=st_name, backend=be_name, profile=profile, timer="cupti",
                                    tensormaps=mode)
            typer.echo(f"card: {envmod.card(result.env)}")
            typer.echo(results_table([result]))
            typer.echo(setup_table([result]))
            payload = document([result], result.env, {c.id for c in casesmod.benchmarks()})
        if ncu:
            from ..profiling import ncu as ncumod
            report = ncumod.profile({"case": the_case.to_dict(), "strategy": st_name, "backend": be_name,
                                     "tensormaps": mode}, out_dir, clock_control=clock_control)
            report.sol_bytes = the_case.bytes
            typer.echo(ncu_table(report))
            payload["ncu"] = report.to_dict()
        if occupancy:
            from ..profiling.occupancy import report as occupancy_report
            rows = occupancy_report(the_case, backends.get(be_name, tensormaps=mode), st_name, device, profile)
            typer.echo(occupancy_table(rows))
            payload["occupancy"] = rows
        if phases:
            from ..profiling import device_phases, phases as phasesmod
            run = device_phases.run(the_case, profile=profile, tensormaps=mode)
            typer.echo(phase_table(run))
            payload["phases"] = run.to_dict()
            if trace:
                phasesmod.write_trace(run.buffer, trace, run.layout)
                typer.echo(f"trace: {trace} (open in Perfetto or chrome://tracing)")
        if json_out:
            write_json(json_out, payload)

