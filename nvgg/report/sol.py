"""`nvgg sol`'s table: a case's bytes, FLOPs and speed-of-light bounds on each profile."""

from __future__ import annotations

from ..cases import Case
from ..sol import Sol
from . import fmt_us, tabulate


def sol_rows(case: Case, device_sol: Sol | None, b200_sol: Sol) -> list:
    rows = []
    for s in ([device_sol] if device_sol else []) + [b200_sol]:
        rows.append([case.id, s.profile, s.data_path, f"{s.bytes / 1e6:.2f}", f"{s.flops / 1e9:.2f}",
                     fmt_us(s.memory_us), fmt_us(s.compute_us), fmt_us(s.sol_us), s.bound])
    return rows


SOL_HEADERS = ["case", "profile", "data path", "MB", "GFLOP", "memory µs", "compute µs", "SOL µs", "bound"]


def sol_table(rows) -> str:
    return tabulate(rows, headers=SOL_HEADERS, tablefmt="github")
