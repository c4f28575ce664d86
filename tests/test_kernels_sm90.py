"""The sm_90a kernels: the decode on every input (CPU), compile-only checks against sm_90's limits
(CPU, no GPU needed), the compile cache, the backend's refusals, and correctness on a GPU (`gpu`)."""

from __future__ import annotations

import re
import subprocess

from dataclasses import replace

import pytest
import torch

cutlass = pytest.importorskip("cutlass")

from nvgg import cases, inputs, reference  # noqa: E402
from nvgg.backends.cute import CuteBackend  # noqa: E402
from nvgg.kernels.sm90.family import Sm90Kernels, config_for  # noqa: E402
from nvgg.errors import NvggError  # noqa: E402
from nvgg.kernels import cache as kcache  # noqa: E402
from nvgg.kernels import groups as kgroups, tools  # noqa: E402
from nvgg.kernels.schedule import WRITER  # noqa: E402
from nvgg.kernels.sm90 import dequant_ref, host, ptx  # noqa: E402
from nvgg.kernels.sm90 import config as gemm  # noqa: E402

E2M1 = torch.tensor(reference.E2M1_VALUES, dtype=torch.float64)
# sm_90 limits, CUDA C Programming Guide, compute capability 9.0 table
MAX_REGS_PER_THREAD, REGS_PER_SM, MAX_SMEM_PER_BLOCK = 255, 65536, 232448


# --- the decode ---------------------------------------------------------------------------------

def _nibbles(packed: torch.Tensor) -> torch.Tensor:
    return torch.stack((packed.long() & 0xF, packed.long() >> 4), dim=-1).reshape(packed.shape[0], -1)


@pytest.mark.parametrize("position", range(4))
def test_decode_every_byte_value_in_every_byte_position(position):
    packed = torch.randint(0, 256, (256, 4), dtype=torch.uint8, generator=torch.Generator().manual_seed(position))
    packed[:, position] = torch.arange(256, dtype=torch.uint8)
    got = dequant_ref.decode_words(dequant_ref.words_from_bytes(packed)[:, 0]).double()
    want = E2M1[_nibbles(packed)][:, list(dequant_ref.CHUNK_ORDER)]
    assert torch.equal(got, want)
    assert torch.equal(torch.signbit(got), torch.signbit(want))  # -0 stays -0


def test_decode_permutation_stays_inside_one_scale_block():
    # the chunk order permutes 8 consecutive k; a 16-k scale block holds whole chunks, so both
    # operands permuted alike give the same dot products
    assert sorted(dequant_ref.CHUNK_ORDER) == list(range(8))
    assert gemm.K_SUB % 16 == 0 and 16 % 8 == 0


def test_decode_model_matches_the_ptx():
    # the model mirrors these exact steps: two masked shifts per output word, four conversions
    # of two e4m3 bytes each, four multiplies by the (64 x scale) pair
    text = ptx._DECODE_WORD
    assert "shl.b32 t, $4, 4;" in text and "shl.b32 u, $4, 2;" in text and "shr.b32 u, $4, 2;" in text
    assert text.count("and.b32 t, t, 0x80808080;") == 1 and "and.b32 t, $4, 0x80808080;" in text
    assert text.count("and.b32 u, u, 0x1C1C1C1C;") == 2
    assert "mov.b32 {e0, e1}, even;" in text and "mov.b32 {o0, o1}, odd;" in text
    assert re.findall(r"cvt\.rn\.f16x2\.e4m3x2 r, (\w+);", text) == ["e0", "e1", "o0", "o1"]
    assert [int(x) for x in re.findall(r"mul\.rn\.f16x2 \$(\d), r, \$5;", text)] == [0, 1, 2, 3]
    assert dequant_ref._sixty_four().item() == 64.0


def test_every_e2m1_code_reads_as_its_value_times_2_to_the_minus_6_in_e4m3():
    words = torch.tensor([0x76543210, 0xFEDCBA98], dtype=torch.int64)
    got = dequant_ref.e4m3_bytes(words).view(torch.float8_e4m3fn).double()
    want = E2M1[list(range(16))].reshape(2, 8)[:, list(dequant_ref.CHUNK_ORDER)] * 2.0 ** -6
    assert torch.equal(got, want) and torch.equal(torch.signbit(got), torch.signbit(want))


def test_scaled_values_are_exact_for_every_e2m1_code_and_finite_e4m3_scale():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn)
    scales = codes[torch.isfinite(codes.float())]
    word = torch.tensor([0x76543210, 0xFEDCBA98], dtype=torch.int64)  # all 16 codes
    values = E2M1[list(range(16))].reshape(2, 8)[:, list(dequant_ref.CHUNK_ORDER)]
    for s in scales:
        got = dequant_ref.expand_words(word, s.repeat(2)).double()
        assert torch.equal(got, values * float(s.float())), f"scale {float(s.float())}"


