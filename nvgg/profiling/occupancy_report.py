"""What `nvgg profile --occupancy` reports of built kernels: each kernel's theoretical occupancy
(nvgg/occupancy.py, the rules alone) beside the resident blocks the CUDA driver's occupancy API
gives for its cubin, and the tiles, SM coverage and waves of a strategy's launches."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .. import profiles, strategies
from ..backends.base import arch_of
from ..errors import NvggError
from ..kernels import cache as kcache
from ..occupancy import coverage, of_kernel


def device_blocks_per_sm(cubin_path: str, threads: int, dynamic_smem_bytes: int, name: str | None = None) -> int:
    """Resident blocks per SM by the CUDA occupancy API (cuOccupancyMaxActiveBlocksPerMultiprocessor)
    for the kernel `name` of a cubin (the first where none is named); needs a GPU and cuda-python's
    driver bindings."""
    import cuda.bindings.driver as cu

    torch.zeros(1, device="cuda")  # makes the primary context current for the driver calls
    err, module = cu.cuModuleLoadData(Path(cubin_path).read_bytes())
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuModuleLoadData: {err}")
    try:
        if name:
            err, fn = cu.cuModuleGetFunction(module, name.encode())
            if err != cu.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuModuleGetFunction({name}): {err}")
        else:
            err, count = cu.cuModuleGetFunctionCount(module)
            err, funcs = cu.cuModuleEnumerateFunctions(count, module)
            fn = funcs[0]
        cu.cuFuncSetAttribute(fn, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem_bytes)
        err, blocks = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, dynamic_smem_bytes)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor: {err}")
        return int(blocks)
    finally:
        cu.cuModuleUnload(module)


def report(case, backend, strategy_name: str, device, profile_name) -> list[dict]:
    """Per kernel: theoretical occupancy from its resources, resident blocks by the CUDA occupancy
    API, and the tiles, SM coverage and waves of the strategy's launches."""
    grouped = strategies.get(strategy_name).grouped
    prof = profiles.get(profile_name) if profile_name else profiles.for_gpu_name(torch.cuda.get_device_name(device))
    if prof is None:
        raise NvggError("no GPU profile matches this GPU: name one (b200, h100, h200)")
    arch = arch_of(device)
    tiles = backend.tiles(case, grouped=grouped, sms=prof.sm_count, arch=arch)
    rows = []
    for info in backend.compile(case, arch, grouped=grouped, sms=prof.sm_count):
        theo = of_kernel(info, prof)
        cubin = Path(info.extra.get("cache_dir", "")) / "kernel.cubin"
        api = None
        if cubin.is_file():
            record = Path(info.extra["cache_dir"]) / "info.json"
            symbol = kcache.kernel_symbol(json.loads(record.read_text())) if record.is_file() else None
            api = device_blocks_per_sm(str(cubin), info.threads, info.smem_bytes, symbol)
        rows.append({"kernel": info.name, "registers": info.registers, "smem_bytes": info.smem_bytes, "threads": info.threads,
                     "theoretical": theo.theoretical, "blocks_per_sm": theo.blocks_per_sm, "limited_by": theo.limited_by,
                     "api_blocks_per_sm": api})
    per_sm = max(rows[0]["blocks_per_sm"], 1) if rows else 1
    total = sum(tiles)
    ctas = min(total, prof.sm_count * per_sm) if grouped else total
    cover = coverage(ctas, prof, per_sm)
    for row in rows:
        row.update(tiles=total, sm_coverage=cover.coverage, waves=total / (prof.sm_count * per_sm))
    return rows
