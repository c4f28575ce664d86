"""The printer interface: every format nvgg writes (the terminal's tables, JSON, Markdown, JUnit
XML, ...) is a `Printer` that turns a report into text, found by its name.

A report is what a command has to say, built once and read by every printer (nvgg/report/: the
rows of `run` and `compare`, the cases of `ab`, the sweep of `tune`; `Document` here, a document
written once). Each offers what its kind has:

- `kind` (result.KINDS) and `title` ("nvgg compare"): what it is;
- `document()`: the versioned JSON (result.document), which every kind has;
- `text()`: the tables for people (run, compare, ab, tune);
- `outcomes()`: what the command judged, one report.Outcome a case and row (run, compare, ab);
- `unit` and `count()`: what it grows by as the command runs ("row", 3), for the messages of a
  write that fails halfway ("" for a document written once).

A printer names the kinds it prints (`kinds`); a command refuses, before any work, a format that
cannot print its report. A format is one file, nvgg/output/NAME_printer.py, whose printer
registers itself (`register`); `registry` finds every such file of the package on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import ClassVar

PRINTERS: dict[str, "Printer"] = {}  # name -> the printer, filled by `register`
_loaded = False  # whether the package's own printer files were imported


class Printer:
    """One output format. `name`: how a command asks for it; `kinds`: the reports it prints;
    `about`: what it is, in a few words (a command's help and refusals list them)."""

    name: ClassVar[str] = ""
    kinds: ClassVar[tuple[str, ...]] = ()
    about: ClassVar[str] = ""

    def prints(self, kind: str) -> bool:
        return kind in self.kinds

    def render(self, report) -> str:
        """The whole file for `report` as it stands (rewritten whole as the report grows)."""
        raise NotImplementedError


def register(cls: type[Printer]) -> type[Printer]:
    """A class decorator: the printer found by its name from now on. Two printers of one name
    are a mistake in the package, not a user's: ValueError."""
    if not cls.name or not cls.kinds:
        raise ValueError(f"printer {cls.__name__} needs a name and the kinds of report it prints")
    known = PRINTERS.get(cls.name)
    if known is not None and _where(type(known)) != _where(cls):  # (the same class again: its module reloaded)
        raise ValueError(f"two printers are named {cls.name!r}: {_where(type(known))} and {_where(cls)}")
    PRINTERS[cls.name] = cls()
    return cls


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def registry() -> dict[str, Printer]:
    """Every printer by name: the package's own (each file named *_printer.py, imported once here)
    and any registered since."""
    global _loaded
    if not _loaded:
        _loaded = True
        for found in pkgutil.iter_modules([str(Path(__file__).parent)]):
            if found.name.endswith("_printer"):
                importlib.import_module(f"{__package__}.{found.name}")
    return PRINTERS


def find(name: str) -> Printer | None:
    return registry().get(name)


def names(kind: str | None = None) -> list[str]:
    """The formats, sorted; `kind`: only those that print that kind of report."""
    return sorted(n for n, p in registry().items() if kind is None or p.prints(kind))


class Document:
    """A JSON document written once (`cases`, `sol`, `compile`, `profile`): a report with only a
    document."""

    unit = ""

    def __init__(self, payload: dict):
        self.payload = payload
        self.kind = payload["kind"]
        self.title = f"nvgg {self.kind}"

    def document(self) -> dict:
        return self.payload

    def count(self) -> int:
        return 0
