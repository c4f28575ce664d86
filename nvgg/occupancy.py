"""Theoretical occupancy from a compiled kernel's resources against a GPU profile's limits, SM
coverage and waves. Works without a GPU and for any target arch with a profile: the rules alone,
beside the GPU specifications they read (profiles.py), so a kernel's configuration sizes its grid
by them; what the driver says of a built kernel is profiling/occupancy_report.py.

Allocation rules (CUDA Occupancy Calculator, and the CUDA C Programming Guide's compute
capability tables): registers are allocated per warp in units of 256, out of the register file
of one of the SM's 4 sub-partitions (a quarter each), so the warps the registers allow are a
multiple of 4; shared memory per block in units of 128 bytes, plus 1 KB the system reserves per
block (since sm_80); a block occupies ceil(threads / 32) warps. The resident blocks per SM are
the least of the register, shared memory, warp and block limits; occupancy is resident warps over
the SM's maximum warps. (cuda_occupancy.h: cudaOccRegAllocationGranularity 256,
cudaOccSubPartitionsPerMultiprocessor 4 for compute capability 7 through 12, and
cudaOccMaxBlocksPerSMRegsLimit's warps = floor(registers / 4 / registers a warp) x 4.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .profiles import Profile

REG_ALLOC_UNIT = 256        # registers, per warp
SMEM_ALLOC_UNIT = 128       # bytes
SMEM_RESERVED_PER_BLOCK = 1024  # bytes the driver reserves per block (sm_80 and later)
SUB_PARTITIONS = 4          # register file quarters an SM's warps are spread over


def _ceil_to(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_block: int
    limited_by: str
    theoretical: float   # resident warps / max warps per SM

    def to_dict(self) -> dict:
        return asdict(self)


def theoretical(registers: int, smem_bytes: int, threads: int, profile: Profile,
                tmem_columns: int | None = None) -> Occupancy:
    """Resident blocks per SM and occupancy; `tmem_columns`: the tensor-memory columns a block
    allocates (sm_100a), against the profile's tensor memory per SM (32-bit columns of 128 lanes)."""
    lim = profile.limits
    warps = -(-threads // 32)
    if threads > lim.max_threads_per_block or registers > lim.registers_per_thread or smem_bytes > lim.smem_per_block_bytes:
        return Occupancy(0, warps, "does not fit", 0.0)
    regs_per_warp = _ceil_to(max(registers, 1) * 32, REG_ALLOC_UNIT)
    if regs_per_warp * _ceil_to(warps, SUB_PARTITIONS) > lim.registers_per_sm:  # one block's warps over the quarters
        return Occupancy(0, warps, "does not fit", 0.0)
    # each quarter holds whole warps: 99 registers a thread (3328 a warp) leave 16 warps an SM, not 19
    # (two blocks of 288 threads counted as 18 warps by the SM's total: launched, one of them waited
    # for the other to end, and a kernel whose CTAs wait on each other hung: NOTES.md, Sweeps)
    by_regs = (lim.registers_per_sm // SUB_PARTITIONS // regs_per_warp) * SUB_PARTITIONS // warps
    smem_per_block = _ceil_to(smem_bytes + SMEM_RESERVED_PER_BLOCK, SMEM_ALLOC_UNIT)
    by_smem = lim.smem_per_sm_bytes // smem_per_block
    by_warps = lim.max_warps_per_sm // warps
    limits = {"registers": by_regs, "shared memory": by_smem, "warps": by_warps, "blocks": lim.max_blocks_per_sm}
    if tmem_columns:
        sm_columns = (lim.tmem_bytes_per_sm or 0) // (128 * 4)
        if tmem_columns > sm_columns:
            return Occupancy(0, warps, "does not fit", 0.0)
        limits["tensor memory"] = sm_columns // tmem_columns
    name, blocks = min(limits.items(), key=lambda kv: kv[1])
    return Occupancy(blocks, warps, name, blocks * warps / lim.max_warps_per_sm)


def of_kernel(info, profile: Profile) -> Occupancy:
    """`theoretical` for a compiled kernel (a backend's KernelInfo)."""
    return theoretical(info.registers, info.smem_bytes, info.threads, profile, info.extra.get("tmem_alloc_columns"))


@dataclass(frozen=True)
class Coverage:
    ctas: int             # CTAs with work
    sms: int
    coverage: float       # CTAs with work / SMs, capped at 1
    waves: float          # CTAs / (SMs x resident blocks per SM)

    def to_dict(self) -> dict:
        return asdict(self)


def coverage(ctas: int, profile: Profile, blocks_per_sm: int) -> Coverage:
    slots = profile.sm_count * max(blocks_per_sm, 1)
    return Coverage(ctas, profile.sm_count, min(ctas / profile.sm_count, 1.0), ctas / slots)
