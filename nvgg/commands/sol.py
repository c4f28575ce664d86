"""`nvgg sol`: the speed-of-light floor of a case on a GPU profile, beside the native B200's."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import profiles, sol as solmod
from ..report.sol import sol_rows, sol_table
from .common import (CasesFile, JsonOut, Profile, Shape, check_distinct, check_writable, command, emit_json, pick_cases,
                     read_files)


@command
def sol_cmd(case: Annotated[Optional[str], typer.Option("--case", metavar="IDS", help="Case id(s), comma-separated, or all / benchmarks.")] = None,
            shape: Shape = None, cases_file: CasesFile = None, profile: Profile = None,
            json_out: JsonOut = None) -> None:
    """Bytes, FLOPs and the floor: max(bytes / DRAM bandwidth, FLOPs / tensor peak of the data path)."""
    from ..result import document  # here, not at the top: commands/__init__.py
    check_writable("--json", json_out, stdout_ok=True)
    check_distinct(("--json", json_out), reads=read_files(cases_file=cases_file))
    cases = pick_cases(case, shape, cases_file, default="benchmarks")
    prof = profiles.resolve(profile) if profile else (profiles.resolve(None) if profiles.gpu_name() else None)
    b200 = profiles.get("b200")
    payload = [s.to_dict() for c in cases for s in ([solmod.sol(c, prof)] if prof and prof.name != "b200" else []) + [solmod.sol(c, b200)]]
    if emit_json(json_out, document("sol", sol=payload)):
        return
    rows = []
    for c in cases:
        device_sol = solmod.sol(c, prof) if prof and prof.name != "b200" else None
        rows += sol_rows(c, device_sol, solmod.sol(c, b200))
    typer.echo(sol_table(rows))
    if prof is None:
        typer.echo("(no GPU found: showing the B200 profile; pass --profile h100|h200 for a Hopper floor)")


def register(app: typer.Typer) -> None:
    app.command("sol")(sol_cmd)
