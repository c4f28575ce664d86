"""`nvgg cases`: the known cases with G, shapes, FLOPs and bytes."""

from __future__ import annotations

import json

import typer
from tabulate import tabulate

from ..cli import command
from .common import CasesFile, Shape, pick_cases


def register(app: typer.Typer) -> None:
    @app.command("cases")
    @command
    def cases_cmd(cases_file: CasesFile = None, shape: Shape = None,
                  as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
        """List the cases: id, kind, G, per-group m/n/k, GFLOP and MB moved."""
        cases = pick_cases(None, shape, cases_file, default="all")
        if as_json:
            typer.echo(json.dumps([dict(c.to_dict(), flops=c.flops, bytes=c.bytes) for c in cases], indent=2))
            return
        rows = [[c.id, c.kind, c.g, _fmt(c.m), _fmt(c.n), _fmt(c.k), f"{c.flops / 1e9:.2f}", f"{c.bytes / 1e6:.2f}"] for c in cases]
        typer.echo(tabulate(rows, headers=["case", "kind", "G", "m", "n", "k", "GFLOP", "MB"], tablefmt="github",
                            disable_numparse=True))


def _fmt(values) -> str:
    return str(values[0]) if len(set(values)) == 1 and len(values) > 1 else ",".join(map(str, values))
