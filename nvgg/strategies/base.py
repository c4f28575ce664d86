"""What a strategy is: a launch scheme around a backend.

`prepare(backend, data)` runs outside the timed region and returns a `Prepared`: a zero-argument
`launch` that only launches work on torch's current stream (returning the outputs, or None when
it writes data's c tensors in place), plus the setup costs it paid, in microseconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from ..backends.base import Backend
from ..cases import Case
from ..errors import NvggError, no_gpu


@dataclass
class Prepared:
    launch: Callable[[], object]
    setup_us: dict[str, float] = field(default_factory=dict)
    # what the launch reads but does not reference itself: a CUDA graph replays raw addresses, so
    # the tensors its launchers hold (tables, argument buffers) must outlive it
    keep: tuple = ()


class Strategy:
    name: str = "?"
    needs_gpu: bool = True
    grouped: bool = False  # one launch for all groups: needs backend.supports_grouped

    def check(self, backend: Backend, case: Case, device: torch.device) -> None:
        if self.needs_gpu and device.type != "cuda":
            raise no_gpu(f"the {self.name} strategy needs a CUDA GPU and none is visible: "
                         "use the sequential strategy on this machine")
        if self.grouped and not backend.supports_grouped:
            raise NvggError(f"the {self.name} strategy needs a grouped kernel (one launch for all groups) "
                            f"and the {backend.name} backend has none: use the cute backend")
        if self.grouped:
            backend.check_grouped(case, device)

    def prepare(self, backend: Backend, data) -> Prepared:
        raise NotImplementedError


def group_launchers(backend: Backend, data) -> tuple[list[Callable[[], None]], float]:
    """The backend's per-group launchers and the host time spent building them (µs)."""
    t0 = time.perf_counter()
    launchers = [backend.group_launcher(data, g) for g in range(len(data[3]))]
    return launchers, (time.perf_counter() - t0) * 1e6