def _unit_chunks(words: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The fp16 copy's 128 bytes of one 64-k unit (8 words: block c's word h at 2c + h; 4 scales)
    as the per-unit expansion lays them out: chunk 2s + h = register s of word h of blocks 0-3."""
    regs = dequant_ref.expand_words(words, scales.repeat_interleave(2)).reshape(4, 2, 4, 2)  # c, h, s, value
    return regs.permute(2, 1, 0, 3).reshape(64)


def test_scale_offset_finds_every_scale_where_the_blocked_layout_put_it():
    # config.scale_offset (the kernels' loads of A's scales) against inputs.to_blocked's storage:
    # a ragged m, several 64-k blocks, every scale a different byte
    m, k = 200, 768
    plain = (torch.arange(m * k // 16, dtype=torch.int32) % 251 + 1).to(torch.uint8).reshape(m, k // 16, 1)
    blocked = inputs.to_blocked(plain.view(torch.float8_e4m3fn), m, k, "cpu", torch.Generator().manual_seed(1))
    storage = torch.empty(0, dtype=torch.uint8).set_(blocked.untyped_storage())
    for row in range(m):
        for block in range(k // gemm.K_SUB):
            at = gemm.scale_offset(row, k, block)
            assert storage[at:at + 4].tolist() == plain[row, 4 * block:4 * block + 4, 0].tolist(), (row, block)


def test_helpers_coalesced_turn_writes_the_copy_the_unit_layout_defines():
    # a helper lane (place sub among its row's four lanes) takes from each unit's lane word sub % 2
    # of its four blocks, decodes half of each (config.turn_selector), and stores chunk
    # 4 * half + sub of each unit (config.turn_chunk): the row's bytes must come out as the
    # per-unit layout of the module docstring, every code, scales that are not powers of two
    gen = torch.Generator().manual_seed(7)
    stage = 2
    row = torch.randint(0, 256, ((stage + 1) * gemm.K_STAGE // 2,), dtype=torch.uint8, generator=gen)
    at = stage * gemm.K_STAGE // 2  # the stage's packed bytes: every code in each nibble
    row[at:at + 16] = torch.arange(0, 256, 16, dtype=torch.uint8) + torch.arange(16, dtype=torch.uint8)
    scales = torch.tensor([0.75, 1.25, 3.5, 0.0390625] * 4 * (stage + 1), dtype=torch.float16)
    words = dequant_ref.words_from_bytes(row)
    want = torch.cat([_unit_chunks(words[8 * u:8 * u + 8], scales[4 * u:4 * u + 4])
                      for u in range(gemm.SUBS_PER_STAGE * (stage + 1))])
    got = torch.full_like(want, float("nan"))
    stores = {}
    for sub in range(gemm.SUBS_PER_STAGE):
        for u in range(gemm.SUBS_PER_STAGE):
            unit = stage * gemm.SUBS_PER_STAGE + u
            lane_words = words[8 * unit + sub % 2:8 * unit + 8:2]  # block b's word sub % 2, from the unit's lane
            halves = dequant_ref.decode_half(lane_words, scales[4 * unit:4 * unit + 4], gemm.turn_selector(sub))
            for half in range(2):
                at = gemm.turn_chunk(stage, u, half, sub)
                got[at // 2:at // 2 + 8] = halves[:, 2 * half:2 * half + 2].reshape(8)
                stores.setdefault((u, half), []).append(at)
    first = stage * gemm.K_STAGE  # the stage's fp16 values
    assert torch.equal(got[first:], want[first:])
    assert torch.equal(torch.signbit(got[first:]), torch.signbit(want[first:]))
    # each store of the four lanes: 64 contiguous bytes, whole 32-byte sectors
    for offsets in stores.values():
        assert sorted(offsets) == list(range(min(offsets), min(offsets) + 64, 16)) and min(offsets) % 64 == 0


def test_decode_half_model_matches_the_ptx():
    source = ptx._DECODE_HALF
    assert ptx._E4M3_WORDS.format(w="$2") in source  # decode_word's e4m3 bytes, of operand $2
    assert ptx._E4M3_WORDS.format(w="$4") in ptx._DECODE_WORD
    assert "prmt.b32 both, even, odd, $4;" in source and "mov.b32 {lo, hi}, both;" in source
    assert re.findall(r"cvt\.rn\.f16x2\.e4m3x2 r, (\w+);", source) == ["lo", "hi"]
    assert [int(x) for x in re.findall(r"mul\.rn\.f16x2 \$(\d), r, \$3;", source)] == [0, 1]
    word = torch.tensor([0x76543210, 0xFEDCBA98], dtype=torch.int64)
    scale = torch.tensor([1.5, 1.5], dtype=torch.float16)
    full = dequant_ref.expand_words(word, scale).reshape(2, 4, 2)  # registers 0-3
    for selector, regs in ((gemm.HALF_LOW, (0, 2)), (gemm.HALF_HIGH, (1, 3))):
        assert torch.equal(dequant_ref.decode_half(word, scale, selector).reshape(2, 2, 2), full[:, list(regs)])


# --- configuration --------------------------------------------------------------------------------

def test_every_competition_case_is_valid():
    for case in cases.builtin():
        for m, n, k in case.groups:
            assert config_for([m], persistent=False).is_valid(m, n, k) is None
            assert config_for(case.m, persistent=True).is_valid(m, n, k) is None


@pytest.mark.parametrize("shape, needle", [((64, 256, 100), "k=100 is not a multiple of 256"),
                                            ((64, 100, 256), "n=100 is not a multiple of 128"),
                                            ((0, 128, 256), "m=0")])
def test_invalid_shapes_name_the_constraint(shape, needle):
    assert needle in gemm.GemmConfig().is_valid(*shape)


def test_configs_the_backend_picks_fit_in_shared_memory():
    for tile_m in (32, 64, 128):
        for persistent in (False, True):
            stages = gemm.stages_for(tile_m)
            config = gemm.GemmConfig(tile_m=tile_m, stages=stages, persistent=persistent)
            assert config.problems() is None and config.smem_bytes <= MAX_SMEM_PER_BLOCK
            deeper = gemm.GemmConfig(tile_m=tile_m, stages=stages + 1, persistent=persistent)
            assert deeper.smem_bytes > MAX_SMEM_PER_BLOCK or stages == 6
    # the ring holds packed B and its scales only (A arrives as fp16, 64 k a slot)
    persistent = gemm.GemmConfig(tile_m=128, stages=5, persistent=True)
    assert persistent.stage_bytes == 128 * 128 + 2048 and persistent.a16_slots == gemm.A16_SLOTS
    assert persistent.smem_bytes == 5 * 18432 + 8 * 128 * 64 * 2 + 2 * (5 + 8) * 8 + 2048
    assert (persistent.threads, gemm.GemmConfig().threads) == (288, 288)
    assert gemm.GemmConfig(expand_only=True).threads == gemm.EXPAND_THREADS


def test_tile_m_is_checked_and_picked():
    assert "48" in gemm.GemmConfig(tile_m=48).problems()
    assert [gemm.pick_tile_m([m]) for m in (1, 32, 33, 64, 65, 512)] == [32, 32, 64, 64, 128, 128]


@pytest.mark.parametrize("case_id", ["1", "2", "3", "4"])
def test_phase_0_is_dealt_evenly_over_every_cta(case_id):
    """Every CTA starts phase 0 only once the kernel before has ended, launched programmatically or
    not (its first act is that wait): even shares, which cover every unit on CTAs that exist."""
    from nvgg.kernels.sm90.family import persistent_config
    case = cases.get(case_id)
    config = persistent_config(case.m, case.n, case.k, 132, "rows")  # the deal is the rows build's
    costs = gemm.tile_costs(case.m, case.n, config.tile_m, config.half_tiles, config.wide_tiles)
    units = sum(m * (k // gemm.K_SUB) for m, _, k in case.groups)
    ctas = gemm.grid_for(len(costs), 132, 1, units)
    a, s1, b, s2 = gemm.even_deal(units, ctas)
    assert (a, s1, b) == (0, 0, ctas) and (s2 - 1) * ctas < units <= s2 * ctas
    assert gemm.even_deal(18432, 8) == (0, 0, 8, 2304) and gemm.even_deal(7, 0) == (0, 0, 0, 7)


def test_tile_table_counts_m_tiles_times_n_tiles():
    begins, m_tiles, total = gemm.table_tiles([80, 176, 1], [4096, 256, 128], 128)
    assert m_tiles == [1, 2, 1] and begins == [0, 32, 36] and total == 37
    assert gemm.grid_for(37, 132) == 37 and gemm.grid_for(1000, 132, 1) == 132
    # case 3: 120 tiles, but 512 rows x 64 blocks of 64 k = 32768 phase-0 units fill 128 CTAs of
    # 256 MMA threads in one round; never past what is resident
    assert gemm.grid_for(120, 132, 1, units=512 * 64) == 128 and gemm.grid_for(120, 132, 1, units=10**6) == 132
    assert gemm.grid_for(120, 132, 1, units=256) == 120
    assert gemm.ctas_per_sm(117, 210944, 288) == 1


# --- compiling without a GPU ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def store():
    """The run's kernel cache (NVGG_CACHE_DIR or the default), asked with need_callable=False: each
    build compiles once a run, in whichever test or worker asks first, and not at all from a cache
    a previous run filled (keyed by the sources); the checks read the PTX and cubin it wrote."""
    return kcache.shared()


@pytest.mark.parametrize("config, shape", [
    (gemm.GemmConfig(tile_m=128, stages=3), (80, 4096, 7168)),
    (gemm.GemmConfig(tile_m=128, stages=3), (176, 256, 512)),
    (gemm.GemmConfig(tile_m=64, stages=5), (40, 512, 256)),
    (gemm.GemmConfig(tile_m=32, stages=6), (1, 128, 256)),
    (gemm.GemmConfig(tile_m=128, stages=3, persistent=True), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True), None),
    (gemm.GemmConfig(tile_m=64, stages=5, persistent=True), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True), None),
    (gemm.GemmConfig(tile_m=128, stages=3, persistent=True, tensormaps="host"), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True, tensormaps="host"), None),
    (gemm.GemmConfig(tile_m=128, stages=3, persistent=True, readiness="grid"), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True, tensormaps="host",
                     readiness="rows"), None),
    (gemm.GemmConfig(tile_m=64, stages=5, persistent=True, tensormaps="host"), None),
    (gemm.GemmConfig(tile_m=128, stages=5, persistent=True, tensormaps="host", readiness="chunks"), None),
    (gemm.GemmConfig(tile_m=128, stages=5, persistent=True, readiness="chunks"), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True, tensormaps="host",
                     readiness="chunks"), None),
    (gemm.GemmConfig(tile_m=128, stages=5, persistent=True, tensormaps="host", readiness="chunks", split_k=True), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True, readiness="chunks",
                     split_k=True), None),
])
def test_compiles_for_sm90a_within_limits(store, config, shape):
    entry = host.compile_gemm(config, shape, "sm_90a", store=store, need_callable=False)
    ptx_text = (entry.directory / "kernel.ptx").read_text()
    assert ".target sm_90a" in ptx_text
    # each warpgroup: 64 rows of B x tile_m rows of A, 4 k16 steps per 64-k subtile
    assert f"wgmma.mma_async.sync.aligned.m64n{config.tile_m}k16.f32.f16.f16" in ptx_text
    # tile_m 128: tiles of at most 64 rows run the half-width wgmma (a per-group kernel has one
    # only when its static m leaves such a tile)
    if config.tile_m == 128 and (shape is None or 0 < shape[0] % 128 <= 64):
        assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx_text
    assert "cp.async.bulk.tensor.2d" in ptx_text and "cvt.rn.f16x2.e4m3x2" in ptx_text
    if config.tensormaps == "device":
        # each CTA's descriptor pair is retargeted in place, then released and acquired before use
        for field in ("global_address.global.b1024.b64", "global_dim.global.b1024.b32",
                      "global_stride.global.b1024.b64"):
            assert f"tensormap.replace.tile.{field}" in ptx_text
        assert "fence.proxy.tensormap::generic.release.gpu" in ptx_text
        assert "fence.proxy.tensormap::generic.acquire.gpu" in ptx_text
        assert "prefetch.tensormap" not in ptx_text
    else:
        # the host's maps are only read: acquired and prefetched (both of a pair, for the first
        # tile and at a change of group), never written
        assert "tensormap.replace" not in ptx_text and "fence.proxy.tensormap::generic.release" not in ptx_text
        assert ptx_text.count("fence.proxy.tensormap::generic.acquire.sys") == 4
        assert ptx_text.count("prefetch.tensormap") == 4
    assert "%globaltimer" not in ptx_text  # only the instrumented build reads the timer
    # the split build's partial sums: written as fp32 quads, read at L2 and added in
    assert ("st.global.v4.f32" in ptx_text) == ("ld.global.cg.v4.f32" in ptx_text) == config.split_k
    if config.persistent:
        # phase 0 reads packed A and writes the fp16 copy, which TMA then loads
        assert "ld.global.nc.v4.b32" in ptx_text and "st.global.v4.b32" in ptx_text
        assert "fence.proxy.async.global" in ptx_text
        # the MMA warps' phase 0 fences the staged group columns in shared memory too; the chunks
        # build's helper warps find a turn's group by a vote instead of staging the columns
        assert ("fence.proxy.async;" in ptx_text) == (config.readiness != "chunks")
        assert ("vote.sync.ballot.b32" in ptx_text) == (config.readiness == "chunks")
        adds = ptx_text.count("red.release.gpu.global.add.u64")
        assert "ld.acquire.gpu.global.u64" in ptx_text
        # a programmatic launch: the next kernel's CTAs may start once this CTA read the launch
        # count (rows: the producer, right after counting itself in; grid: every thread, after
        # the CTA barrier that follows the count's read); every thread waits for the kernel
        # before ahead of anything else (tests/test_grid_dependency.py checks every path)
        assert ptx_text.count("griddepcontrol.launch_dependents;") == 1
        assert ptx_text.count("griddepcontrol.wait;") == 1
        trigger = ptx_text.index("griddepcontrol.launch_dependents;")
        if config.readiness in ("rows", "chunks"):
            # the row counters (phase 0's writers add, the producer's lanes spin until theirs
            # are full, then meet at a warp barrier), and the launch count (one relaxed arrival a
            # CTA, read first by the same thread)
            # (the chunks build's helpers count each turn where they wrote it, in several places)
            assert adds >= 1 if config.readiness == "chunks" else adds == 1
            assert "bar.warp.sync" in ptx_text and "nanosleep.u32 20" in ptx_text
            assert "red.relaxed.gpu.global.add.u64" in ptx_text and "shfl.sync.idx.b32" in ptx_text
            assert ptx_text.index("red.relaxed.gpu.global.add.u64") < trigger
        else:
            assert adds == 1 and "bar.warp.sync" not in ptx_text  # the grid barrier alone
            assert ptx_text.index("bar.sync") < trigger
        assert ptx_text.index("griddepcontrol.wait;") < ptx_text.index("mbarrier.init") < trigger
    else:
        assert "red.release.gpu.global.add.u64" not in ptx_text  # no grid barrier: any grid size
        assert "griddepcontrol" not in ptx_text  # launched in plain stream order
    # only the wide-tile build moves registers from its producer warpgroup to the MMA warpgroups
    regs = re.findall(r"setmaxnreg\.(dec|inc)\.sync\.aligned\.u32\s+(\d+);", ptx_text)
    assert sorted(set(regs)) == ([("dec", str(gemm.PRODUCER_REGS)), ("inc", str(gemm.MMA_REGS))] if config.wide_tiles else [])
    assert 2 * 128 * gemm.MMA_REGS + 128 * gemm.PRODUCER_REGS <= 384 * 168  # what the launch allocates
    res = host.resources(entry)
    assert 0 < res["registers"] <= MAX_REGS_PER_THREAD
    assert res["registers"] * config.threads <= REGS_PER_SM
    assert res["frame_bytes"] == 0  # no spills
    assert config.smem_bytes >= res["smem_bytes"] - 1024 and res["smem_bytes"] <= MAX_SMEM_PER_BLOCK
    assert (entry.directory / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"


def _nvdisasm() -> str | None:
    return tools.find("nvdisasm")


def _sass(store, config, shape=None) -> str:
    """A build's SASS (nvdisasm -c of its cubin); the test is skipped where nvdisasm is missing."""
    tool = _nvdisasm()
    if not tool:
        pytest.skip("nvdisasm not found: pip install -e '.[test]' (nvidia-cuda-nvdisasm) or set NVDISASM")
    entry = host.compile_gemm(config, shape, "sm_90a", store=store, need_callable=False)
    return subprocess.run([tool, "-c", str(entry.directory / "kernel.cubin")], capture_output=True, text=True,
                          check=True).stdout


