"""Options and helpers shared by the commands."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import cases as casesmod
from ..errors import NvggError

CasesFile = Annotated[Optional[str], typer.Option("--cases", help="A YAML file of extra cases (cases: {id: {m, n, k, g, seed}}).")]
Shape = Annotated[Optional[str], typer.Option("--shape", help='An inline case: "m: [64, 128]; n: [256, 256]; k: [512, 512]; g: 2; seed: 7".')]
Profile = Annotated[Optional[str], typer.Option("--profile", help="GPU profile for the SOL (b200, h100, h200); default: the running GPU's.")]
SubmissionTimeout = Annotated[Optional[float], typer.Option(
    "--timeout", min=1.0, help="Seconds a submission may take on one case (its own process; default 300) before "
                               "it is stopped and reported as timed out.")]
JsonOut = Annotated[Optional[str], typer.Option("--json", help="Also write the results as JSON to this file.")]


class TensorMapMode(str, Enum):
    device = "device"
    host = "host"


TensorMaps = Annotated[Optional[TensorMapMode], typer.Option(
    "--tensormaps", case_sensitive=False,
    help="The persistent cute kernel's tensor maps: device (rewritten in the kernel on each group change) or "
         "host (every group's encoded on the host at prepare time). Default: the kernel's own (sm_100a: host; "
         "sm_90a has device only).")]


def mode_value(mode: TensorMapMode | None) -> str | None:
    return mode.value if mode is not None else None


def check_writable(flag: str, path: str | None) -> None:
    """An output path is checked before any work, so a long run never ends on a file it cannot write."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise NvggError(f"{flag} {path} is a folder: pass a file name")
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise NvggError(f"{flag} {path} cannot be written: pass a path in a writable folder")


def check_timeout(timeout: float | None, submission: str | None) -> None:
    """--timeout bounds a submission's process; alone it would bound nothing."""
    if timeout is not None and not submission:
        raise NvggError("--timeout bounds a submission's run: pass --submission FILE")


class Timer(str, Enum):
    leaderboard = "leaderboard"
    queue_ahead = "queue-ahead"
    per_call = "per-call"
    cupti = "cupti"


TimerOpt = Annotated[Timer, typer.Option("--timer", case_sensitive=False,
                                         help="leaderboard: the competition's batch-of-15 event timer; queue-ahead: the same "
                                              "with host launch latency hidden; per-call: each call timed alone; cupti: leaderboard plus "
                                              "CUPTI kernel records per call (kernel time, span, gaps, host overhead).")]


def pick_cases(case: str | None, shape: str | None, cases_file: str | None, default: str | None = None) -> list[casesmod.Case]:
    if shape and case:
        raise NvggError("give either --case or --shape, not both")
    if shape:
        return [casesmod.parse_shape(shape)]
    spec = case or default
    if spec is None:
        raise NvggError("no case given: pass --case ID (see `nvgg cases`) or --shape \"m: [...]; n: [...]; k: [...]\"")
    return casesmod.select(spec, cases_file)


def names(spec: str, known: tuple[str, ...], what: str) -> list[str]:
    if spec.strip().lower() == "all":
        return list(known)
    out = [s.strip().lower() for s in spec.split(",") if s.strip()]
    for name in out:
        if name not in known:
            raise NvggError(f"unknown {what} {name!r}: choose from {', '.join(known)} or all")
    return out
