"""Backends by name: `cute` (our CuTe DSL kernels), `torch` (library kernels). A user's
submission is run through `nvgg.backends.submission` instead: it brings its own launch scheme."""

from __future__ import annotations

import importlib
import importlib.util

import torch

from ..errors import NvggError
from .base import Backend, KernelInfo

NAMES = ("cute", "torch")


def get(name: str, *, tensormaps: str | None = None, point: dict | None = None) -> Backend:
    """The backend `name`; `tensormaps` (the cute backend's persistent kernel only, checked by
    selection.check_tensormaps) picks where its tensor maps come from, device or host; `point` a
    point of the cute kernels' space (nvgg/space.py) their persistent build follows."""
    key = name.strip().lower()
    if point and key != "cute":
        raise NvggError(f"the {key} backend has no choices to sweep: points are the cute backend's")
    if key == "torch":
        from .torch_lib import TorchBackend
        return TorchBackend()
    if key == "cute":
        # found, not imported: the DSL's import costs seconds, and a kernel on disk needs none
        if importlib.util.find_spec("cutlass") is None:
            raise NvggError("the cute backend needs CuTe DSL: pip install 'nvidia-cutlass-dsl==4.8.1'")
        from .cute import CuteBackend
        return CuteBackend(tensormaps, point=point)
    raise NvggError(f"unknown backend {name!r}: choose one of {', '.join(NAMES)} (or run your own submission)")


def best(device: torch.device) -> str:
    """The backend `run` uses when none is named: our kernels where they run, else the library."""
    from ..kernels import registry
    from .base import arch_of

    if device.type == "cuda" and registry.get(arch_of(device)) is not None:
        try:
            get("cute")
            return "cute"
        except (NvggError, ImportError):
            return "torch"
    return "torch"


__all__ = ["NAMES", "Backend", "KernelInfo", "best", "get"]