_NO_DESTINATION = ("ST", "RED", "ATOM", "BAR", "SYNCS", "BRA", "EXIT", "RET", "CALL", "WARPGROUP", "UTMA", "UBLKCP")


def accumulators_read_early(sass: str) -> list[str]:
    """Instructions of `sass` (nvdisasm text, in address order) that read a wgmma accumulator
    register while a wgmma may still be writing it: after an HGMMA and before the next
    WARPGROUP.DEPBAR.LE gsb0, 0x0 (the wait for all of them). The accumulators are the HGMMA
    destinations (64xNx16.F32: N / 2 registers a thread from the named one). Address order is the
    order the main loop and the code after it run in; a loop's own back edge only leads to more
    HGMMAs (which read their accumulators legally)."""
    lines = [re.sub(r"/\*[^*]*\*/", "", line).strip().rstrip(";").strip() for line in sass.splitlines()]
    acc = set()
    for m in re.finditer(r"HGMMA\.64x(\d+)x16\.F32\s+R(\d+)", sass):
        acc.update(range(int(m[2]), int(m[2]) + int(m[1]) // 2))
    early, pending = [], False
    for line in lines:
        if not line or line.startswith((".", "//")) or line.endswith(":"):
            continue
        text = re.sub(r"^@!?U?P\w+\s+", "", line)
        op, _, operands = text.partition(" ")
        if op.startswith("HGMMA"):
            pending = True
            continue
        if op == "WARPGROUP.DEPBAR.LE" and operands.replace(" ", "") == "gsb0,0x0":
            pending = False
            continue
        if not pending:
            continue
        parts = [x.strip() for x in operands.split(",")]
        sources = parts if op.startswith(_NO_DESTINATION) else parts[1:]
        width = 4 if ".128" in op else 2 if ".64" in op else 1
        read = set()
        for src in sources:
            if not src.startswith("["):  # an address operand is no accumulator
                for r in re.findall(r"\bR(\d+)\b", src):
                    read.update(range(int(r), int(r) + width))
        if acc & read:
            early.append(line)
    return early


def test_the_accumulator_check_finds_a_read_hoisted_above_the_wait():
    """The check below can fail: a conversion of an accumulator between the last HGMMA and its
    wait (what ptxas once did) is found, one after the wait is not."""
    body = """        /*0100*/                   HGMMA.64x128x16.F32 R24, R104, gdesc[UR12], R24, gsb0 ;
        /*0110*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*0120*/                   F2FP.F16.F32.PACK_AB R140, R25, R24 ;
        /*0130*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*0140*/                   F2FP.F16.F32.PACK_AB R141, R27, R26 ;
        /*0150*/                   STS.64 [R2], R86 ;"""
    assert accumulators_read_early(body) == ["F2FP.F16.F32.PACK_AB R140, R25, R24"]
    assert accumulators_read_early(body.replace("gsb0, 0x1", "gsb0, 0x0")) == []


@pytest.mark.parametrize("config, shape", [
    (gemm.GemmConfig(tile_m=32, stages=6), (7, 256, 512)),
    (gemm.GemmConfig(tile_m=64, stages=5), (33, 384, 768)),
    (gemm.GemmConfig(tile_m=128, stages=3), (76, 7168, 2048)),
    (gemm.GemmConfig(tile_m=128, stages=3, persistent=True), None),
    (gemm.GemmConfig(tile_m=128, stages=5, persistent=True, tensormaps="host", readiness="chunks", split_k=True), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True), None),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True, readiness="chunks",
                     split_k=True), None),
])
def test_sass_waits_for_the_last_wgmma_before_reading_accumulators(store, config, shape):
    """ptxas once hoisted the epilogue's fp32->fp16 conversions above the final wgmma wait (seen in
    nvdisasm, and as a random error in the last 64-k block on an H200), when the last stage was
    peeled from the main loop; every stage now runs in the loop and wait_group(0) follows it. No
    instruction reads an accumulator before that wait. Needs nvdisasm (NVDISASM=path)."""
    sass = _sass(store, config, shape)
    assert "HGMMA" in sass and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in sass
    assert accumulators_read_early(sass) == []


@pytest.mark.parametrize("config, wgmma, groups", [
    # one stage's code (4 subtiles) for the full and the half-width tiles
    (gemm.GemmConfig(tile_m=128, stages=5, persistent=True), 32, 8),
    # the wide tile's N = 64 wgmma joins the N = 128 one's group: 8 a subtile
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True), 64, 12),
    (gemm.GemmConfig(tile_m=128, stages=5, persistent=True, tensormaps="host", readiness="chunks", split_k=True), 32, 8),
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True, readiness="chunks",
                     split_k=True), 64, 12),
])
def test_sass_keeps_the_wgmma_pipelined(store, config, wgmma, groups):
    """ptxas serialises every wgmma (one WARPGROUP.ARRIVE and DEPBAR each) when it runs short of
    registers (C7511/C7512): the wide-tile build did at 288 threads, capped at 168 registers,
    until its producer warpgroup gave registers away (setmaxnreg). Pipelined, a warpgroup
    arrives once per 64-k subtile: 4 wgmma of k 16 (8 in a wide tile) between arrivals."""
    sass = _sass(store, config)
    assert (sass.count("HGMMA"), sass.count("WARPGROUP.ARRIVE")) == (wgmma, groups)


