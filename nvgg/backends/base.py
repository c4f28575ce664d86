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

import functools

import torch

from ..cases import Case
from ..kernels.family import KernelInfo, Launch



class Backend:
    name: str = "?"
    supports_grouped: bool = False  # one launch for all groups (the persistent strategy)

    def check(self, case: Case, device: torch.device) -> None:
        raise NotImplementedError

    def compile(self, case: Case, arch: str, *, grouped: bool = False, sms: int | None = None) -> list[KernelInfo]:
        """The kernels the launches would run, compiled (`sms`: the GPU's SM count where a choice
        of kernel depends on it; None for a nominal one)."""
        return []

    def tiles(self, case: Case, *, grouped: bool = False, sms: int | None = None, arch: str | None = None) -> list[int]:
        """Output tiles each launch covers on `arch` (one entry a launch: a group's, or all groups'
        for a grouped launch); [] where the backend cannot say (library kernels)."""
        return []

    def check_grouped(self, case: Case, device: torch.device) -> None:
        """What the persistent strategy needs beyond `check` (NvggError if not met)."""

    def mode(self, arch: str) -> str:
        """Where the persistent kernel on `arch` takes its tensor maps from ("" where the backend
        has no such kernel)."""
        return ""

    def group_launcher(self, data, g: int) -> Launch:
        raise NotImplementedError

    def grouped_launcher(self, data) -> Launch:
        raise NotImplementedError


def arch_of(device: torch.device) -> str:
    """The compile target of a CUDA device: sm_90a on Hopper, sm_100a on B200 (the arch-specific
    targets our kernels need: wgmma, tcgen05)."""
    major, minor = _capability(torch.device(device).index or 0)
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> tuple[int, int]:
    """CUDA device `index`'s compute capability, asked once a process (each query takes
    milliseconds on some machines: lab log). NVML answers where CUDA has not started in this
    process: nvgg's own process checks rows with it and starts no CUDA runtime (a start costs
    tenths of a second: lab log); a worker, whose CUDA runs, asks CUDA."""
    if not torch.cuda.is_initialized():
        from ..profiles import nvml_query, visible_index
        physical = visible_index(index)
        found = None if physical is None else nvml_query(
            lambda nvml, handle: nvml.nvmlDeviceGetCudaComputeCapability(handle), physical)
        if found is not None:
            return int(found[0]), int(found[1])
    return torch.cuda.get_device_capability(index)
