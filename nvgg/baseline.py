"""The baseline's regression gate: an earlier result file read as rows by `row_key`, and each row of
this run judged against its own (gate.compare), the verdict kept on the row (`Result.gate`)."""

from __future__ import annotations

from pathlib import Path

from . import result as resultmod
from .report import label
from .result import row_key


def load_baseline(path: str | Path) -> dict[tuple[str, str, str, str], dict]:
    """An earlier result file's rows by `row_key` (any format this nvgg reads, migrated); checked
    whole before any work starts."""
    return {row_key(r): r for r in resultmod.read_results(path, "baseline")}


def in_baseline(row, baseline: dict) -> bool:
    """Whether a row about to run (result.Row) has a row to be judged against in `baseline`
    (load_baseline); a persistent row whose tensor-map mode is the default matches any mode."""
    if row.submission:
        key = (row.case.id, "submission", "submission", row.label)
        return key in baseline
    head = (row.case.id, row.strategy or "", row.backend or "")
    return any(k[:3] == head and (row.tensormaps is None or k[3] == row.tensormaps) for k in baseline)


def gate(results, baseline: dict, max_regression_pct: float) -> list[str]:
    """Each result against its baseline row (gate.compare, kept in result.gate); the lines naming
    the rows that fail the gate. Rows absent from the baseline are not judged."""
    from dataclasses import replace

    from .gate import compare
    out = []
    for r in results:
        key = row_key(r)
        old, other_mode = baseline.get(key), ""
        if old is None and r.tensormaps:
            # the mode came from the kernel's default or a config map's point (compare --config against a
            # default run): the baseline's one row of that case, strategy and backend, in whatever mode
            same = [(k, v) for k, v in baseline.items() if k[:3] == key[:3] and k[3]]
            if len(same) == 1:
                (_, _, _, other_mode), old = same[0]
        if old is None:
            continue
        found = compare(r.to_dict(), old, max_regression_pct)
        if other_mode:
            found = replace(found, reason="; ".join(x for x in (found.reason, f"against the baseline's {other_mode} maps") if x))
        r.gate = found
        if found.fails:
            out.append(f"{r.case} {label(r)}: {found.text()}")
    return out
