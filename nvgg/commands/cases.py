"""`nvgg cases`: the known cases with G, shapes, FLOPs and bytes."""

from __future__ import annotations

import typer
from tabulate import tabulate

from .common import CasesFile, JsonOut, Shape, check_distinct, check_writable, command, emit_json, pick_cases, read_files


@command
def cases_cmd(cases_file: CasesFile = None, shape: Shape = None,
              json_out: JsonOut = None) -> None:
    """List the cases: id, kind, G, per-group m/n/k, GFLOP and MB moved."""
    from ..result import document  # here, not at the top: commands/__init__.py
    check_writable("--json", json_out, stdout_ok=True)
    check_distinct(("--json", json_out), reads=read_files(cases_file=cases_file))
    cases = pick_cases(None, shape, cases_file, default="all")
    if emit_json(json_out, document("cases", cases=[dict(c.to_dict(), flops=c.flops, bytes=c.bytes) for c in cases])):
        return
    rows = [[c.id, c.kind, c.g, _fmt(c.m), _fmt(c.n), _fmt(c.k), f"{c.flops / 1e9:.2f}", f"{c.bytes / 1e6:.2f}"] for c in cases]
    typer.echo(tabulate(rows, headers=["case", "kind", "G", "m", "n", "k", "GFLOP", "MB"], tablefmt="github",
                        disable_numparse=True))


def register(app: typer.Typer) -> None:
    app.command("cases")(cases_cmd)


def _fmt(values) -> str:
    return str(values[0]) if len(set(values)) == 1 and len(values) > 1 else ",".join(map(str, values))
