"""`nvgg report FILE.json [--plot FILE.png]`: a saved result file as tables, and as a picture."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import cases as casesmod
from .common import Command, check_distinct, check_writable, command, write_file


@command
def report_cmd(path: Annotated[str, typer.Argument(metavar="FILE", help="A file written by run, compare or profile --json.")],
               plot: Annotated[Optional[str], typer.Option("--plot", metavar="FILE", help="Draw time vs SOL and setup phases to this picture (PNG; .pdf, .svg and matplotlib's other formats by the name's extension).")] = None) -> None:
    """Show a saved result file as tables (and a plot)."""
    # here, not at the top: commands/__init__.py
    from ..report.results import geomean_table, results_table, setup_table
    from ..result import load
    check_writable("--plot", plot)
    check_distinct(("the result file", path), ("--plot", plot))
    if plot:
        from ..plot import image_format
        fmt = image_format(plot)
    results = load(path)
    typer.echo(results_table(results))
    means = geomean_table(results, {c.id for c in casesmod.benchmarks()})
    if means:
        typer.echo("\n" + means)
    typer.echo("\n" + setup_table(results))
    if plot:
        from ..plot import draw
        write_file("--plot", plot, draw(results, fmt))
        typer.echo(f"wrote {plot}", err=True)


def register(app: typer.Typer) -> None:
    app.command("report", cls=Command)(report_cmd)
