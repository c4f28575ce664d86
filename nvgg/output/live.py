"""A command's output files over its one report, rewritten as the report grows, so a run stopped
from outside (Ctrl-C, CI's timeout, a kill) keeps what it finished.

Each target is a path and a printer. A regular file is rewritten whole (atomically: files.py) on
every `update`, at most every `every_s` seconds where that is set (a sweep's file grows to
megabytes); a descriptor, a FIFO or a device takes one write, the whole report at `finish`, and
"-" is the report's text for stdout, handed back by `finish` for the command to print.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..errors import NvggError
from . import files
from .printer import Printer


@dataclass(frozen=True)
class Target:
    """A file a command writes: `path` ("-" for stdout) in `printer`'s format; `flag` names it in
    a message (the option it came from)."""

    flag: str
    path: str
    printer: Printer

    @property
    def stdout(self) -> bool:
        return self.path == "-"


class Live:
    """`report`'s files (`targets`), kept up to date as it grows (`update`) and finished once
    (`finish`)."""

    def __init__(self, report, targets: list[Target] | tuple = (), *, every_s: float = 0.0):
        self.report, self.targets, self.every_s = report, list(targets), every_s
        self._last = -float("inf")
        self._pending = False
        self._written: list[str] = []

    def update(self, *, force: bool = False) -> None:
        """The regular files rewritten now (`force`), or where `every_s` has passed since their
        last write (else at the next update that finds it passed, or at `finish`)."""
        if not force and time.monotonic() - self._last < self.every_s:
            self._pending = True
            return
        self._write(final=False)

    def flush(self) -> None:
        """The regular files rewritten where an update was held back since their last write."""
        if self._pending:
            self._write(final=False)

    def finish(self) -> str | None:
        """After the last change: the regular files brought up to date (`flush`), the streams
        written once; the text for stdout where a target is "-" (None where none is)."""
        self.flush()
        self._write(final=True, regular=False)
        out = next((t for t in self.targets if t.stdout), None)
        return out.printer.render(self.report) if out is not None else None

    def written(self) -> list[str]:
        """The files written so far (not stdout), in the targets' order."""
        return [t.path for t in self.targets if t.path in self._written]

    def _write(self, *, final: bool, regular: bool = True) -> None:
        """The regular files (`regular`) and, where `final`, the streams: each rendered whole and
        written through what its path is; a write that fails is one NvggError that says what the
        file misses."""
        for t in self.targets:
            if t.stdout:
                continue
            stream = files.streams(t.path)
            if (stream and not final) or (not stream and not regular):
                continue
            try:
                files.write_text(t.path, t.printer.render(self.report))
            except OSError as exc:
                raise NvggError(self._failed(t, exc)) from None
            if t.path not in self._written:
                self._written.append(t.path)
        if regular:
            self._last, self._pending = time.monotonic(), False

    def _failed(self, target: Target, exc: OSError) -> str:
        unit = self.report.unit
        if not unit:  # a document written once
            return (f"{target.flag} {target.path} could not be written ({files.reason(exc)}): free space there or "
                    "pass another file")
        return (f"writing {target.path} failed after {self.report.count()} {unit}(s) ({files.reason(exc)}): the "
                f"{unit}s since its last write are not in it")
