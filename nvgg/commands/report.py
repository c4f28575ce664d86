"""`nvgg report FILE.json [--plot FILE.png]`: a saved result file as tables, and as a picture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..cli import command
from ..errors import NvggError
from ..report import geomean_table, results_table, setup_table
from ..runner import Result


def load(path: str) -> list[Result]:
    try:
        raw = json.loads(Path(path).read_text())
        return [Result.from_dict(r) for r in raw["results"]]
    except FileNotFoundError:
        raise NvggError(f"{path} does not exist: write one with --json FILE") from None
    except (ValueError, KeyError, TypeError):
        raise NvggError(f"{path} is not an nvgg result file (JSON with 'results')") from None


def register(app: typer.Typer) -> None:
    @app.command("report")
    @command
    def report_cmd(path: Annotated[str, typer.Argument(help="A file written by --json.")],
                   plot: Annotated[Optional[str], typer.Option("--plot", help="Draw time vs SOL and setup phases to this PNG.")] = None) -> None:
        """Show a saved result file as tables (and a plot)."""
        from .. import cases as casesmod
        results = load(path)
        typer.echo(results_table(results))
        means = geomean_table(results, {c.id for c in casesmod.benchmarks()})
        if means:
            typer.echo("\n" + means)
        typer.echo("\n" + setup_table(results))
        if plot:
            from ..plot import draw
            draw(results, plot)
            typer.echo(f"plot: {plot}")
