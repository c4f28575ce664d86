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
    device = kwargs.pop("device", None)
    args = {"path": str(Path(path).resolve()), "case": case.to_dict(),
            "device": str(device) if device else None, **{k: v for k, v in kwargs.items() if k in ("profile", "timer", "batch")}}
    raw, failure = run_child("nvgg.backends.submission", path, args, timeout_s=timeout_s)
    if raw is not None:
        return Result.from_dict(raw)
    return Result(case=case.id, strategy="submission", backend="submission", status="error", message=failure)


def run_child(module: str, path: str, args: dict, *, timeout_s: float | None = None,
              env: dict | None = None) -> tuple[dict | None, str]:
    """`python -m module JSON` with args["out"] set to a result file, for at most `timeout_s`
    (None: TIMEOUT_S): (what the child wrote there, "") or (None, why it wrote nothing: a
    timeout, or its exit code and last line of output)."""
    timeout_s = timeout_s or TIMEOUT_S
    if not Path(path).is_file():
        raise NvggError(f"submission {path} does not exist: pass the path of your submission.py")
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


def write_result(path: str, payload: dict) -> None:
    """The child's result file, written whole or not at all."""
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(payload))
    tmp.replace(path)


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
    write_result(args["out"], result.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(_worker(json.loads(sys.argv[1])))
