"""The environment a result was measured in: GPU, clocks at the time, driver, library versions."""

from __future__ import annotations

import functools
import importlib.metadata
import platform

import torch

from . import __version__, procs


def _version(dist: str, module: str | None = None) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        pass
    if module:  # importable without an installed distribution (a PYTHONPATH bundle)
        try:
            mod = importlib.import_module(module)
            return getattr(mod, "__version__", None)
        except Exception:
            return None
    return None


def _nvml(device: torch.device) -> dict:
    """What NVML says of the device: the static part once a process (`_static`), the clocks now."""
    from .profiles import nvml
    pynvml = nvml()  # started once a process
    if pynvml is None:
        return {}
    static = _static(device.index or 0)
    if not static:
        return {}
    try:
        h = static.pop("_handle")
        clocks = {"sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                  "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)}
    except Exception:
        return {}
    return {**static, **clocks}


_STATIC: dict[int, dict] = {}  # CUDA index -> NVML's name, index, UUID, driver: a row paid ~20 NVML calls, each row


def _static(index: int) -> dict:
    """NVML's fixed facts of CUDA device `index` (a copy, with its handle under "_handle"), read
    once a process; {} where NVML cannot be read."""
    if index not in _STATIC:
        from .clocks import _handle
        from .profiles import nvml
        pynvml = nvml()
        try:
            h = _handle(pynvml, torch.device("cuda", index))  # by PCI bus id: NVML's indices ignore CUDA_VISIBLE_DEVICES
            name = pynvml.nvmlDeviceGetName(h)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
            driver = pynvml.nvmlSystemGetDriverVersion()
            _STATIC[index] = {
                "_handle": h,
                "gpu": name.decode() if isinstance(name, bytes) else name,
                "gpu_index": pynvml.nvmlDeviceGetIndex(h),  # the host's numbering (nvidia-smi's), whatever this process sees
                "gpu_uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                "driver": driver.decode() if isinstance(driver, bytes) else driver,
                "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
            }
        except Exception:
            return {}
    return dict(_STATIC[index])


@functools.cache
def _fixed() -> dict:
    """The process's fixed facts, read once (the library versions through importlib.metadata)."""
    fixed = {
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cutlass_dsl": _version("nvidia-cutlass-dsl", "cutlass"),
        "nvgg": __version__,
    }
    layout = procs.layout()  # "fixed" in nvgg's workers (procs.fixed_layout); None off Linux
    return {**fixed, "address_layout": layout} if layout else fixed


def collect(device: torch.device) -> dict:
    env = {"device": str(device), "gpu": None, **_fixed()}
    if device.type == "cuda":
        index = device.index or 0
        env["gpu"] = torch.cuda.get_device_name(index)
        env["capability"] = "sm_%d%d" % torch.cuda.get_device_capability(index)
        env.update({k: v for k, v in _nvml(torch.device('cuda', index)).items() if v is not None})
    else:
        env["gpu"] = "none (CPU run)"
    return env


def card(env: dict) -> str:
    return env.get("gpu") or "CPU"
