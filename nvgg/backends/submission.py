"""A user's competition-format `submission.py`: imported in a worker process of its own
(procs.py, rows.py), once, and run there on each case through nvgg's own path (same inputs, same
check, same timer) as both launch scheme and kernel; a crash, hang, CUDA error or bad output in
user code becomes a failed Result with its reason, and the run goes on.

The file defines `custom_kernel(data) -> list of C tensors` and may import `task` (nvgg provides
it, nvgg/compat/task.py).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from ..cases import Case
from ..errors import NvggError
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
