"""`nvgg run`: generate the case's inputs, run one strategy, check it against the exact
reference, time it the leaderboard's way, and report the gap to the speed of light."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import backends, cases as casesmod, env as envmod, runner
from ..cli import command
from ..errors import NvggError
from ..report import label, results_table
from .common import (CasesFile, JsonOut, LiveFiles, Profile, Progress, RowTimeout, Shape, TensorMaps, Timer, TimerOpt,
                     check_submission, mode_value, pick_cases)


def render(results, env: dict) -> str:
    lines = [f"card: {envmod.card(env)}   torch {env.get('torch')}   nvgg {env.get('nvgg')}"]
    for r in results:
        if r.inputs:
            lines.append(f"inputs: {r.inputs}")
            break
    lines.append(results_table(results))
    for r in results:
        if r.sol is not None and r.stats is not None:
            lines.append(f"SOL on {r.sol.profile}: {r.sol.sol_us:.3f} µs ({r.sol.bound}-bound, {r.sol.data_path} data path); "
                         f"native B200 SOL {r.sol_b200.sol_us:.3f} µs")
        elif r.sol_b200 is not None and r.stats is not None:
            lines.append(f"native B200 SOL {r.sol_b200.sol_us:.3f} µs (no GPU profile here: a CPU time has no gap to quote)")
        if r.stats is not None:
            st = r.stats
            lines.append(f"{r.case} {label(r)}: mean {st.mean_us:.3f} µs, median {st.median_us:.3f}, best {st.best_us:.3f}, "
                         f"worst {st.worst_us:.3f}, std {st.std_us:.3f}, {st.runs} runs x {st.batch} inputs [{st.method}, {st.clock}]")
        if r.setup_us:
            lines.append("setup: " + ", ".join(f"{k} {v / 1e3:.2f} ms" for k, v in r.setup_us.items()))
        lines.append(clocks_line(r.clocks))
    return "\n".join(line for line in lines if line)


def clocks_line(clocks: dict) -> str:
    """The card's clocks while the row was timed, one line ("" where none were sampled)."""
    if not clocks or not clocks.get("samples") or "sm_mhz" not in clocks:
        return f"clocks: {clocks['error']}" if clocks and clocks.get("error") else ""
    lo, mid, hi = clocks["sm_mhz"]
    state = clocks.get("throttled") or "not throttled"
    return (f"clocks while timed: SM {lo}-{hi} MHz (median {mid:g}), memory {clocks['mem_mhz'][0]}-{clocks['mem_mhz'][1]} MHz, "
            f"up to {clocks['temp_c_max']} °C and {clocks['power_w_max']} W, {clocks['samples']} samples; {state}")


def register(app: typer.Typer) -> None:
    @app.command("run")
    @command
    def run_cmd(case: Annotated[Optional[str], typer.Option("--case", help="Case id (see `nvgg cases`).")] = None,
                strategy: Annotated[Optional[str], typer.Option("--strategy", help="persistent, multistream, graph or sequential.")] = None,
                backend: Annotated[Optional[str], typer.Option("--backend", help="cute or torch (default: the best this machine has).")] = None,
                submission: Annotated[Optional[str], typer.Option("--submission", help="Run a competition-format submission.py instead.")] = None,
                tensormaps: TensorMaps = None, timeout: RowTimeout = None, shape: Shape = None,
                cases_file: CasesFile = None,
                profile: Profile = None, timer: TimerOpt = Timer.leaderboard, json_out: JsonOut = None) -> None:
        """Check and time one strategy on one case (default: the best strategy and backend here)."""
        picked = pick_cases(case, shape, cases_file)
        if len(picked) != 1:
            raise NvggError("nvgg run takes one case: use `nvgg compare` for several")
        the_case = picked[0]
        device = runner.default_device()
        if submission:
            if strategy or backend or tensormaps:
                raise NvggError("--submission brings its own launch scheme: drop --strategy/--backend/--tensormaps")
            row = runner.Row(the_case, submission=check_submission(submission), device=str(device), profile=profile,
                             timer=timer.value)
        else:
            be = backend or backends.best(device)
            st = strategy or runner.default_strategy(backends.get(be, tensormaps=mode_value(tensormaps)), device)
            row = runner.Row(the_case, st, be, mode_value(tensormaps), device=str(device), profile=profile,
                             timer=timer.value)
        files = LiveFiles(json_out, None, device, {c.id for c in casesmod.benchmarks()})
        runner.precheck(row)  # an unsupported row is one line before anything runs
        if the_case.flops > 1e9 and device.type != "cuda":
            typer.echo(f"case {the_case.id} on the CPU: {the_case.flops / 1e9:.0f} GFLOP a call, checked and timed on "
                       f"{runner.CPU_BATCH} inputs: this takes minutes", err=True)
        with Progress(1, "running") as progress:
            [result] = runner.run_many([row], timeout_s=timeout, on_start=lambda r: progress.start(r.name))
        if result.status == "unsupported":
            raise NvggError(result.message)
        files.add(result)
        if not files.finish():
            typer.echo(render([result], result.env or files.env))
        if result.status != "ok" or result.suspect:
            raise typer.Exit(1)
