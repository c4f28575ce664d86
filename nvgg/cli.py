"""The typer app: one command a module under commands/ (parse, check, call one library function,
render). Expected failures are `NvggError`: one red line and a non-zero exit (the traceback only
with --verbose; commands/common.py `command`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from . import __version__
from .commands import register
from .commands.common import STATE

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Workbench for NVFP4 block-scaled grouped GEMM kernels: check, time, compare, profile.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nvgg {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")] = False,
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    STATE["verbose"] = verbose


def _click_errors():
    """The usage-error classes of the click that typer runs on: vendored as typer._click in
    recent typer releases, the click package in older ones."""
    try:
        from typer._click import exceptions
    except ImportError:  # typer that depends on click instead of carrying it
        from click import exceptions
    return exceptions.UsageError, getattr(exceptions, "NoArgsIsHelpError", ())


LISTS = ("--case", "--strategy", "--backend", "--tensormaps")  # options whose one value lists several


def repeated_option(argv: list[str], group=None) -> str | None:
    """The first option of the command line `argv` (without the program) given twice although it
    takes one value (`--case 1 --case 2`: the parser would keep the last and drop the first
    unsaid); None where there is none. Options that collect values (--submission) may repeat.
    `group`: the app's click command, where already built."""
    import typer.main
    group = group or typer.main.get_command(app)
    command = group.commands.get(argv[0]) if argv else None
    if command is None:
        return None
    single = {opt: p for p in command.params if p.param_type_name == "option" and not p.multiple
              and not p.count for opt in p.opts}
    seen: set = set()
    tokens = iter(argv[1:])
    for token in tokens:
        if token == "--":
            break
        name, has_value = token.split("=", 1)[0], "=" in token
        param = single.get(name)
        if param is None:
            continue
        if param in seen:
            return name
        seen.add(param)
        if not param.is_flag and not has_value:
            next(tokens, None)  # its value, whatever it looks like
    return None


NOT_A = {"float_parsing": "is not a number", "float_type": "is not a number", "int_parsing": "is not a whole number",
         "int_from_float": "is not a whole number", "int_type": "is not a whole number",
         "finite_number": "is not a finite number"}


def _in_our_words(exc) -> str:
    """The parser's message, where a value's type was wrong said in nvgg's words ("'abc' is not a
    number", "'x': choose leaderboard, ...") rather than the validation library's that typer
    passes on ("Input should be a valid number, unable to parse string as a number", "Value
    error, 'x' is not one of ...")."""
    import re
    errors = getattr(exc.__cause__, "errors", None)
    first = (errors() or [{}])[0] if callable(errors) else {}
    kind, given = first.get("type"), first.get("input")
    if kind in NOT_A:
        reason = f"{given!r} {NOT_A[kind]}"
    elif kind == "value_error":
        said = str(first.get("ctx", {}).get("error", ""))
        listed = re.fullmatch(r"'.*' is not one of (.*?)\.?", said)
        choices = re.findall(r"'([^']*)'", listed.group(1)) if listed else []
        reason = f"{given!r}: choose {', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else said
    else:
        return exc.format_message()
    return type(exc)(reason, ctx=exc.ctx, param=getattr(exc, "param", None)).format_message()


def run() -> None:
    """The app, with the parser's usage errors (an unknown option, a bad value, a missing
    argument, an option given twice) as one line and exit 2 like every other error, instead of a
    framed box."""
    import sys
    import typer.main
    usage_error, no_args = _click_errors()
    group = typer.main.get_command(app)  # built once: for the check and for the run
    twice = repeated_option(sys.argv[1:], group)
    if twice:
        several = " (several go in one value, comma-separated)" if twice in LISTS else ""
        typer.secho(f"nvgg: {twice} given twice: give it once{several}", err=True, fg=typer.colors.RED)
        sys.exit(2)
    try:
        code = group(standalone_mode=False)
    except no_args as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else "nvgg --help", err=True)
        sys.exit(2)
    except usage_error as exc:
        where = exc.ctx.command_path if exc.ctx else "nvgg"
        typer.secho(f"nvgg: {_in_our_words(exc)} (see {where} --help)", err=True, fg=typer.colors.RED)
        sys.exit(2)
    except typer.Abort:
        typer.secho("nvgg: interrupted", err=True, fg=typer.colors.RED)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


register(app)