@pytest.mark.parametrize("config, pairs, copies", [
    (gemm.GemmConfig(tile_m=128, stages=5, persistent=True, tensormaps="host", readiness="chunks"), 32, 1),
    # the wide tile's 64 more rows: 16 more pairs, and a second copy loop
    (gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True, tensormaps="host",
                     readiness="chunks"), 48, 2),
])
def test_sass_stores_c_as_pairs_of_fp16(store, config, pairs, copies):
    """`_store` writes C as 32-bit pairs of fp16 (B's rows permuted in `_decode_b`, so that a
    thread holds adjacent n): a 128-row tile's 64 accumulators a thread in 32 stores, and no 16-bit
    global store (one fp16 each, half a sector: the store before the pairs). With host maps the
    kernel's only other global stores are 16-byte ones: the helpers' of the fp16 copy and those of
    a CTA's last tile, which `_store_staged` writes as the same pairs into shared memory (32-bit
    shared stores) and reads back in 16-byte chunks, 16 threads a row, in a loop (one copy of the
    code for the tile's rows, one more for a wide tile's other rows). Every pair's store is
    predicated on its row, none branched around (the branches doubled the code a CTA runs cold)."""
    sass = _sass(store, config)
    stores = re.findall(r"\bSTG\.E[.A-Z0-9]*", sass)
    assert stores.count("STG.E") == pairs and set(stores) == {"STG.E", "STG.E.128"}
    assert len(re.findall(r"@!?P\d\s+STG\.E ", sass)) == pairs
    assert len(re.findall(r"\bSTS ", sass)) == pairs and sass.count("LDS.128") == copies


