"""The table printer: a report's tables for people (tabulate, as the terminal shows them), from
the report's own `text()` (nvgg/report/: a kind's tables beside its document)."""

from __future__ import annotations

from .printer import Printer, register


@register
class TablePrinter(Printer):
    name = "table"
    kinds = ("results", "ab", "tune")
    about = "the tables the terminal shows"

    def render(self, report) -> str:
        return report.text()
