"""One module per verb, its command a module-level function (importable, callable by a test);
`register` attaches them to the app.

A command module imports at its top only what reading the command line needs (typer, common.py,
the light modules its options name); the library below it, and torch with it, are imported in its
functions, once the command line has been read. So a usage error or --help answers at once,
rather than after torch's import, and tests/test_cli.py holds the app to that."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from . import ab, cases, compare, compile, profile, report, run, sol, tune
    for module in (cases, run, compare, ab, tune, sol, compile, profile, report):
        module.register(app)
