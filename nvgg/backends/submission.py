"""A user's competition-format `submission.py`, run in a subprocess with a timeout.

The file defines `custom_kernel(data) -> list of C tensors` and may import `task` (nvgg provides
it, nvgg/compat/task.py). The child process runs nvgg's own path (same inputs, same check, same
timer) with the submission as both launch scheme and kernel, and writes its Result as JSON; a
crash, hang, CUDA error or bad output in user code becomes a failed Result with its reason, and
the parent goes on with the other strategies.
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

from ..cases import Case, make_case
from ..errors import NvggError
from ..strategies.base import Prepared, Strategy
from .base import Backend

COMPAT_DIR = Path(__file__).resolve().parent.parent / "compat"
TIMEOUT_S = 300.0


class SubmissionBackend(Backend):
    """In-process view of an imported submission module (used inside the child process)."""

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
    """Run the submission on one case in a child process, for at most `timeout_s` (None:
    TIMEOUT_S); always returns a Result."""
    from ..runner import Result
    timeout_s = timeout_s or TIMEOUT_S
    device = kwargs.pop("device", None)
    if not Path(path).is_file():
        raise NvggError(f"submission {path} does not exist: pass the path of your submission.py")
    with tempfile.TemporaryDirectory(prefix="nvgg-sub-") as tmp:
        out = Path(tmp) / "result.json"
        args = {"path": str(Path(path).resolve()), "case": case.to_dict(), "out": str(out),
                "device": str(device) if device else None, **{k: v for k, v in kwargs.items() if k in ("profile", "timer", "batch")}}
        cmd = [sys.executable, "-m", "nvgg.backends.submission", json.dumps(args)]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        failed = Result(case=case.id, strategy="submission", backend="submission", status="error")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            failed.message = f"submission timed out after {timeout_s:.0f} s (hang or far too slow)"
            return failed
        if out.is_file():
            return Result.from_dict(json.loads(out.read_text()))
        tail = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line.strip()]
        failed.message = f"submission process exited with code {proc.returncode}: {tail[-1] if tail else 'no output'}"
        return failed


def _worker(args: dict) -> int:
    from ..runner import Result, run_one
    raw = args["case"]
    case = make_case(raw["id"], raw["m"], raw["n"], raw["k"], raw["g"], raw["seed"], raw.get("kind", "user"))
    try:
        module = load(args["path"])
        result = run_one(case, strategy=AsSubmitted(), backend=SubmissionBackend(module),
                         device=torch.device(args["device"]) if args.get("device") else None,
                         profile=args.get("profile"), timer=args.get("timer") or "leaderboard", batch=args.get("batch"))
    except NvggError as exc:
        result = Result(case=case.id, strategy="submission", backend="submission", status="error", message=str(exc))
    except Exception as exc:  # user code: report, never crash the caller
        result = Result(case=case.id, strategy="submission", backend="submission", status="error",
                        message=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    tmp = Path(args["out"] + ".tmp")
    tmp.write_text(json.dumps(result.to_dict()))
    tmp.replace(args["out"])
    return 0


if __name__ == "__main__":
    sys.exit(_worker(json.loads(sys.argv[1])))