def test_b_rows_flipped_addresses_are_the_swizzled_ones():
    """`_decode_b` reads subtile s of a thread's two B rows at `_b_rows`' subtile-0 address with
    bits 5-6 flipped by s, and its scale SCALE_CHUNK bytes a subtile on: for every thread, subtile,
    row and stage of the ring, the very bytes the tensor map's 128-byte swizzle and the scales'
    blocked layout put there (16-byte chunk j of row r at j ^ (r % 8)). The flip needs stages
    1024-byte aligned: a stage 32 bytes off gives other addresses."""
    from nvgg.kernels.sm90.nvfp4_gemm import Nvfp4GemmSm90
    config = gemm.GemmConfig(tile_m=128, stages=5, persistent=True)
    kernel = Nvfp4GemmSm90(config)

    def swizzled(stage, tidx, sub, half):
        c, row = tidx % 4, (tidx // 32) * 16 + 2 * ((tidx % 32) // 4) + half
        return (stage + kernel.off_b + row * gemm.ROW_BYTES + (((2 * sub + c // 2) ^ (row % 8)) * 16) + (c % 2) * 8,
                stage + kernel.off_sfb + sub * gemm.SCALE_CHUNK + (row % 32) * 16 + ((row % 128) // 32) * 4 + c)

    def flipped(stage, tidx, sub, half):
        packed, scale = kernel._b_rows(tidx, stage)[half]
        return packed ^ (sub << 5), scale + sub * gemm.SCALE_CHUNK

    ring = 7 * 1024  # any 1024-byte aligned base
    cases_ = [(ring + i * config.stage_bytes, t, s, h) for i in range(config.stages) for t in range(gemm.MMA_THREADS)
              for s in range(gemm.SUBS_PER_STAGE) for h in range(2)]
    assert all(flipped(*x) == swizzled(*x) for x in cases_)
    assert any(flipped(ring + 32, t, s, h) != swizzled(ring + 32, t, s, h) for _, t, s, h in cases_)


def test_setmaxnreg_moves_no_more_registers_than_the_launch_allocated(store):
    """setmaxnreg.inc waits until the CTA's own decreases have freed the registers it asks for:
    the wide build's warpgroups after it must fit the registers a thread at launch × the
    threads, or its MMA warpgroups wait forever (a build that asked for 2 × 128 × 216 + 128 × 80
    over 384 threads of 168 hung on the GPU: lab log, the decode build)."""
    config = gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True)
    res = host.resources(host.compile_gemm(config, None, "sm_90a", store=store))
    moved = res["setmaxnreg"]
    assert set(moved) == {"inc", "dec"} and moved["inc"] >= res["registers"]
    assert 2 * 128 * moved["inc"] + 128 * moved["dec"] <= config.threads * res["registers"]


def test_instrumented_build_reads_the_timer_only_when_asked(store):
    config = gemm.GemmConfig(tile_m=128, stages=4, persistent=True, instrument=True)
    entry = host.compile_gemm(config, None, "sm_90a", store=store, need_callable=False)
    assert "%globaltimer" in (entry.directory / "kernel.ptx").read_text()
    assert host.resources(entry)["frame_bytes"] == 0
    assert "persistent" in gemm.GemmConfig(instrument=True).problems()


def test_cache_hits_in_memory_and_on_disk(tmp_path):
    config, shape = gemm.GemmConfig(tile_m=64, stages=5), (40, 512, 256)
    store = kcache.CompileCache(tmp_path)
    first = host.compile_gemm(config, shape, "sm_90a", store=store)
    again = host.compile_gemm(config, shape, "sm_90a", store=store)
    assert again.hit == "memory" and again.fn is first.fn and again.compile_s < first.info["cold_compile_s"]
    fresh = kcache.CompileCache(store.root)
    record = host.compile_gemm(config, shape, "sm_90a", store=fresh, need_callable=False)
    assert record.hit == "disk" and record.fn is None and record.info["resources"] == first.info["resources"]
    other = kcache.CacheKey.make("x", gemm.GemmConfig(tile_m=32), shape, "sm_90a", host.SOURCES)
    assert other.digest() != kcache.CacheKey.make("x", config, shape, "sm_90a", host.SOURCES).digest()


def test_key_names_every_ingredient():
    key = kcache.CacheKey.make("k", gemm.GemmConfig(), (1, 128, 256), "sm_90a", host.SOURCES)
    assert key.config == (128, 3, False, False, True, 8, True, False, "device", "rows", True, False, False) and key.shape == (1, 128, 256) and key.arch == "sm_90a"
    assert key.dsl and len(key.source) == 16


# --- the backend ---------------------------------------------------------------------------------------

def test_backend_compile_reports_each_distinct_kernel():
    be = CuteBackend()
    case = cases.get("test-8")  # 4 groups, 2 distinct shapes
    infos = be.compile(case, "sm_90a")
    stages = gemm.stages_for(128)
    assert [i.name for i in infos] == [f"nvfp4_gemm_sm90[m=128,n=128,k=512,tile_m=128,stages={stages}]",
                                       f"nvfp4_gemm_sm90[m=128,n=128,k=256,tile_m=128,stages={stages}]",
                                       "nvfp4_expand_a_sm90"]
    assert infos[-1].threads == gemm.EXPAND_THREADS
    grouped = be.compile(case, "sm_90a", grouped=True)
    # the chunks build: the MMA warpgroups, the producer warp and three helper warps
    assert len(grouped) == 1 and grouped[0].threads == gemm.GemmConfig(persistent=True, readiness="chunks").threads == 384
    assert grouped[0].extra["cache_hit"] in ("cold", "memory", "disk") and grouped[0].extra["wgmma"]
    assert grouped[0].extra["launch"] == "programmatic" and "launch" not in infos[0].extra
    serial = CuteBackend(tensormaps="host", family=Sm90Kernels(programmatic=False))
    assert serial.compile(case, "sm_90a", grouped=True)[0].extra["launch"] == "stream order"
    # case 2 merges tiles on 132 SMs: the wide-tile build, a producer warpgroup beside the MMA ones
    (wide,) = be.compile(cases.get("2"), "sm_90a", grouped=True)
    assert wide.name == "nvfp4_grouped_gemm_sm90[tile_m=128,stages=4,slots=6,wide_tiles,tensormaps=host,chunks_wait]"
    assert (wide.threads, wide.registers) == (384, 168) and wide.extra["frame_bytes"] == 0
    assert wide.extra["setmaxnreg"] == {"inc": gemm.MMA_REGS, "dec": gemm.PRODUCER_REGS} == {"inc": 224, "dec": 56}
    assert "setmaxnreg" not in grouped[0].extra
    assert (be.tiles(cases.get("2"), grouped=True, arch="sm_90a") == [504]
            and be.tiles(cases.get("1"), grouped=True, arch="sm_90a") == [288])  # wide tiles, split


def test_backend_refuses_other_archs_and_bad_shapes():
    be = CuteBackend()
    with pytest.raises(NvggError, match="kernels for sm_90a, sm_100a; sm_80 has none"):
        be.compile(cases.get("test-1"), "sm_80")
    bad = cases.make_case("bad", [64], [256], [288])
    with pytest.raises(NvggError, match="k=288 is not a multiple of 256"):
        be.compile(bad, "sm_90a")


def test_tile_costs_mark_the_half_width_tiles():
    # case 1's second group (m = 176): per n tile a full tile (rows 0-127) and a half one (48 rows)
    assert gemm.tile_costs([176], [256], 128, True) == [1.0, gemm.HALF_TILE_COST] * 2
    assert gemm.tile_costs([176], [256], 128, False) == [1.0, 1.0] * 2
    assert gemm.tile_costs([64, 65], [128, 128], 128, True) == [gemm.HALF_TILE_COST, 1.0]
    assert gemm.tile_costs([40], [128], 64, True) == [1.0]  # only tile_m 128 has a half width
    # wide: a group's last full tile and the at most 64 rows after it, as one tile
    assert gemm.tile_costs([176], [256], 128, True, wide=True) == [gemm.WIDE_TILE_COST] * 2
    assert gemm.HALF_TILE_COST < 1.0 < gemm.WIDE_TILE_COST < 2 * gemm.HALF_TILE_COST  # merging saves work
    assert gemm.tile_costs([196, 64, 300], [128] * 3, 128, True, wide=True) == [
        1.0, 1.0, gemm.HALF_TILE_COST, 1.0, gemm.WIDE_TILE_COST]  # 68 rows over: no merge; alone: half
    assert [gemm.m_tiles_of(m, 128, True) for m in (1, 64, 128, 129, 192, 193, 320, 512)] == [1, 1, 1, 1, 1, 2, 2, 4]
    assert [gemm.m_tiles_of(m, 128) for m in (129, 192, 320)] == [2, 2, 3]


@pytest.mark.parametrize("case_id, merged, spans", [
    ("1", False, (2.75, 2.75)),  # 64 wide, 192 full, 32 half tiles pack no better on 132 CTAs
    ("2", True, (5.25, 4.39)),   # 728 tiles -> 504: 2 wide + 1 full + 1 half on the longest CTAs
    ("3", False, (1.0, 1.32)),   # 120 tiles on 132 CTAs: merging would only lengthen the longest
    ("4", False, (1.0, 1.0)),    # nothing to merge
])
def test_tile_plan_merges_only_where_the_longest_cta_shortens(case_id, merged, spans):
    case = cases.get(case_id)
    wide = gemm.GemmConfig(tile_m=128, stages=4, persistent=True, slots=6, wide_tiles=True)
    assert gemm.tile_plan(case.m, case.n, wide, 132) == merged
    got = []
    for w in (False, True):
        costs = gemm.tile_costs(case.m, case.n, 128, True, w)
        runs, order = gemm.schedule(costs, gemm.grid_for(len(costs), 132))
        assert sorted(order) == list(range(len(costs)))
        got.append(gemm.makespan(costs, runs, order))
    assert tuple(got) == pytest.approx(spans)


def test_schedule_places_every_tile_once_and_pairs_half_tiles_with_full_ones():
    ms, ns = [80, 176, 128, 72, 64, 248, 96, 160], [4096] * 8  # competition case 1
    costs = gemm.tile_costs(ms, ns, 128, True)
    runs, order = gemm.schedule(costs, 132)
    assert len(runs) == 133 and runs[0] == 0 and runs[-1] == len(order) == 352
    assert sorted(order) == list(range(352)) and runs == sorted(runs)
    loads = [sum(costs[t] for t in order[a:b]) for a, b in zip(runs, runs[1:])]
    fulls = [sum(costs[t] == 1.0 for t in order[a:b]) for a, b in zip(runs, runs[1:])]
    # 256 full and 96 half tiles: 96 CTAs take 2 full + 1 half, 32 take 2 full; in kernel order
    # no CTA would take fewer than 3 full tiles' worth
    assert max(fulls) == 2 and max(loads) == pytest.approx(2 + gemm.HALF_TILE_COST)
    assert sum(1 for x in loads if x > 0) == 128
    # without half tiles: the even split, runs of ceil(352 / 132) = 3 in kernel order
    runs, order = gemm.schedule([1.0] * 352, 132)
    assert order == list(range(352)) and runs[:3] == [0, 3, 6] and runs[-1] == 352
    # fewer tiles than CTAs: one each, the rest idle
    runs, order = gemm.schedule([1.0, 0.6, 1.0], 5)
    assert sorted(order) == [0, 1, 2] and runs[-1] == 3 and all(b - a <= 1 for a, b in zip(runs, runs[1:]))


def _split_case(case_id):
    """(costs, stages) of a case's wide-tile build, or of ragged groups of mixed k ("mixed")."""
    if case_id == "mixed":
        ms, ns, ks = [1, 40, 200, 129, 64], [128, 512, 256, 384, 128], [256, 2048, 768, 7168, 512]
    else:
        case = cases.get(case_id)
        ms, ns, ks = case.m, case.n, case.k
    return gemm.tile_costs(ms, ns, 128, True, True), gemm.tile_stages(ms, ns, ks, 128, True)


@pytest.mark.parametrize("case_id", ["1", "2", "3", "4", "test-4", "test-9", "mixed"])
@pytest.mark.parametrize("ctas", [132, 7, 1])
def test_split_schedule_covers_every_stage_once_and_puts_writers_first(case_id, ctas):
    """schedule.split_k: every stage of every tile in exactly one piece; a tile in one piece, or
    cut once into a writer (its first stages) and a reader, each at least 2 stages, the reader
    reading the writer's slot; in each CTA's list at most one writer, first, and one reader, last
    (so no CTA waits for one that waits); on the benchmarks the backend splits, no CTA's work over
    the unsplit schedule's longest."""
    from nvgg.kernels import schedule as sch
    costs, stages = _split_case(case_id)
    runs, pieces = sch.split_k(costs, stages, ctas, gemm.SPLIT_COST)
    assert len(runs) == ctas + 1 and runs[0] == 0 and runs[-1] == len(pieces)
    assert all(a <= b for a, b in zip(runs, runs[1:]))
    by_tile = {}
    for p in pieces:
        by_tile.setdefault(p.tile, []).append(p)
    assert sorted(by_tile) == list(range(len(costs)))
    slots = []
    for t, ps in by_tile.items():
        ps.sort(key=lambda p: p.kb)
        assert ps[0].kb == 0 and ps[-1].ke == stages[t] and all(a.ke == b.kb for a, b in zip(ps, ps[1:]))
        if len(ps) == 1:
            assert (ps[0].role, ps[0].slot) == (sch.WHOLE, 0)
            continue
        writer, reader = ps
        assert (writer.role, reader.role, reader.slot) == (sch.WRITER, sch.READER, writer.slot)
        assert min(writer.ke - writer.kb, reader.ke - reader.kb) >= 2
        slots.append(writer.slot)
    assert sorted(slots) == list(range(len(slots)))
    rank = {sch.WRITER: 0, sch.WHOLE: 1, sch.READER: 2}
    for a, b in zip(runs, runs[1:]):
        roles = [rank[p.role] for p in pieces[a:b]]
        assert roles == sorted(roles) and roles.count(0) <= 1 and roles.count(2) <= 1
    loads = sch.piece_loads(costs, runs, pieces)
    assert sum(loads) == pytest.approx(sum(c * s for c, s in zip(costs, stages)))
    if case_id in ("1", "3") and ctas == 132:  # the cases the backend splits
        unsplit = sch.makespan([c * s for c, s in zip(costs, stages)], *sch.schedule(costs, ctas))
        assert max(sch.piece_loads(costs, runs, pieces, gemm.SPLIT_COST)) <= unsplit
    if case_id == "3" and ctas == 132:
        # wide tiles in two pieces of 8 stages (10.56 of a full tile's + 1 a piece), full tiles 3
        # CTAs to 2 (11 + 1, 5 + 1 and 5 + 1, 11 + 1): 12 against the unsplit 21.12
        assert max(sch.piece_loads(costs, runs, pieces, gemm.SPLIT_COST)) == pytest.approx(12.0)
    if ctas == 1:
        assert all(p.role == sch.WHOLE for p in pieces)


def test_split_pieces_pack_into_four_words_a_piece():
    from nvgg.kernels import schedule as sch
    words = host.pack_pieces([sch.Piece(5, 3, 9, sch.READER, 7), sch.Piece(0, 0, 4)], [0, 4])
    assert words == [5 | 1 << gemm.ORDER_GROUP_SHIFT, 3 | 9 << gemm.SPAN_SHIFT, sch.READER, 7,
                     0, 4 << gemm.SPAN_SHIFT, sch.WHOLE, 0]
    assert "chunks build" in gemm.GemmConfig(persistent=True, split_k=True).problems()
    assert "chunks build" in gemm.GemmConfig(split_k=True).problems()
    split = gemm.GemmConfig(persistent=True, readiness="chunks", split_k=True)
    assert split.problems() is None and "split_k" in host.kernel_name(split, None)
    assert "stages of 256 k" in split.is_valid(128, 128, 256 * gemm.MAX_STAGES)
    assert gemm.partial_words(split) == 64 and gemm.partial_words(replace(split, wide_tiles=True, slots=6)) == 96


@pytest.mark.parametrize("case_id, wide, split", [("1", True, True), ("2", True, False), ("3", True, True),
                                                  ("4", False, False)])
def test_the_backend_splits_where_the_model_shortens_the_longest_cta(case_id, wide, split):
    """Cases 1 and 3 (modelled at 132 SMs: 65.5 against 77 and 12.4 against 16 stages of a full
    tile, the split wide build against the unsplit choice); not cases 2 and 4, where the split
    saves less than SPLIT_MARGIN or nothing (case 4: 128 tiles of 6 stages on 132 CTAs)."""
    from nvgg.kernels.sm90.family import persistent_config
    case = cases.get(case_id)
    config = persistent_config(case.m, case.n, case.k, 132)
    assert (config.wide_tiles, config.split_k) == (wide, split)
    assert not persistent_config(case.m, case.n, case.k, 132, split=False).split_k
    assert persistent_config(case.m, case.n, case.k, 132, split=True).split_k
    assert not persistent_config(case.m, case.n, case.k, 132, "rows", split=True).split_k


def test_schedule_places_any_mix_of_tile_costs():
    import random
    rng = random.Random(3)
    for _ in range(300):
        costs = [rng.choice([gemm.HALF_TILE_COST, 1.0, gemm.WIDE_TILE_COST]) for _ in range(rng.randint(0, 90))]
        ctas = rng.randint(1, 40)
        runs, order = gemm.schedule(costs, ctas)
        assert len(runs) == ctas + 1 and runs[0] == 0 and runs == sorted(runs) and runs[-1] == len(costs)
        assert sorted(order) == list(range(len(costs)))
        # never worse than the even split by count, never better than the mean
        span = gemm.makespan(costs, runs, order)
        assert sum(costs) / ctas - 1e-9 <= span <= max(costs, default=0.0) * -(-len(costs) // ctas) + 1e-9


def test_persistent_tables_count_rows_pack_groups_and_encode_maps_per_group(monkeypatch):
    groups = kgroups.all_groups(inputs.generate(cases.get("test-9"), "cpu"))  # m 40, 56, 384, 512
    calls = []

    def fake(kind):
        def encode(ptr, rows, cols, box):
            calls.append((kind, ptr, rows, cols, box))
            return [len(calls)] * 16
        return encode

    monkeypatch.setattr(host, "encode_tensor_map_f16", fake("a16"))
    monkeypatch.setattr(host, "encode_tensor_map", fake("b"))
    ctas = 132
    config = gemm.GemmConfig(tile_m=128, stages=3, persistent=True, tensormaps="host")
    tables = host.build_tables(groups, config, ctas)
    table = tables.table.tolist()
    # one readiness counter a 32 rows of A, zero before the first launch
    assert [r[gemm.COL_READY_BEGIN] for r in table] == [0, 2, 4, 16] and tables.ready.tolist() == [0] * 32
    assert table[0][gemm.COL_READY] == tables.ready.data_ptr()
    # each tile once in the order, with the group that holds it in its high bits
    order = tables.runs.tolist()[ctas + 1:]
    tiles = [e & (gemm.MAX_TILES - 1) for e in order]
    assert sorted(tiles) == list(range(tables.total_tiles))
    for e, t in zip(order, tiles):
        g = e >> gemm.ORDER_GROUP_SHIFT
        assert table[g][gemm.COL_TILE_BEGIN] <= t < table[g][gemm.COL_TILE_END]
    # host maps: each group's fp16 copy (m × k, 32-row boxes) and packed B (n × k/2 bytes, 128 rows)
    assert calls == [x for g, r in zip(groups, table) for x in (
        ("a16", r[gemm.COL_A16], g.m, g.k, gemm.A16_BOX_ROWS), ("b", g.b.data_ptr(), g.n, g.k // 2, gemm.TILE_N))]
    assert tables.maps.tolist() == [[[2 * i + 1] * 16, [2 * i + 2] * 16] for i in range(len(groups))]
    assert table[0][gemm.COL_MAPS] == tables.maps.data_ptr() and len(tables.encode_us) == len(groups)
    # phase 0's deal: an even share a CTA (test-9: 3968 units on 132 CTAs)
    assert table[0][gemm.COL_DEAL:gemm.COL_DEAL + 4] == [0, 0, ctas, -(-tables.units // ctas)]

    device = host.build_tables(groups, gemm.GemmConfig(tile_m=128, stages=3, persistent=True), ctas)
    # device maps: the template pair (group 0's) alone, which each CTA copies and rewrites
    assert device.maps is None and device.table[0, gemm.COL_MAPS] == 0 and len(calls) == 2 * len(groups) + 2
    assert table[0][gemm.COL_TEMPLATE] == table[0][gemm.COL_WORKSPACE] == 0 and tables.workspace is None
    monkeypatch.setattr(gemm, "MAX_TILES", tables.total_tiles)
    with pytest.raises(ValueError, match="tile order holds fewer than"):
        host.build_tables(groups, config, ctas)


def test_chunks_tables_lay_out_a_stage_of_every_group_and_a_counter_a_row_block_and_stage(monkeypatch):
    groups = kgroups.all_groups(inputs.generate(cases.get("test-4"), "cpu"))  # m 80, 128, 256; k 256, 512, 256
    for name in ("encode_tensor_map_f16", "encode_tensor_map"):  # the template pair needs no driver here
        monkeypatch.setattr(host, name, lambda *args: [0] * 16)
    config = gemm.GemmConfig(tile_m=128, stages=5, persistent=True, tensormaps="device", readiness="chunks")
    assert config.threads == 384 and config.problems() is None
    tables = host.build_tables(groups, config, 132)
    table = tables.table.tolist()
    # units of a stage: each group's rows (rounded up to 8) × 4 blocks of 64 k
    assert [(r[gemm.COL_CHUNK_BEGIN], r[gemm.COL_CHUNK_END]) for r in table] == [(0, 320), (320, 832), (832, 1856)]
    assert (table[0][gemm.COL_CHUNK_UNITS], table[0][gemm.COL_CHUNKS]) == (1856, 2)
    # counters: 3 blocks × 1 stage, 4 blocks × 2 stages, 8 blocks × 1 stage; all zero
    assert [r[gemm.COL_READY_BEGIN] for r in table] == [0, 3, 11] and tables.ready.tolist() == [0] * 19
    assert gemm.chunk_counts(80, 256) == [128, 128, 64]
    assert gemm.chunk_counts(128, 512) == [128] * 8
    assert gemm.chunk_counts(41, 256) == [128, 64]  # 41 rows count as 48: 32, then 16
    assert "persistent kernel only" in gemm.GemmConfig(tile_m=128, readiness="chunks").problems()


@pytest.mark.parametrize("helpers", [396, 5])
@pytest.mark.parametrize("ms, ks", [([80, 128, 256], [256, 512, 256]), ([1, 7, 9, 200, 33], [1024, 256, 768, 256, 512]),
                                    ([40, 76, 168, 72], [2048] * 4)])
def test_chunks_helper_turns_cover_every_unit_once_and_fill_every_counter(ms, ks, helpers):
    """The helper warps' turn arithmetic (nvfp4_gemm._expand_chunks, _chunk_group, and the
    producer's _wait_chunk), replayed on the host for `helpers` warps: every row × 64-k block of
    every group is expanded exactly once, each counter receives exactly what the producer waits
    for, each warp takes its turns stage after stage, and where a stage has no more turns than
    there are warps, each warp keeps to one group."""
    begins, per_stage_units, stages, counters = gemm.chunk_units(ms, ks)
    ends = [b + -(-m // gemm.CHUNK_ROWS) * gemm.CHUNK_ROWS * gemm.SUBS_PER_STAGE for b, m in zip(begins, ms)]
    assert per_stage_units % gemm.CHUNK_UNITS == 0 and all(b % gemm.CHUNK_UNITS == 0 for b in begins)
    per_stage = per_stage_units // gemm.CHUNK_UNITS
    step = helpers - helpers % per_stage if per_stage <= helpers else helpers
    done, added = set(), [0] * counters[-1]
    for warp in range(helpers):
        seen_groups, last_stage = set(), -1
        for turn in range(warp if warp < step else stages * per_stage, stages * per_stage, step):
            stage, unit = turn // per_stage, (turn % per_stage) * gemm.CHUNK_UNITS
            g = sum(1 for e in ends if e <= unit)  # the vote: groups ending at or below the unit
            assert begins[g] <= unit < ends[g]
            assert stage > last_stage if per_stage <= helpers else stage >= last_stage
            last_stage = stage
            seen_groups.add(g)
            if stage * gemm.K_STAGE >= ks[g]:
                continue
            for lane in range(32):
                row = (unit - begins[g]) // gemm.SUBS_PER_STAGE + lane // gemm.SUBS_PER_STAGE
                kb = stage * gemm.SUBS_PER_STAGE + lane % gemm.SUBS_PER_STAGE
                for r in range(row, row + gemm.CHUNK_ROWS, 8):
                    if r < ms[g]:
                        assert (g, r, kb) not in done
                        done.add((g, r, kb))
            block = (unit - begins[g]) // (gemm.READY_ROWS * gemm.SUBS_PER_STAGE)
            added[counters[g] + block * (ks[g] // gemm.K_STAGE) + stage] += gemm.CHUNK_UNITS
        if per_stage <= helpers:
            assert len(seen_groups) <= 1
    assert done == {(g, r, kb) for g, (m, k) in enumerate(zip(ms, ks)) for r in range(m) for kb in range(k // gemm.K_SUB)}
    assert added == [c for m, k in zip(ms, ks) for c in gemm.chunk_counts(m, k)]
    # the producer's wait for stage s of group g: counter begin + block × stages + s, for what
    # chunk_counts says of that counter
    for g, (m, k) in enumerate(zip(ms, ks)):
        padded = -(-m // gemm.CHUNK_ROWS) * gemm.CHUNK_ROWS
        for block in range(-(-padded // gemm.READY_ROWS)):
            for stage in range(k // gemm.K_STAGE):
                want = max(min(padded - block * gemm.READY_ROWS, gemm.READY_ROWS), 0) * gemm.SUBS_PER_STAGE
                assert added[counters[g] + block * (k // gemm.K_STAGE) + stage] == want


def test_persistent_only_options_are_refused_elsewhere():
    assert "persistent kernel only" in gemm.GemmConfig(tensormaps="host").problems()
    assert "persistent kernel only" in gemm.GemmConfig(readiness="grid").problems()
    assert "must be one of" in gemm.GemmConfig(persistent=True, tensormaps="kernel").problems()
    assert gemm.GemmConfig(persistent=True, tensormaps="host", readiness="grid").problems() is None


def test_persistent_kernel_refuses_more_groups_than_it_stages():
    # the group count is checked before anything touches the (here absent) tensors
    data = ([], [], [], [(1, 128, 256, 1)] * (gemm.MAX_GROUPS + 1))
    with pytest.raises(NvggError, match=f"at most {gemm.MAX_GROUPS} groups, got {gemm.MAX_GROUPS + 1}"):
        Sm90Kernels().grouped_launcher(data)
    many = cases.make_case("many", [1] * (gemm.MAX_GROUPS + 1), [128] * (gemm.MAX_GROUPS + 1), [256] * (gemm.MAX_GROUPS + 1))
    assert f"at most {gemm.MAX_GROUPS} groups" in Sm90Kernels().shape_problem(many, grouped=True)
    assert Sm90Kernels().shape_problem(many, grouped=False) is None
    assert gemm.GemmConfig(tile_m=32, slots=4, persistent=True).problems().endswith("phase-0 columns")
    assert gemm.GemmConfig(tile_m=32, slots=8, persistent=True).problems() is None


def test_backend_check_without_a_gpu():
    with pytest.raises(NvggError, match="needs a CUDA GPU"):
        CuteBackend().check(cases.get("test-1"), torch.device("cpu"))


def test_backend_check_names_the_gpu_it_refuses(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    from nvgg.backends import base
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (12, 0))
    base._capability.cache_clear()  # arch_of remembers a device's capability
    try:
        with pytest.raises(NvggError, match="runs on sm_90a, sm_100a; this GPU is sm_120a: use the torch backend"):
            CuteBackend().check(cases.get("test-1"), torch.device("cuda"))
    finally:
        base._capability.cache_clear()


def test_cubin_resources_reads_registers_and_threads(store):
    config = gemm.GemmConfig(tile_m=32, stages=6)
    entry = host.compile_gemm(config, (1, 128, 256), "sm_90a", store=store, need_callable=False)
    (name, res), = kcache.cubin_resources((entry.directory / "kernel.cubin").read_bytes()).items()
    assert name.startswith("kernel_") and res["max_threads"] == [config.threads, 1, 1] and config.threads == 288


# --- on a GPU ----------------------------------------------------------------------------------------

def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _backend(build: str) -> CuteBackend:
    """"per-group", "default" (the backend's choices), or a persistent build: maps (host, device) +
    wait (grid, rows, chunks), unsplit, or its tiles' k split between CTAs with "+split"."""
    if build in ("per-group", "default"):
        return CuteBackend()
    maps, wait, *rest = build.split("+")
    return CuteBackend(tensormaps=maps, family=Sm90Kernels(readiness=wait, split="split" in rest))


@pytest.mark.gpu
@pytest.mark.sm90
@pytest.mark.parametrize("case_id", ["test-1", "test-4", "test-9", "test-10", "ragged"])
@pytest.mark.parametrize("build", ["per-group", "default", "host+rows", "device+rows", "device+grid", "host+chunks",
                                   "device+chunks", "host+chunks+split", "device+chunks+split"])
def test_matches_reference_on_competition_inputs(case_id, build):
    """Per-group launches, and the persistent kernel with either map mode and either wait.
    "ragged": groups of m 1-300 and k 1024-4096, whose tiles the split build cuts (the test
    cases' k of at most 3 stages are never cut: a piece holds at least 2)."""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    if case_id == "ragged":
        case = cases.make_case("ragged", [1, 33, 64, 65, 129, 200, 256, 300], [128, 256, 128, 384, 256, 128, 512, 256],
                               [1024, 2048, 4096, 1536, 1024, 3072, 2048, 1024])
    else:
        case = cases.get(case_id)
    data = inputs.generate(case, "cuda")
    want = reference.reference(data)
    reference.poison(data)  # every element must be written
    be = _backend(build)
    be.check(case, torch.device("cuda"))
    launches = [be.grouped_launcher(data)] if build != "per-group" else [be.group_launcher(data, g) for g in range(case.g)]
    if build.endswith("split") and case_id == "ragged":  # its writers and readers ran
        words = launches[0].tables.runs.cpu().tolist()[launches[0].grid[0] + 1:]
        assert WRITER in words[2::gemm.ORDER_WORDS]
    for launch in launches:
        launch()
    torch.cuda.synchronize()
    result = reference.check(inputs.outputs(data), want)  # the competition's rtol = atol = 1e-3
    assert result.ok, result.message


@pytest.mark.gpu
@pytest.mark.sm90
@pytest.mark.parametrize("build", ["host+grid", "device+grid", "host+rows", "host+chunks", "host+chunks+split"])
def test_phase_buffer_orders_the_phases_of_every_cta_with_work(build):
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    from nvgg.kernels.sm90.phase_slots import SM90
    from nvgg.profiling import phases

    case = cases.get("3")
    data = inputs.generate(case, "cuda")
    want = reference.reference(data)
    reference.poison(data)
    launch, buffer = _backend(build).phase_launcher(data)
    launch()
    torch.cuda.synchronize()
    result = reference.check(inputs.outputs(data), want)
    assert result.ok, result.message
    rows = buffer.cpu().tolist()
    worked = [r for r in rows if r[SM90.FIRST_MMA] > 0]
    # the split build: a piece for every CTA (case 3's 1152 stages over 132)
    assert worked and len(worked) == (len(rows) if build.endswith("split") else min(len(rows), host.count_tiles(
        [kgroups.group_tensors(data, g) for g in range(case.g)], config_for(case.m, persistent=True).tile_m)))
    for r in worked:
        assert (r[SM90.START] < r[SM90.DESC_READY] <= r[SM90.FIRST_MMA] < r[SM90.MAINLOOP_DONE]
                <= r[SM90.EPILOGUE_DONE] <= r[SM90.EXIT]), r[:SM90.FIRST_SWITCH]
        # the producer saw its first tile's rows after its maps; the MMA warps issued after their
        # own share of phase 0 and after those rows were seen (the grid barrier: after every share);
        # the chunks build's helpers stream A beside the main loops: their end is after the start
        assert r[SM90.START] < r[SM90.PHASE0_DONE], r[:SM90.FIRST_SWITCH]
        chunks = "chunks" in build
        if not chunks:
            assert r[SM90.PHASE0_DONE] <= r[SM90.FIRST_MMA], r[:SM90.FIRST_SWITCH]
        if chunks:
            # A_READY: the MMA warps decoded the first tile's first stage themselves, beside the
            # producer's maps, before their first MMA; the maps precede the first B copy
            assert r[SM90.START] <= r[SM90.A_READY] <= r[SM90.FIRST_MMA], r[:SM90.FIRST_SWITCH]
            assert r[SM90.DESC_READY] <= r[SM90.FIRST_MMA], r[:SM90.FIRST_SWITCH]
        else:
            assert r[SM90.DESC_READY] <= r[SM90.A_READY] <= r[SM90.FIRST_MMA], r[:SM90.FIRST_SWITCH]
        if build.endswith("grid"):
            assert r[SM90.A_READY] >= max(x[SM90.PHASE0_DONE] for x in rows)
        switches = r[SM90.SWITCHES]
        assert 0 <= switches < case.g
        stamps = r[SM90.FIRST_SWITCH:SM90.FIRST_SWITCH + switches]
        assert all(r[SM90.DESC_READY] < t < r[SM90.EXIT] for t in stamps)
    for r in rows:
        assert r[SM90.START] > 0 and r[SM90.EXIT] >= r[SM90.START]
    if "chunks" in build:
        # every CTA's helpers expanded their turns, CTAs without a tile too, and the last of them
        # finished while some CTA still had a stage to load
        assert all(r[SM90.PHASE0_DONE] > r[SM90.START] for r in rows)
        assert max(r[SM90.PHASE0_DONE] for r in rows) < max(r[SM90.MAINLOOP_DONE] for r in rows)
    report = phases.analyse(buffer, _backend(build).phase_layout(torch.device("cuda")))
    assert report.ctas_with_work == len(worked) and report.kernel_us > 0


@pytest.mark.gpu
@pytest.mark.sm90
@pytest.mark.parametrize("case_id", ["3", "test-4", "many"])
@pytest.mark.parametrize("build", ["host+grid", "device+grid", "host+rows", "device+rows", "host+chunks",
                                   "device+chunks", "host+chunks+split", "device+chunks+split"])
def test_repeated_launches_wait_for_their_own_phase_0(case_id, build):
    """Neither the launch count nor the row counters are ever reset: each launch must wait for its
    own fp16 copy, not pass on the previous launch's counts. The copy is poisoned (NaN) before
    every launch, so a main loop that read it early would put NaN into C. "many": 200 groups of
    m 1-200 (more groups than CTAs, groups of one row, most groups no CTA starts in)."""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    if case_id == "many":
        ms = [1 + (37 * i) % 200 for i in range(200)]
        case = cases.make_case("many", ms, [128 + 128 * (i % 3) for i in range(200)], [256 + 256 * (i % 2) for i in range(200)])
    else:
        case = cases.get(case_id)
    data = inputs.generate(case, "cuda")
    want = reference.reference(data)
    launch = _backend(build).grouped_launcher(data)
    tables = launch.tables
    launches = 5
    for _ in range(launches):
        reference.poison(data)
        # no synchronisation before the launch: a programmatic launch writes the copy only after
        # the kernel before it (this fill) has ended
        tables.a16.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        result = reference.check(inputs.outputs(data), want)
        assert result.ok, result.message
    assert tables.barrier.cpu().tolist() == [launches << 32]  # 2^32 a launch, whatever the grid
    assert tables.ready.cpu().tolist() == [launches * c for c in _counts(build, case)]
    if build.endswith("split"):  # each writer's slot flagged once a launch (a dummy slot where none)
        words = tables.runs.cpu().tolist()[launch.grid[0] + 1:]
        writers = words[2::gemm.ORDER_WORDS].count(WRITER)
        assert tables.flags.cpu().tolist() == ([launches] * writers if writers else [0])
        assert writers or case_id != "3"


def _counts(build: str, case) -> list[int]:
    """What one launch adds to each readiness counter: a row block's work units (rows × k/64) in
    the rows build, each stage of each row block's (gemm.chunk_counts) in the chunks build, none in
    the grid build (its phase 0 never counts rows)."""
    if build.split("+")[1] == "chunks":
        return [c for m, _, k in case.groups for c in gemm.chunk_counts(m, k)]
    return [min(gemm.READY_ROWS, m - r) * (k // gemm.K_SUB) if build.endswith("rows") else 0
            for m, _, k in case.groups for r in range(0, m, gemm.READY_ROWS)]


@pytest.mark.gpu
@pytest.mark.sm90
@pytest.mark.parametrize("build", ["host+rows", "device+grid", "host+rows+wide", "host+chunks", "host+chunks+wide",
                                   "host+chunks+split", "device+chunks+split+wide"])
def test_programmatic_launches_back_to_back(build):
    """Programmatic launches (each may start while the one before finishes) with no
    synchronisation between them: ten over the same tables (each launch reads the launch count
    and the row counters only after the one before has ended, so their counts cannot mix), then
    launches over three inputs in turn as the timer makes them, C poisoned once before all.
    "wide": case 2, which the backend runs with wide tiles on 132 SMs; "split": its tiles' k split."""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    wide = build.endswith("+wide")
    maps, wait = build.split("+")[:2]
    case = cases.get("2" if wide else "3")
    batch = [inputs.generate(case, "cuda", seed=case.seed + 42 * i) for i in range(3)]
    wants = [reference.reference(d) for d in batch]
    launches = [_backend(build.replace("+wide", "")).grouped_launcher(d) for d in batch]
    assert all(x.programmatic for x in launches)
    for d in batch:
        reference.poison(d)
    for _ in range(10):
        launches[0]()
    torch.cuda.synchronize()
    assert launches[0].tables.barrier.cpu().tolist() == [10 << 32]
    assert launches[0].tables.ready.cpu().tolist() == [10 * c for c in _counts(f"{maps}+{wait}", case)]
    for _ in range(3):
        for launch in launches:
            launch()
    torch.cuda.synchronize()
    for d, want in zip(batch, wants):
        result = reference.check(inputs.outputs(d), want)
        assert result.ok, result.message


@pytest.mark.gpu
@pytest.mark.sm90
def test_programmatic_launches_right_behind_a_refill_of_their_inputs():
    """A programmatic launch sees the kernel before it only after griddepcontrol.wait, which every
    thread executes before it reads anything (tests/test_grid_dependency.py checks that on the
    PTX): here the kernel right before every launch is the refill's last copy into the inputs
    (no flush between, unlike the timer). 30 launches, each output against the reference of its
    inputs."""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    case = cases.get("3")
    data = inputs.generate(case, "cuda")
    launch = CuteBackend(tensormaps="host").grouped_launcher(data)
    assert launch.programmatic
    kept = []
    for i in range(30):
        inputs.refill(case, data, i % 15)
        launch()
        kept.append([c.clone() for c in inputs.outputs(data)])
    torch.cuda.synchronize()
    for i, outs in enumerate(kept):
        twin = inputs.generate(case, "cuda")  # refill's values depend on the case and the index alone
        inputs.refill(case, twin, i % 15)
        result = reference.check(outs, reference.reference(twin))
        assert result.ok, f"launch {i}: {result.message}"


@pytest.mark.gpu
@pytest.mark.sm90
def test_dsl_launch_with_arguments_converted_once_matches_the_reference_on_any_stream():
    """launch.DslLaunch (the sm_100a backend's launch path: the DSL's own host function, arguments
    converted once, the stream set per call) checked on the sm_90a persistent kernel: right on the
    default stream and on a side stream behind a GPU sleep (so a launch on the wrong stream would
    read C before it is written)."""
    from cutlass.cute.runtime import make_ptr

    from nvgg.kernels import launch as klaunch

    case = cases.get("test-4")
    data = inputs.generate(case, "cuda")
    groups, config, _, ctas = Sm90Kernels()._persistent(data, "device", instrument=False)
    entry = host.compile_gemm(config, None, "sm_90a")  # with the DSL's callable
    tables = host.build_tables(groups, config, ctas)
    args = (make_ptr(cutlass.Int64, tables.table.data_ptr(), cutlass.cute.AddressSpace.gmem, assumed_align=16),
            cutlass.Int32(tables.total_tiles), cutlass.Int32(ctas))
    launch = klaunch.DslLaunch(entry.fn, args, keep=tables)
    # the driver path (the backend's), on the same tables: the same output
    direct = klaunch.DirectLaunch(entry, tables, host.grid_dims(config, None, ctas))
    verdict = reference.checked_call(data, direct)
    assert verdict.ok, verdict.message
    verdict = reference.checked_call(data, launch)
    assert verdict.ok, verdict.message
    want = reference.reference(data)
    reference.poison(data)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000)
        launch()
    side.synchronize()
    result = reference.check(inputs.outputs(data), want)
    assert result.ok, result.message


@pytest.mark.gpu
@pytest.mark.sm90
def test_every_builds_grid_is_what_the_driver_keeps_resident():
    """The persistent kernel's CTAs wait on each other, so its grid may hold only the CTAs resident
    at once: for every build of the sweep's space, the CTAs an SM takes by nvgg's rules
    (config.ctas_per_sm) equal the CUDA occupancy API's answer for the built cubin. (Counted by the
    SM's register total, tile_m 64 with 2 stages and 8 slots, 99 registers, took 2 an SM where 1
    fits: case 4's grid of 256 CTAs hung.)"""
    if not _sm90():
        pytest.skip("needs an sm_90 GPU")
    import json
    from pathlib import Path

    from nvgg import space
    from nvgg.backends import cute
    from nvgg.profiling.occupancy_report import device_blocks_per_sm
    built = space.compile_all(cute.family("sm_90a"), [cases.get("4")], "sm_90a", sms=132)
    answers = {}
    for b in built:
        assert not b.error, (b.point.name, b.error)
        for k in b.kernels:
            info = json.loads((Path(k["cache_dir"]) / "info.json").read_text())
            api = device_blocks_per_sm(str(Path(k["cache_dir"]) / "kernel.cubin"), k["threads"], info["dynamic_smem_bytes"],
                                       kcache.kernel_symbol(info))
            model = gemm.ctas_per_sm(k["registers"], k["smem_bytes"], k["threads"])
            assert model == api, (b.point.name, k["registers"], k["smem_bytes"], model, api)
            answers[b.point.name] = model
    assert len(answers) == sum(not b.point.refused for b in built) >= 80
    # the space's builds wait "chunks" (the family's default): 384 threads, whose registers leave
    # room for one CTA an SM in every build (the rows builds, 288 threads, had some at two)
    assert set(answers.values()) == {1}
