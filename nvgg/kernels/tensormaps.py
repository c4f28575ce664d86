"""Tensor maps (CUtensorMap, the copy engine's 128-byte descriptors) made on the host, for both
architectures: the driver's encoder (the sm_90a kernels' templates), a table of every group's maps
built at prepare time (the `host` tensor-map mode), and a reader of the fields that describe the
tensor, for tests and reports.

Field positions (`fields`): the descriptor is opaque in the CUDA API. These are the positions CuTe
DSL 4.8.1's own encoder writes (its host code, read from the generated IR) and that the driver's
cuTensorMapEncodeTiled writes too (checked on an H100/H200 by the `gpu` tests): word 0 the global
address; word 1 bits 32-63 the byte stride of dimension 1 over 16, words 2-3 bits 0-31 those of
dimensions 2-3; word 4 bits 0-31 and 32-63 the sizes of dimensions 0 and 1 minus one, word 5 those
of dimensions 2 and 3; word 6 bits 56-63 and word 7 bytes 0-3 the box sizes minus one.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

MAP_BYTES = 128  # sizeof(CUtensorMap), CUDA driver API
# where a persistent kernel's maps come from: rewritten in the kernel, or encoded by the host
MODES = ("device", "host")
MAP_WORDS = MAP_BYTES // 8


@dataclass(frozen=True)
class MapFields:
    address: int
    dims: tuple[int, ...]  # elements of the map's data type, innermost first
    strides: tuple[int, ...]  # bytes, of dimensions 1.. (dimension 0 is contiguous)
    box: tuple[int, ...]


def _u64(x: int) -> int:
    return x & ((1 << 64) - 1)


def fields(words: Sequence[int], rank: int) -> MapFields:
    """The address, sizes, strides and box of a `rank`-dimensional map (see the module docstring)."""
    w = [_u64(int(x)) for x in words]
    if len(w) != MAP_WORDS or not 1 <= rank <= 5:
        raise ValueError(f"a tensor map is {MAP_WORDS} words of rank 1-5, got {len(w)} words, rank {rank}")
    size_words = [w[4] & 0xFFFFFFFF, w[4] >> 32, w[5] & 0xFFFFFFFF, w[5] >> 32]
    stride_words = [w[1] >> 32, w[2] & 0xFFFFFFFF, w[3] & 0xFFFFFFFF]
    box_bytes = [w[6] >> 56, w[7] & 0xFF, (w[7] >> 8) & 0xFF, (w[7] >> 16) & 0xFF]
    return MapFields(address=w[0], dims=tuple(s + 1 for s in size_words[:rank]),
                     strides=tuple(16 * s for s in stride_words[:rank - 1]),
                     box=tuple(b + 1 for b in box_bytes[:rank]))


def encode_tiled_2d(dtype: str, ptr: int, rows: int, cols: int, elem_bytes: int, box_cols: int,
                    box_rows: int) -> list[int]:
    """cuTensorMapEncodeTiled (the driver's encoder; needs libcuda) for a row-major (rows, cols)
    matrix of CU_TENSOR_MAP_DATA_TYPE_<dtype>: 128-byte swizzle, rows beyond the tensor filled with
    zeros, box (box_rows, box_cols). The 16 words as signed int64 (a torch int64 row)."""
    import cuda.bindings.driver as cu

    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    err, tmap = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{dtype}"), 2, ptr,
        [u64(cols), u64(rows)], [u64(cols * elem_bytes)],
        [u32(box_cols), u32(box_rows)], [u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled ({dtype}) failed: {err} (rows={rows}, cols={cols})")
    return [signed64(int(x)) for x in tmap.opaque]


def signed64(x: int) -> int:
    x = _u64(x)
    return x - (1 << 64) if x >= 1 << 63 else x


@dataclass
class MapTable:
    """Every group's tensor maps, encoded on the host: `table` int64 [groups, maps, 16] on the
    device (128-byte aligned rows), `encode_us` the host time each group's maps took."""

    table: torch.Tensor
    encode_us: list[float]

    @property
    def per_group_us(self) -> float:
        return sum(self.encode_us) / max(len(self.encode_us), 1)


def setup_phases(encode_us: list[float]) -> dict[str, float]:
    """The setup phases a launch with host-encoded maps reports (µs): the encoding in all, and a
    group's (median: a process's first driver call makes the first group slow)."""
    return {"encode_maps": sum(encode_us), "encode_maps_per_group": statistics.median(encode_us)}


def build_table(count: int, maps: int, encode: Callable[[int, torch.Tensor], None], device) -> MapTable:
    """Call `encode(g, row)` for each of `count` groups, `row` a host int64 [maps, 16] tensor to fill,
    and copy the table to `device` in one transfer."""
    host = torch.zeros((count, maps, MAP_WORDS), dtype=torch.int64)
    times = []
    for g in range(count):
        t0 = time.perf_counter()
        encode(g, host[g])
        times.append((time.perf_counter() - t0) * 1e6)
    table = host.to(device)
    if table.is_cuda and table.data_ptr() % MAP_BYTES:
        raise RuntimeError("the tensor-map table must be 128-byte aligned (torch allocations are 256-byte aligned)")
    return MapTable(table, times)
