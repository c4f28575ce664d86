"""A user's competition-format `submission.py`: imported in a worker process of its own
(isolation.py), once, and run there on each case through nvgg's own path (same inputs, same
check, same timer) as both launch scheme and kernel; a crash, hang, CUDA error or bad output in
user code becomes a failed Result with its reason, and the run goes on.

The file defines `custom_kernel(data) -> list of C tensors` and may import `task` (nvgg provides
it, nvgg/compat/task.py). `run_child` runs a module of nvgg's on a submission in a process of its
own with its own environment (the probe marks on or off: profiling/submission_phases.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from ..cases import Case
from ..errors import NvggError
from ..isolation import TIMEOUT_S
from ..strategies.base import Prepared, Strategy
from .base import Backend

COMPAT_DIR = Path(__file__).resolve().parent.parent / "compat"


class SubmissionBackend(Backend):
    """An imported submission module as a backend (in the worker that runs its rows)."""

    def __init__(self, module):
        self.module, self.name = module, "submission"

    def check(self, case: Case, device: torch.device) -> None:
        return None


class AsSubmitted(Strategy):
    """The submission is its own launch scheme: one call of custom_kernel per input."""

    name = "submission"
    needs_gpu = False
    grouped = False

    def prepare(self, backend: SubmissionBackend, data) -> Prepared:
        kernel = backend.module.custom_kernel
        return Prepared(lambda: kernel(data))


def load(path: str | Path):
    path = Path(path)
    if not path.is_file():
        raise NvggError(f"submission {path} does not exist: pass the path of your submission.py")
    for extra in (str(COMPAT_DIR), str(path.resolve().parent)):
        if extra not in sys.path:
            sys.path.insert(0, extra)
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise NvggError(f"submission {path} failed to import: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(module, "custom_kernel", None)):
        raise NvggError(f"submission {path} defines no custom_kernel(data): the competition's entry point")
    return module


def run_submission(path: str, case: Case, *, timeout_s: float | None = None, **kwargs):
    """The submission on one case in a worker of its own, for at most `timeout_s` (None: the
    isolation default); always a Result."""
    from ..runner import Row, run_many
    if not Path(path).is_file():
        raise NvggError(f"submission {path} does not exist: pass the path of your submission.py")
    device = kwargs.pop("device", None)
    row = Row(case, submission=str(Path(path).resolve()), device=str(device) if device else None,
              **{k: v for k, v in kwargs.items() if k in ("profile", "timer", "batch")})
    return run_many([row], timeout_s=timeout_s)[0]


def run_child(module: str, args: dict, *, timeout_s: float | None = None,
              env: dict | None = None) -> tuple[dict | None, str]:
    """`python -m module JSON` with args["out"] set to a result file, for at most `timeout_s`
    (None: TIMEOUT_S): (what the child wrote there, "") or (None, why it wrote nothing: a
    timeout, or its exit code and last line of output). The child loads args["path"] itself and
    says so where it cannot."""
    timeout_s = timeout_s or TIMEOUT_S
    with tempfile.TemporaryDirectory(prefix="nvgg-sub-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", module, json.dumps(dict(args, out=str(out)))]
        full_env = dict(os.environ, **(env or {}))
        root = str(Path(__file__).resolve().parent.parent.parent)
        full_env["PYTHONPATH"] = root + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=full_env)
        except subprocess.TimeoutExpired:
            return None, f"submission timed out after {timeout_s:.0f} s (hang or far too slow)"
        if out.is_file():
            return json.loads(out.read_text()), ""
        tail = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line.strip()]
        return None, f"submission process exited with code {proc.returncode}: {tail[-1] if tail else 'no output'}"
