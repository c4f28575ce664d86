"""`nvgg compile`: build a strategy's kernels for a target arch without a GPU; report resources."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer
from tabulate import tabulate

from .. import profiles, selection
from ..profiling import occupancy
from ..result import document
from .common import CasesFile, JsonOut, Shape, TensorMaps, check_writable, command, emit_json, mode_value, pick_cases

# the table's columns: a kernel's field and its heading
COLUMNS = {"case": "case", "name": "kernel", "registers": "registers", "smem_bytes": "shared memory B",
           "threads": "threads", "tmem_columns": "tensor memory cols", "cluster": "cluster", "stages": "stages",
           "compile_s": "compile s", "theoretical_occupancy": "occupancy", "occupancy_limited_by": "limited by"}


def register(app: typer.Typer) -> None:
    @app.command("compile")
    @command
    def compile_cmd(arch: Annotated[str, typer.Option("--arch", metavar="ARCH", help="Target: sm_90a (H100/H200) or sm_100a (B200).")] = "sm_90a",
                    case: Annotated[Optional[str], typer.Option("--case", metavar="IDS", help="Case id(s), all, benchmarks or tests.")] = None,
                    strategy: Annotated[str, typer.Option("--strategy", metavar="NAME", help="persistent, multistream, graph or sequential.")] = "persistent",
                    backend: Annotated[str, typer.Option("--backend", metavar="NAME", help="The backend whose kernels to build.")] = "cute",
                    tensormaps: TensorMaps = None, shape: Shape = None, cases_file: CasesFile = None,
                    json_out: JsonOut = None) -> None:
        """Compile only (no GPU needed): resources, tensor memory, cluster, stages, occupancy per kernel."""
        check_writable("--json", json_out, stdout_ok=True)
        os.environ.setdefault("CUTE_DSL_ARCH", arch)
        picked = pick_cases(case, shape, cases_file)
        be, st = selection.for_arch(strategy, backend, mode_value(tensormaps), arch)
        limits = profiles.for_arch(arch)
        kernels = []
        for c in picked:
            for info in be.compile(c, arch, grouped=st.grouped, sms=limits.sm_count):
                occ = occupancy.of_kernel(info, limits)
                kernels.append(dict(info.to_dict(), case=c.id, strategy=st.name, profile=limits.name,
                                    theoretical_occupancy=occ.theoretical, blocks_per_sm=occ.blocks_per_sm,
                                    occupancy_limited_by=occ.limited_by))
        if emit_json(json_out, document("compile", arch=arch, kernels=kernels)):
            return
        shown = [c for c in COLUMNS if any(k.get(c) is not None for k in kernels)]
        typer.echo(tabulate([[f"{k[c]:.1%}" if c == "theoretical_occupancy" else _cell(k.get(c)) for c in shown]
                             for k in kernels], headers=[COLUMNS[c] for c in shown], tablefmt="github",
                            disable_numparse=True))
        typer.echo(f"target {arch}, occupancy against the {limits.name} profile ({limits.sm_count} SMs); "
                   "--json FILE (or -) for the PTX and SASS paths and the rest")


def _cell(value):
    if isinstance(value, dict):
        return "/".join(f"{k} {v}" for k, v in value.items())
    if isinstance(value, list):
        return "x".join(str(v) for v in value)
    return value
