from nvgg.profiles import get
from nvgg.occupancy import coverage, theoretical

H100 = get("h100")


def test_register_bound_by_hand():
    # 256 threads = 8 warps; 128 regs -> 4096 regs a warp -> 16 warps by registers -> 2 blocks
    occ = theoretical(registers=128, smem_bytes=0, threads=256, profile=H100)
    assert (occ.blocks_per_sm, occ.limited_by) == (2, "registers") and occ.theoretical == 16 / 64


def test_register_allocation_rounds_up_per_warp():
    # 65 regs -> 2080 a warp -> 2304 (units of 256) -> 28 warps -> 3 blocks of 8 warps
    assert theoretical(registers=65, smem_bytes=0, threads=256, profile=H100).blocks_per_sm == 3


def test_registers_are_counted_in_each_quarter_of_the_sm():
    # 99 regs -> 3168 a warp -> 3328: 16384 // 3328 = 4 warps a quarter, 16 an SM -> 1 block of 9 warps
    # (the SM's total, 65536 // 3328 = 19 warps, would say 2: two such blocks were launched and one waited)
    occ = theoretical(registers=99, smem_bytes=104448, threads=288, profile=H100)
    assert (occ.blocks_per_sm, occ.limited_by) == (1, "registers")
    # 96 regs -> 3072 a warp: 5 a quarter, 20 an SM -> 2 blocks of 9 warps
    assert theoretical(registers=96, smem_bytes=104448, threads=288, profile=H100).blocks_per_sm == 2
    # one block's warps spread over the quarters: 17 warps of 120 regs (3840 a warp) fit the SM's total
    # (65280) but need 5 in some quarter (19200 of its 16384)
    assert theoretical(registers=120, smem_bytes=0, threads=544, profile=H100).limited_by == "does not fit"
    assert theoretical(registers=128, smem_bytes=0, threads=512, profile=H100).blocks_per_sm == 1


def test_the_persistent_grid_holds_only_what_is_resident():
    """The sm_90a persistent kernel's CTAs wait on each other: its grid is the resident CTAs."""
    from nvgg.kernels.sm90 import config as gemm
    per_sm = gemm.ctas_per_sm(99, 104448, 288)
    assert per_sm == 1 and gemm.grid_for(256, 132, per_sm) == 132  # case 4 at tile_m 64: 256 tiles
    assert gemm.grid_for(256, 132, gemm.ctas_per_sm(96, 88064, 288)) == 256


def test_shared_memory_bound_by_hand():
    # 100 KB + 1 KB reserved = 103424 B -> 233472 // 103424 = 2 blocks
    occ = theoretical(registers=32, smem_bytes=100 * 1024, threads=128, profile=H100)
    assert (occ.blocks_per_sm, occ.limited_by) == (2, "shared memory") and occ.theoretical == 8 / 64


def test_warp_and_block_limits():
    assert theoretical(registers=16, smem_bytes=0, threads=1024, profile=H100).blocks_per_sm == 2
    occ = theoretical(registers=16, smem_bytes=0, threads=32, profile=H100)
    assert (occ.blocks_per_sm, occ.limited_by) == (32, "blocks") and occ.theoretical == 0.5


def test_a_kernel_over_the_limits_does_not_fit():
    occ = theoretical(registers=32, smem_bytes=228 * 1024, threads=128, profile=H100)
    assert occ.blocks_per_sm == 0 and occ.limited_by == "does not fit"


def test_coverage_and_waves():
    c = coverage(ctas=66, profile=H100, blocks_per_sm=1)
    assert c.coverage == 0.5 and c.waves == 0.5
    c = coverage(ctas=400, profile=H100, blocks_per_sm=2)
    assert c.coverage == 1.0 and c.waves == 400 / 264


def test_cute_tiles_per_launch_for_case_3():
    from nvgg import cases
    from nvgg.backends import get as get_backend
    be = get_backend("cute")
    # m 192 and 320 take 128-row A tiles: 2 and 3 m-tiles x 3072/128 = 24 n-tiles
    assert be.tiles(cases.get("3"), arch="sm_90a") == [48, 72]
    # the persistent build: 192 rows as one wide tile, 320 as 128 + 192, their k split between CTAs
    assert be.tiles(cases.get("3"), grouped=True, arch="sm_90a") == [72]
