"""What a backend is: the thing a strategy launches.

A backend answers three questions, in this order, and the strategies rely on nothing else:

- `check(case, device)`: can it run this case here? Raises `NvggError` naming the constraint
  (a shape rule, an arch, a missing GPU) before anything is allocated or compiled.
- `compile(case, arch)`: build whatever the case needs for a target arch without a GPU, cached;
  returns one `KernelInfo` per kernel (empty for library backends).
- `group_launcher(data, g)` / `grouped_launcher(data)`: done outside the timed region (argument
  tables, descriptors, compiled handles); each returns a zero-argument callable that only
  launches, on torch's current stream, and writes the group's C in place (data's c tensors).

`data` is the competition's tuple `(abc, sfasfb, sfasfb_reordered, problem_sizes)`:
abc[g] = (a [m, k/2, 1] float4_e2m1fn_x2, b [n, k/2, 1], c [m, n, 1] float16), sfasfb[g] the
plain e4m3 scales [mn, k/16, 1] (on the CPU, as the competition leaves them), and
sfasfb_reordered[g] the same scales in cuBLAS's blocked layout on the device (see inputs.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

import torch

from ..cases import Case

Launch = Callable[[], None]


@dataclass(frozen=True)
class KernelInfo:
    """Resources of one compiled kernel, read from the compiler's output."""

    name: str
    arch: str
    registers: int
    smem_bytes: int
    threads: int
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(out.pop("extra"))
        return out


class Backend:
    name: str = "?"
    supports_grouped: bool = False  # one launch for all groups (the persistent strategy)

    def check(self, case: Case, device: torch.device) -> None:
        raise NotImplementedError

    def compile(self, case: Case, arch: str, *, grouped: bool = False, sms: int | None = None) -> list[KernelInfo]:
        """The kernels the launches would run, compiled (`sms`: the GPU's SM count where a choice
        of kernel depends on it; None for a nominal one)."""
        return []

    def tiles(self, case: Case, *, grouped: bool = False, sms: int | None = None) -> list[int]:
        """Output tiles each launch covers (one entry a launch: a group's, or all groups' for a
        grouped launch); [] where the backend cannot say (library kernels)."""
        return []

    def group_launcher(self, data, g: int) -> Launch:
        raise NotImplementedError

    def grouped_launcher(self, data) -> Launch:
        raise NotImplementedError
