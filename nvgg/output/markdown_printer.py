"""The Markdown printer: the rows of `run` or `compare` as GitHub-flavoured Markdown (a CI job
summary): the card, the results table (verdicts included) with its notes as a list apart from it,
and the geometric means over the benchmarks."""

from __future__ import annotations

from ..report.results import geomean_table, results_table
from .printer import Printer, register


@register
class MarkdownPrinter(Printer):
    name = "markdown"
    kinds = ("results",)
    about = "GitHub-flavoured Markdown, a CI job summary"

    def render(self, report) -> str:
        from ..env import card  # (torch's import, only where a card is named)
        parts = [f"## {report.title}\n\ncard: {card(report.env)}\n", results_table(report.results, markdown=True)]
        means = geomean_table(report.results, report.bench)
        if means:
            parts.append("\n" + means)
        return "\n".join(parts) + "\n"
