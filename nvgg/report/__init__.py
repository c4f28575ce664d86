"""What nvgg says, for people and for scripts, built once from the same rows: a module a kind of
report (results.py: `run` and `compare`; ab.py; tune.py; profile.py; sol.py), each with its tables
and its JSON document (result.document); here the cells every table writes the same way (a time,
a row's name, its check) and `Outcome`, what a command judged of a row. The formats themselves are
printers (nvgg/output); the baseline's gate is nvgg/baseline.py."""

from __future__ import annotations

from dataclasses import dataclass

import tabulate as tabulate_module


def fmt_us(x: float | None) -> str:
    """µs to read at a glance: 3 significant digits and more, thousands grouped (a CPU run's
    3,424,784)."""
    if x is None:
        return "—"
    return f"{x:,.0f}" if x >= 10_000 else f"{x:.1f}" if x >= 100 else f"{x:.2f}" if x >= 10 else f"{x:.3f}"


def label(result) -> str:
    """strategy/backend, with the persistent kernel's tensor-map mode where one was used:
    persistent[host]/cute; a submission by its file name: submission[mine.py]."""
    variant = getattr(result, "tensormaps", "") or getattr(result, "source", "")
    strategy = f"{result.strategy}[{variant}]" if variant else result.strategy
    return strategy if result.backend in ("submission", None) else f"{strategy}/{result.backend}"


def status_text(r) -> str:
    if r.status == "ok" and r.suspect:
        return "SUSPECT"
    return {"ok": "ok", "wrong": "WRONG", "error": "ERROR", "unsupported": "n/a"}[r.status]


def tabulate(rows, headers, tablefmt: str = "github", **kwargs) -> str:
    """tabulate's table without the two spaces it adds to every header (a run's table in 100
    columns); cells as given, never parsed as numbers."""
    saved, tabulate_module.MIN_PADDING = tabulate_module.MIN_PADDING, 0
    try:
        return tabulate_module.tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True, **kwargs)
    finally:
        tabulate_module.MIN_PADDING = saved


NOTE_LEN = 24  # a check or verdict text longer than this is a numbered note under a terminal table


def check_text(r) -> str:
    """The check column: the status, and why where it is not plain ok (a failure's message, a
    flag's sentence)."""
    if r.status != "ok":
        return status_text(r) + (f": {r.message}" if r.message else "")
    if r.flags:
        return status_text(r) + ": " + "; ".join(f.text for f in r.flags)
    return "ok"


@dataclass(frozen=True)
class Outcome:
    """One thing a command judged: a case's row (or a version of an A/B), in the case's `group`.
    `verdict`: "passed"; "failed" (a regression, a wrong or suspect result); "error" (the row
    could not finish: a crash, a timeout, an exception); "skipped" (it cannot run here). `kind`
    classes the reason ("regression", "wrong", "suspect", ...), `message` says it in a line,
    `detail` is what the row says beside it (its time, its check, its class), `seconds` its wall
    time."""

    group: str
    name: str
    seconds: float = 0.0
    verdict: str = "passed"
    kind: str = ""
    message: str = ""
    detail: str = ""
