"""The GPUs a command spreads its rows over (`--gpus all|0,1,...`), checked before any work.

Indices are CUDA's among the GPUs this process sees (through CUDA_VISIBLE_DEVICES, as the
workers will be given them: procs.environment). They are read through NVML, so nvgg's own process
starts no CUDA context. Refused in one line: no GPU, an index not there, one named twice, an empty
or malformed list, and GPUs of different models (a row's time on one could not stand beside
another's; a sweep's winner would be the card's, not the point's). Each row's result records the
GPU that measured it (env.collect: `gpu_index`, NVML's index on the host, and `gpu_uuid`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import NvggError, no_gpu


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


def parse(spec: str, seen: list[Gpu] | None = None) -> list[Gpu]:
    """`--gpus`'s value: "all" or distinct indices ("0,1"), each a visible GPU, all one model."""
    seen = visible() if seen is None else seen
    text = spec.strip().lower()
    if not seen:
        raise no_gpu(f"--gpus {spec}: no GPU is visible here (no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them "
                     "all): run on a GPU machine, or drop --gpus")
    have = f"this host shows {len(seen)} GPU(s): {', '.join(str(g.index) for g in seen)}"
    if text == "all":
        picked = list(seen)
    else:
        parts = [p.strip() for p in text.split(",")]
        if not text or not all(p.isdigit() for p in parts):
            raise NvggError(f"--gpus {spec!r}: pass all, or GPU indices separated by commas (like 0,1); {have}")
        numbers = [int(p) for p in parts]
        twice = sorted({n for n in numbers if numbers.count(n) > 1})
        if twice:
            raise NvggError(f"--gpus {spec}: GPU {', '.join(map(str, twice))} named twice: name each GPU once")
        missing = [n for n in numbers if n >= len(seen)]
        if missing:
            raise NvggError(f"--gpus {spec}: no GPU {', '.join(map(str, missing))}; {have}")
        picked = [seen[n] for n in numbers]
    models = sorted({g.name for g in picked})
    if len(models) > 1:
        which = "; ".join(f"{g.index}: {g.name}" for g in picked)
        raise NvggError(f"--gpus {spec}: GPUs of different models ({which}): their times cannot stand side by side; "
                        "pass GPUs of one model")
    return picked


def indices(picked: list[Gpu] | None) -> list[int] | None:
    """The workers' GPUs (procs.Pool's `gpu`), None where --gpus was not given."""
    return [g.index for g in picked] if picked else None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
