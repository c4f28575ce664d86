"""GPU specifications for the speed-of-light model and resource checks.

Each `profiles/NAME.toml` holds one GPU's numbers with their sources in comments. The running
GPU is found through NVML (nvidia-ml-py) and matched by name; a profile named by the user overrides.
"""

from __future__ import annotations

import atexit
import os

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from . import data
from .errors import NvggError


@dataclass(frozen=True)
class Limits:
    smem_per_sm_bytes: int
    smem_per_block_bytes: int
    registers_per_sm: int
    registers_per_thread: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    tmem_bytes_per_sm: int | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    display: str
    arch: str
    nvml_names: tuple[str, ...]
    sm_count: int
    sol_clock_mhz: int
    dram_bandwidth_gbs: float
    tensor_tflops: dict = field(hash=False)
    limits: Limits = field(hash=False)
    measured: dict = field(default_factory=dict, hash=False)

    @property
    def has_fp4_tensor_cores(self) -> bool:
        return "fp4" in self.tensor_tflops

    @property
    def data_path(self) -> str:
        """The tensor-core type an NVFP4 GEMM runs at: native fp4 where it exists, else fp16
        (the operands are expanded to fp16 in-kernel; every e2m1 x e4m3 product is an fp16 value)."""
        return "fp4" if self.has_fp4_tensor_cores else "fp16"


def _load(path: Path) -> Profile:
    try:
        raw = tomllib.loads(path.read_text())
        return Profile(
            name=raw["name"], display=raw["display"], arch=raw["arch"],
            nvml_names=tuple(raw.get("nvml_names", [])), sm_count=int(raw["sm_count"]),
            sol_clock_mhz=int(raw["sol_clock_mhz"]), dram_bandwidth_gbs=float(raw["dram_bandwidth_gbs"]),
            tensor_tflops=dict(raw["tensor_tflops"]), limits=Limits(**raw["limits"]),
            measured=dict(raw.get("measured", {})),
        )
    except (KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise NvggError(f"profile file {path} is malformed ({exc}): fix it against profiles/h100.toml") from None


@lru_cache(maxsize=None)
def all_profiles() -> dict[str, Profile]:
    return {p.stem: _load(p) for p in sorted(data.folder("profiles").glob("*.toml"))}


def get(name: str) -> Profile:
    profiles = all_profiles()
    key = name.strip().lower()
    if key not in profiles:
        raise NvggError(f"unknown profile {name!r}: choose one of {', '.join(profiles)}")
    return profiles[key]


def for_gpu_name(gpu_name: str) -> Profile | None:
    """Map an NVML/torch device name to a profile: exact names first, then the longest prefix."""
    best, best_len = None, -1
    for profile in all_profiles().values():
        for known in profile.nvml_names:
            if gpu_name == known:
                return profile
            if gpu_name.startswith(known) and len(known) > best_len:
                best, best_len = profile, len(known)
    return best


_NVML: list = []  # [pynvml, or None where NVML cannot start], once this process asked


def nvml():
    """pynvml, started once for this process and shut down at its exit, or None without an NVIDIA
    driver or library. NVML counts its starts: an init and shutdown around every query cost tens
    of milliseconds each time (lab log), what a command paid several times before its first row."""
    if not _NVML:
        try:
            import pynvml
            pynvml.nvmlInit()
        except Exception:  # no driver, no library: nothing to ask
            _NVML.append(None)
        else:
            _NVML.append(pynvml)
            atexit.register(_shutdown, pynvml)
    return _NVML[0]


def _shutdown(pynvml) -> None:
    try:
        pynvml.nvmlShutdown()
    except Exception:
        pass


def nvml_query(query, index: int = 0):
    """`query(pynvml, handle)` on GPU `index` through NVML, or None when there is no NVIDIA
    driver, library or device, or the query fails."""
    nv = nvml()
    if nv is None:
        return None
    try:
        return query(nv, nv.nvmlDeviceGetHandleByIndex(index))
    except Exception:  # no such device, a query the driver lacks: nothing to ask
        return None


def visible_index(cuda_index: int = 0) -> int | None:
    """NVML's index of CUDA's device `cuda_index`: through CUDA_VISIBLE_DEVICES where it lists
    indices; None where it names devices otherwise (UUIDs, MIG), which NVML numbers apart."""
    listed = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    if not listed:
        return cuda_index
    if not all(x.isdigit() for x in listed) or cuda_index >= len(listed):
        return None
    return int(listed[cuda_index])


def gpu_name() -> str | None:
    """Name of GPU 0 through NVML, or None when there is no NVIDIA driver."""
    name = nvml_query(lambda nvml, handle: nvml.nvmlDeviceGetName(handle))
    return name.decode() if isinstance(name, bytes) else name


def resolve(name: str | None) -> Profile:
    """The profile to use: the one named, else the running GPU's, else an actionable error."""
    if name:
        return get(name)
    detected = gpu_name()
    if detected is None:
        raise NvggError("no GPU found to pick a profile from: name one "
                        f"({', '.join(all_profiles())})")
    profile = for_gpu_name(detected)
    if profile is None:
        raise NvggError(f"no profile matches the GPU {detected!r}: name one "
                        f"({', '.join(all_profiles())}) or add profiles/<name>.toml")
    return profile
