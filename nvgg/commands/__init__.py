"""One module per verb, its command a module-level function (importable, callable by a test);
`register` attaches them to the app."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from . import ab, cases, compare, compile, profile, report, run, sol, tune
    for module in (cases, run, compare, ab, tune, sol, compile, profile, report):
        module.register(app)
