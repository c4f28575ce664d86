"""The GPUs this process sees, for a command that spreads its rows over several (the option's
parsing and refusals: commands/common.py `parse_gpus`).

Indices are CUDA's among the GPUs this process sees (through CUDA_VISIBLE_DEVICES, as the
workers will be given them: procs.environment). They are read through NVML, so nvgg's own process
starts no CUDA context. Each row's result records the GPU that measured it (env.collect:
`gpu_index`, NVML's index on the host, and `gpu_uuid`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass



@dataclass(frozen=True)
class Gpu:
    index: int        # CUDA's index among the visible GPUs (what --gpus names)
    name: str
    uuid: str


def visible() -> list[Gpu]:
    """The GPUs this process sees, in CUDA_VISIBLE_DEVICES's order where it is set (by index or
    UUID), else every GPU NVML counts; [] without a driver."""
    from .profiles import nvml
    nv = nvml()
    if nv is None:
        return []
    try:
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        found = [(_text(nv.nvmlDeviceGetName(h)), _text(nv.nvmlDeviceGetUUID(h))) for h in handles]
    except Exception:  # a driver that answers nothing: no GPU to spread over
        return []
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [Gpu(i, name, uuid) for i, (name, uuid) in enumerate(found)]
    out = []
    for entry in (x.strip() for x in listed.split(",")):
        if entry.isdigit() and int(entry) < len(found):
            hit = found[int(entry)]
        else:
            hit = next((f for f in found if entry and f[1].startswith(entry if entry.startswith("GPU-") else "GPU-" + entry)), None)
        if hit is None:  # CUDA stops at the first entry it cannot use (a MIG device, a typo)
            break
        out.append(Gpu(len(out), *hit))
    return out


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
