"""Configuration of the sm_100a NVFP4 kernel and its resource arithmetic, in plain Python: what the
host side, the backend, `nvgg compile` and the driver launch need without importing CuTe DSL
(whose import and JIT cost seconds); the DSL kernel itself is nvfp4_gemm.py, built on these names.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import groups as kgroups

SF_VEC = 16  # one e4m3 scale per 16 k: NVFP4
TILE_K = 256  # k per pipeline stage: four MMAs of k 64 (the mxf4nvf4 instruction's k)
CTA_ROWS = 128  # rows of B (the MMA's M) per CTA
MMA_N = (128, 256)  # rows of A per tile that this kernel builds (the MMA's N)
CTA_GROUPS = (1, 2)
TENSORMAP_MODES = ("device", "host")
MAPS = 5  # tensor maps per group: B, A, SFB, SFA (the MMA's A, B, SFA, SFB), C
MAP_BYTES = 128  # one CUtensorMap, CUDA driver API
# the device group table (int64, one row a group): the columns every kernel reads (kernels/groups.py)
GROUP_COLS = kgroups.BASE_COLS
COL_A, COL_B, COL_SFA, COL_SFB, COL_C = kgroups.COL_A, kgroups.COL_B, kgroups.COL_SFA, kgroups.COL_SFB, kgroups.COL_C
COL_M, COL_N, COL_K = kgroups.COL_M, kgroups.COL_N, kgroups.COL_K
TILE_COLS = 4  # int32 columns of a tile record: group, n tile, m tile, k tiles
EPILOGUE_WARPS = (0, 1, 2, 3)
MMA_WARP = 4
TMA_WARP = 5
THREADS = 32 * (len(EPILOGUE_WARPS) + 2)
# Source of the limit below:
TMEM_COLUMNS = 512  # 32-bit columns of tensor memory per SM, PTX ISA "Tensor Memory"
TABLE_EXTENT = 1 << 30  # the declared extent of the device tables; the kernel reads real rows only


@dataclass(frozen=True)
class Sm100Config:
    """Launch configuration of the sm_100a kernel: tile, cluster, and where the maps come from."""

    mma_n: int = 128  # rows of the competition's A per tile (the MMA's N): 128 or 256
    cta_group: int = 1  # 1: a CTA per tile (MMA M = 128); 2: a CTA pair per tile (MMA M = 256)
    persistent: bool = False
    # the persistent kernel only: "device" (in-kernel replace) or "host" (a table encoded at
    # prepare time); the per-group kernel takes the DSL's own maps as kernel parameters ("")
    tensormaps: str = ""
    instrument: bool = False  # the phase-timestamp build (profiling only)

    @property
    def mma_m(self) -> int:
        return CTA_ROWS * self.cta_group

    @property
    def threads(self) -> int:
        return THREADS

    @property
    def overlapping_accum(self) -> bool:
        """At mma_n 256 two whole accumulators do not fit beside the scales (2 · 256 + 48 > 512
        columns): the two overlap by the scales' columns, as NVIDIA's
        dense_blockscaled_gemm_persistent does (`overlapping_accum`). The epilogue reads first the
        columns the next accumulator shares and hands them back early, so the next tile's MMAs
        start while the rest of this tile drains."""
        return self.mma_n == 256

    @property
    def acc_stages(self) -> int:
        """Stages of the accumulator pipeline: 2 separate buffers, or 1 stage over the two
        overlapping ones (which buffer a tile uses follows the stage's phase)."""
        return 1 if self.overlapping_accum else 2

    @property
    def acc_buffers(self) -> int:
        return 2

    @property
    def sfa_tmem_columns(self) -> int:
        """The MMA's A scales of one stage: 4 columns per 32 rows of a CTA's operand tile
        (blockscaled_layout.make_tmem_layout_sfa)."""
        return (CTA_ROWS // 32) * (TILE_K // 64)

    @property
    def sfb_tmem_columns(self) -> int:
        """The MMA's B scales of one stage, over whole 128-row scale atoms (make_tmem_layout_sfb)."""
        return (_round_up(self.mma_n, 128) // 32) * (TILE_K // 64)

    @property
    def sf_tmem_columns(self) -> int:
        return self.sfa_tmem_columns + self.sfb_tmem_columns

    @property
    def acc_buffer_stride(self) -> int:
        """Columns from the first accumulator to the second: mma_n apart, or (overlapping) the
        second starts the scales' columns before the first ends."""
        return self.mma_n - self.sf_tmem_columns if self.overlapping_accum else self.mma_n

    @property
    def acc_tmem_columns(self) -> int:
        return self.acc_buffer_stride + self.mma_n

    @property
    def tmem_columns(self) -> int:
        """32-bit tensor-memory columns used: accumulators, then the scales of A and B for one stage."""
        return self.acc_tmem_columns + self.sf_tmem_columns

    def problems(self) -> str | None:
        """Why this configuration cannot be built, or None."""
        if self.mma_n not in MMA_N:
            return f"mma_n must be one of {MMA_N}, got {self.mma_n}"
        if self.cta_group not in CTA_GROUPS:
            return f"cta_group must be 1 or 2, got {self.cta_group}"
        if self.persistent and self.tensormaps not in TENSORMAP_MODES:
            return f"the persistent kernel takes tensormaps 'device' or 'host', got {self.tensormaps!r}"
        if not self.persistent and self.tensormaps:
            return "the per-group kernel takes its tensor maps as kernel parameters (no tensormaps mode)"
        if self.instrument and not self.persistent:
            return "only the persistent kernel has an instrumented build"
        if self.tmem_columns > TMEM_COLUMNS:
            return f"{self.tmem_columns} tensor-memory columns exceed the {TMEM_COLUMNS} of an SM"
        return None

    def is_valid(self, m: int, n: int, k: int) -> str | None:
        """Why a group of this shape cannot run on this kernel, or None. The rules: k a multiple of
        TILE_K (whole stages; the scale layout's 64-k blocks), n a multiple of CTA_ROWS (whole
        rows of B per CTA), m ≥ 1 (any m: the copy engine zero-fills and clips)."""
        if m < 1 or n < 1 or k < 1:
            return f"m, n and k must be positive, got m={m}, n={n}, k={k}"
        if k % TILE_K:
            return f"the kernel needs k to be a multiple of {TILE_K}, got k={k}"
        if n % CTA_ROWS:
            return f"the kernel needs n to be a multiple of {CTA_ROWS}, got n={n}"
        if m * k // 2 >= 1 << 31 or n * k // 2 >= 1 << 31 or m * n >= 1 << 31:
            return f"the kernel indexes a group with 32-bit offsets; m={m}, n={n}, k={k} is too large"
        return None


def _round_up(x: int, to: int) -> int:
    return -(-x // to) * to
