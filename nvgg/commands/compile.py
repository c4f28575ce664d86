"""`nvgg compile`: build a strategy's kernels for a target arch without a GPU; report resources."""

from __future__ import annotations

import json
import os
from typing import Annotated, Optional

import typer
from tabulate import tabulate

from .. import backends, profiles, strategies
from ..profiling import occupancy
from ..cli import command
from .common import CasesFile, Shape, pick_cases


def register(app: typer.Typer) -> None:
    @app.command("compile")
    @command
    def compile_cmd(arch: Annotated[str, typer.Option("--arch", help="Target, e.g. sm_90a.")] = "sm_90a",
                    case: Annotated[Optional[str], typer.Option("--case", help="Case id(s).")] = None,
                    strategy: Annotated[str, typer.Option("--strategy", help="persistent, multistream, graph or sequential.")] = "persistent",
                    backend: Annotated[str, typer.Option("--backend", help="The backend whose kernels to build.")] = "cute",
                    shape: Shape = None, cases_file: CasesFile = None,
                    as_json: bool = typer.Option(False, "--json", help="Print {\"kernels\": [...]} as JSON.")) -> None:
        """Compile only (no GPU needed): name, arch, registers, shared memory, threads per kernel."""
        os.environ.setdefault("CUTE_DSL_ARCH", arch)
        picked = pick_cases(case, shape, cases_file)
        st = strategies.get(strategy)
        be = backends.get(backend)
        limits = profiles.for_arch(arch)
        kernels = []
        for c in picked:
            for info in be.compile(c, arch, grouped=st.grouped):
                occ = occupancy.theoretical(info.registers, info.smem_bytes, info.threads, limits)
                kernels.append(dict(info.to_dict(), case=c.id, strategy=st.name, theoretical_occupancy=occ.theoretical,
                                    blocks_per_sm=occ.blocks_per_sm, occupancy_limited_by=occ.limited_by))
        if as_json:
            typer.echo(json.dumps({"kernels": kernels}, indent=2, default=str))
            return
        cols = ["case", "name", "arch", "registers", "smem_bytes", "threads", "theoretical_occupancy", "occupancy_limited_by"]
        typer.echo(tabulate([[k.get(c) for c in cols] for k in kernels], headers=cols, tablefmt="github"))
