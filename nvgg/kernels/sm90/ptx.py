"""Inline PTX for the sm_90a NVFP4 kernels: the few instructions CuTe DSL does not expose the way
these kernels need them.

Every helper takes plain integers: shared-memory addresses as 32-bit values (what a shared pointer's
`toint()` gives), global addresses as 64-bit values. Memory-touching helpers are volatile and clobber
memory so that the compiler keeps them in program order with the barriers around them.

Asynchronous copies (the bulk tensor copy and the plain bulk copy) and the tensor-map writes and
fences are issued by one lane of the calling warp, the predicate computed *inside* the asm. Wrapping
them in a branch instead lets ptxas sink the operand moves into uniform registers (R2UR) under the branch
predicate, which sm_90a rejects at run time (CUDA error 715, an illegal instruction); with the
predicate on the instruction itself every lane computes the operands and only the copy is
predicated. The lane is the one `elect.sync` elects over the full warp: "the same leader thread is
elected for the same membermask every time" (PTX ISA, elect.sync), so the thread that fences a
tensor map is the one that then uses it. (`%laneid == 0` served the same purpose, but ptxas did not
always reuse the lane-id read across blocks and re-read it before each copy of the producer's loop,
which made its stages longer: lab log, the producer warp's lane reads.)
"""

from __future__ import annotations

from cutlass import Float32, Int32, Int64
from cutlass.cutlass_dsl import T, dsl_user_op

from ..asm import globaltimer, inline as _asm  # noqa: F401  (globaltimer: the kernels' timer)
from .config import HALF_HIGH, HALF_LOW, TENSORMAP_BYTES  # noqa: F401  (decode_half's selectors)

def _lane0(body: str, decls: str = "") -> str:
    """A PTX block whose `@p` instructions run on the elected lane only (see the module docstring);
    `decls` are extra register declarations, `body` its instruction lines. The whole warp must
    execute it."""
    return ("{\n    .reg .pred p;\n" + decls
            + "    elect.sync _|p, 0xffffffff;\n" + body + "\n}")


@dsl_user_op
def tma_load_2d(dst: Int32, desc: Int64, x: Int32, y: Int32, mbar: Int32, evict: str = "", *, loc=None,
                ip=None) -> None:
    """One lane of the warp copies the box at element coordinates (x, y) of the 2-D tensor map at
    global address `desc` into shared memory at `dst`; completion is counted on mbarrier `mbar`.
    `evict` ("first" or "last") attaches that L2 eviction priority to the lines the copy reads."""
    if evict:
        copy = f"""    .reg .b64 policy;
    createpolicy.fractional.L2::evict_{evict}.b64 policy, 1.0;
    @p cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint [$0], [$1, {{$2, $3}}], [$4], policy;"""
    else:
        copy = "    @p cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];"
    _asm(_lane0(copy), "r,l,r,r,r,~{memory}", [Int32(dst), Int64(desc), Int32(x), Int32(y), Int32(mbar)], loc, ip)


@dsl_user_op
def bulk_load(dst: Int32, src: Int64, nbytes: Int32, mbar: Int32, *, loc=None, ip=None) -> None:
    """One lane of the warp copies `nbytes` (a multiple of 16, both addresses 16-byte aligned)
    from global `src` to shared `dst`; completion is counted on mbarrier `mbar`."""
    _asm(_lane0("    @p cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];"),
         "r,l,r,r,~{memory}", [Int32(dst), Int64(src), Int32(nbytes), Int32(mbar)], loc, ip)




COPY_BATCH = 4  # 16-byte chunks in flight at once: 16 registers, which the producer can spare


def _copy_pair_ptx() -> str:
    # loads first, then stores, COPY_BATCH chunks at a time: four round trips to global memory
    # instead of sixteen, in 16 registers instead of 64 (with wide tiles the producer warpgroup
    # runs on PRODUCER_REGS registers after setmaxnreg)
    chunks = 2 * TENSORMAP_BYTES // 16
    regs = ", ".join(f"a{i}, b{i}" for i in range(COPY_BATCH))
    lines = []
    for first in range(0, chunks, COPY_BATCH):
        batch = range(first, first + COPY_BATCH)
        lines += [f"    @p ld.global.v2.b64 {{a{i - first}, b{i - first}}}, [$1+{16 * i}];" for i in batch]
        lines += [f"    @p st.global.v2.b64 [$0+{16 * i}], {{a{i - first}, b{i - first}}};" for i in batch]
    return _lane0("\n".join(lines), f"    .reg .b64 {regs};\n")


_COPY_PAIR = _copy_pair_ptx()


@dsl_user_op
def copy_tensormaps(dst: Int64, src: Int64, *, loc=None, ip=None) -> None:
    """One lane copies a pair of 128-byte tensor maps (A then B) from `src` to `dst` with plain
    global loads and stores: the CTA's own descriptor pair, initialised from the host's template.
    The copy engine sees it only after `publish_tensormaps`."""
    _asm(_COPY_PAIR, "l,l,~{memory}", [Int64(dst), Int64(src)], loc, ip)


@dsl_user_op
def retarget_tensormap(desc: Int64, address: Int64, rows: Int32, cols: Int32, row_bytes: Int32, *, loc=None,
                       ip=None) -> None:
    """One lane points the 2-D tensor map at global address `desc` to another matrix of `rows` rows
    of `cols` elements, rows `row_bytes` apart, at `address`, in place, with tensormap.replace
    (sm_90a): the base address, both dimensions (dimension 0 is the row) and the row stride (the
    stride of dimension 1, in bytes). Box, swizzle, element type and fill mode stay those of the
    template. The writes are generic-proxy writes: the map must be published
    (`publish_tensormaps`) before a bulk tensor copy reads it."""
    _asm(_lane0("""    cvt.u64.u32 stride, $4;
    @p tensormap.replace.tile.global_address.global.b1024.b64 [$0], $1;
    @p tensormap.replace.tile.global_dim.global.b1024.b32 [$0], 0, $3;
    @p tensormap.replace.tile.global_dim.global.b1024.b32 [$0], 1, $2;
    @p tensormap.replace.tile.global_stride.global.b1024.b64 [$0], 0, stride;""", "    .reg .b64 stride;\n"),
         "l,l,r,r,r,~{memory}", [Int64(desc), Int64(address), Int32(rows), Int32(cols), Int32(row_bytes)], loc, ip)


@dsl_user_op
def publish_tensormaps(desc: Int64, *, loc=None, ip=None) -> None:
    """One lane makes its generic-proxy writes to the tensor-map pair at `desc` (A, then B 128
    bytes later) visible to its own later bulk tensor copies.

    The PTX memory model treats a tensor map as data of the tensormap proxy: writes made through
    the generic proxy (st.global, tensormap.replace) reach the copy engine only through
    fence.proxy.tensormap::generic release (by the writer) and acquire (by the thread that then
    issues the copies; here the same lane). The acquire also drops whatever the copy engine
    cached for these addresses, which matters because the workspace is reused across launches.
    """
    _asm(_lane0(f"""    @p fence.proxy.tensormap::generic.release.gpu;
    @p fence.proxy.tensormap::generic.acquire.gpu [$0], {TENSORMAP_BYTES};
    @p fence.proxy.tensormap::generic.acquire.gpu [$0+{TENSORMAP_BYTES}], {TENSORMAP_BYTES};"""),
         "l,~{memory}", [Int64(desc)], loc, ip)


# fp16 64.0 in both halves of a register: undoes the 2^-6 of the e4m3 reading of an e2m1 code
F16X2_SIXTY_FOUR = 0x54005400

# the e4m3 words of an e2m1 word {w}: even = v0, v2, v4, v6 and odd = v1, v3, v5, v7, each byte the
# value times 2^-6 (decode_word)
_E4M3_WORDS = """    shl.b32 t, {w}, 4;
    and.b32 t, t, 0x80808080;
    shl.b32 u, {w}, 2;
    and.b32 u, u, 0x1C1C1C1C;
    or.b32 even, t, u;
    and.b32 t, {w}, 0x80808080;
    shr.b32 u, {w}, 2;
    and.b32 u, u, 0x1C1C1C1C;
    or.b32 odd, t, u;
"""

_DECODE_WORD = """{
    .reg .b32 t, u, even, odd, r;
    .reg .b16 e0, e1, o0, o1;
""" + _E4M3_WORDS.format(w="$4") + """    mov.b32 {e0, e1}, even;
    mov.b32 {o0, o1}, odd;
    cvt.rn.f16x2.e4m3x2 r, e0;
    mul.rn.f16x2 $0, r, $5;
    cvt.rn.f16x2.e4m3x2 r, e1;
    mul.rn.f16x2 $1, r, $5;
    cvt.rn.f16x2.e4m3x2 r, o0;
    mul.rn.f16x2 $2, r, $5;
    cvt.rn.f16x2.e4m3x2 r, o1;
    mul.rn.f16x2 $3, r, $5;
}"""


_DECODE_HALF = """{
    .reg .b32 t, u, even, odd, both, r;
    .reg .b16 lo, hi;
""" + _E4M3_WORDS.format(w="$2") + """    prmt.b32 both, even, odd, $4;
    mov.b32 {lo, hi}, both;
    cvt.rn.f16x2.e4m3x2 r, lo;
    mul.rn.f16x2 $0, r, $3;
    cvt.rn.f16x2.e4m3x2 r, hi;
    mul.rn.f16x2 $1, r, $3;
}"""


@dsl_user_op
def decode_word(word: Int32, scale2: Int32, *, loc=None, ip=None) -> tuple[Int32, Int32, Int32, Int32]:
    """The 8 e2m1 values v0..v7 of `word` (v0 in the low nibble) expanded to fp16 and multiplied by
    the fp16 pair `scale2`, which must be the scale times 64 (see `ld_shared_scale`), as four
    registers of two fp16 each: (v0, v2), (v4, v6), (v1, v3), (v5, v7).

    Each e2m1 code s|e1 e0|m is rewritten as the e4m3 byte s|0 0 e1 e0|m 0 0, which reads as the
    e2m1 value times 2^-6 for every code (the e2m1 subnormal 0.5 lands on the e4m3 subnormal
    2^-7); the even nibbles of each byte need their sign moved to bit 7, the odd ones have it there
    already. The hardware e4m3 -> fp16 conversion then does two values per instruction, and the
    multiply by 64 * scale is exact (64 × 448 < 65504; every e2m1 × e4m3 product is an fp16: at
    most 6 × 448, at least 0.5 × 2^-9 = 2^-10, with at most 5 significant bits)."""
    return _asm(_DECODE_WORD, "=r,=r,=r,=r,r,r", [Int32(word), Int32(scale2)], loc, ip, results=4, pure=True)


@dsl_user_op
def decode_half(word: Int32, scale2: Int32, selector: Int32, *, loc=None, ip=None) -> tuple[Int32, Int32]:
    """Half of `decode_word`: its registers (0, 2) where `selector` is HALF_LOW, (1, 3) where it is
    HALF_HIGH, that is (v0, v2), (v1, v3) or (v4, v6), (v5, v7), by the same e4m3 bytes, conversion
    and multiply (a prmt takes the chosen halves of the even and the odd bytes into one register)."""
    return _asm(_DECODE_HALF, "=r,=r,r,r,r", [Int32(word), Int32(scale2), Int32(selector)], loc, ip, results=2, pure=True)


@dsl_user_op
def ld_shared_v2(addr: Int32, *, loc=None, ip=None) -> tuple[Int32, Int32]:
    """8-byte shared-memory load into two 32-bit registers."""
    return _asm("ld.shared.v2.b32 {$0, $1}, [$2];", "=r,=r,r,~{memory}", [Int32(addr)], loc, ip, results=2)


@dsl_user_op
def ld_shared_scale(addr: Int32, *, loc=None, ip=None) -> Int32:
    """One e4m3 scale (the byte at `addr`) times 64 as fp16, broadcast to both halves of a register
    (the scale `decode_word` takes). e4m3 -> fp16 is exact, and so is the power-of-two multiply."""
    return Int32(_asm(
        f"""{{
    .reg .b16 h;
    .reg .b32 f, k;
    ld.shared.u8 h, [$1];
    cvt.rn.f16x2.e4m3x2 f, h;
    prmt.b32 f, f, f, 0x1010;
    mov.b32 k, 0x{F16X2_SIXTY_FOUR:08X};
    mul.rn.f16x2 $0, f, k;
}}""",
        "=r,r,~{memory}", [Int32(addr)], loc, ip, results=1, result_type=T.i32))


# four e4m3 scales in register w (the first in the low byte) -> $0..$3, each times 64 as fp16 in both
# halves of a register
_SCALE_QUAD = f"""    mov.b32 {{lo, hi}}, w;
    cvt.rn.f16x2.e4m3x2 f, lo;
    cvt.rn.f16x2.e4m3x2 g, hi;
    mov.b32 k, 0x{F16X2_SIXTY_FOUR:08X};
    mul.rn.f16x2 f, f, k;
    mul.rn.f16x2 g, g, k;
    prmt.b32 $0, f, f, 0x1010;
    prmt.b32 $1, f, f, 0x3232;
    prmt.b32 $2, g, g, 0x1010;
    prmt.b32 $3, g, g, 0x3232;
"""


@dsl_user_op
def ld_global_scale_quad(addr: Int64, *, loc=None, ip=None) -> tuple[Int32, Int32, Int32, Int32]:
    """Four consecutive e4m3 scales (4 bytes at `addr` in read-only global memory, the first in the
    low byte), each times 64 as fp16 broadcast to both halves of a register (see
    `ld_shared_scale`)."""
    return _asm("""{
    .reg .b16 lo, hi;
    .reg .b32 w, f, g, k;
    ld.global.nc.b32 w, [$4];
""" + _SCALE_QUAD + "}", "=r,=r,=r,=r,l,~{memory}", [Int64(addr)], loc, ip, results=4)


@dsl_user_op
def scale_quad(word: Int32, *, loc=None, ip=None) -> tuple[Int32, Int32, Int32, Int32]:
    """`ld_global_scale_quad`'s four registers from the four scales already loaded into `word`."""
    return _asm("""{
    .reg .b16 lo, hi;
    .reg .b32 w, f, g, k;
    mov.b32 w, $4;
""" + _SCALE_QUAD + "}", "=r,=r,=r,=r,r", [Int32(word)], loc, ip, results=4, pure=True)


@dsl_user_op
def ld_global_b32(addr: Int64, *, loc=None, ip=None) -> Int32:
    """4 bytes of read-only global memory (the non-coherent path)."""
    return Int32(_asm("ld.global.nc.b32 $0, [$1];", "=r,l,~{memory}", [Int64(addr)], loc, ip, results=1,
                      result_type=T.i32))


@dsl_user_op
def ld_global_v4(addr: Int64, *, loc=None, ip=None) -> tuple[Int32, Int32, Int32, Int32]:
    """16 bytes of read-only global memory (the non-coherent path) into four 32-bit registers."""
    return _asm("ld.global.nc.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l,~{memory}", [Int64(addr)], loc, ip,
                results=4)


@dsl_user_op
def st_global_v4(addr: Int64, r0: Int32, r1: Int32, r2: Int32, r3: Int32, *, loc=None, ip=None) -> None:
    """16-byte global store of four 32-bit registers."""
    _asm("st.global.v4.b32 [$0], {$1, $2, $3, $4};", "l,r,r,r,r,~{memory}",
         [Int64(addr)] + [Int32(r) for r in (r0, r1, r2, r3)], loc, ip)


# two fp32 rounded to fp16 (to nearest even) and stored as one 32-bit word at $0, $1 at the lower
# address (cvt.rn.f16x2.f32 puts its first source in the upper half)
_F16X2_STORE = """{{
{guard_decl}    .reg .b32 pair;
{guard_set}    cvt.rn.f16x2.f32 pair, $2, $1;
    {guard}st.{space}.b32 [$0], pair;
}}"""
_UNGUARDED = {"guard_decl": "", "guard_set": "", "guard": ""}
# the store only where operand $3 is non-zero
_GUARDED = {"guard_decl": "    .reg .pred p;\n", "guard_set": "    setp.ne.s32 p, $3, 0;\n", "guard": "@p "}


@dsl_user_op
def st_global_f16x2(addr: Int64, lo: Float32, hi: Float32, *, loc=None, ip=None) -> None:
    """Round `lo` and `hi` to fp16 (to nearest even) and store them as one 32-bit word at `addr`,
    `lo` at the lower address (cvt.rn.f16x2.f32 puts its first source in the upper half)."""
    _asm(_F16X2_STORE.format(space="global", **_UNGUARDED), "l,f,f,~{memory}", [Int64(addr), Float32(lo), Float32(hi)], loc, ip)


@dsl_user_op
def st_global_f16x2_if(addr: Int64, lo: Float32, hi: Float32, store: Int32, *, loc=None, ip=None) -> None:
    """`st_global_f16x2` where `store` is non-zero, predicated rather than branched around (a
    branch around each store made `_store`'s code more than twice as long)."""
    _asm(_F16X2_STORE.format(space="global", **_GUARDED), "l,f,f,r,~{memory}",
         [Int64(addr), Float32(lo), Float32(hi), Int32(store)], loc, ip)


@dsl_user_op
def st_shared_f16x2(addr: Int32, lo: Float32, hi: Float32, *, loc=None, ip=None) -> None:
    """`st_global_f16x2` into shared memory: `lo` and `hi` rounded to fp16, one 32-bit word."""
    _asm(_F16X2_STORE.format(space="shared", **_UNGUARDED), "r,f,f,~{memory}", [Int32(addr), Float32(lo), Float32(hi)], loc, ip)


@dsl_user_op
def ld_shared_v4(addr: Int32, *, loc=None, ip=None) -> tuple[Int32, Int32, Int32, Int32]:
    """16-byte shared-memory load into four 32-bit registers."""
    return _asm("ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r,~{memory}", [Int32(addr)], loc, ip,
                results=4)


@dsl_user_op
def st_shared_v4(addr: Int32, r0: Int32, r1: Int32, r2: Int32, r3: Int32, *, loc=None, ip=None) -> None:
    """16-byte shared-memory store of four 32-bit registers."""
    _asm("st.shared.v4.b32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r,~{memory}",
         [Int32(addr)] + [Int32(r) for r in (r0, r1, r2, r3)], loc, ip)


# The split build's partial sums (nvfp4_gemm.py, `_write_partial`, `_add_partials`): a writer
# stores its accumulators, a reader adds them to its own once the writer's flag says so. The
# reader's loads bypass L1 (.cg): the words were written by another SM in this launch.

@dsl_user_op
def st_global_v4_f32(addr: Int64, a: Float32, b: Float32, c: Float32, d: Float32, *, loc=None, ip=None) -> None:
    """16-byte global store of four fp32."""
    _asm("st.global.v4.f32 [$0], {$1, $2, $3, $4};", "l,f,f,f,f,~{memory}",
         [Int64(addr)] + [Float32(x) for x in (a, b, c, d)], loc, ip)


@dsl_user_op
def add_global_v4_f32(addr: Int64, a: Float32, b: Float32, c: Float32, d: Float32, *, loc=None,
                      ip=None) -> tuple[Float32, Float32, Float32, Float32]:
    """(a, b, c, d) plus the four fp32 at `addr`, read at L2 (ld.global.cg)."""
    return _asm("""{
    .reg .f32 x, y, z, w;
    ld.global.cg.v4.f32 {x, y, z, w}, [$4];
    add.f32 $0, $5, x;
    add.f32 $1, $6, y;
    add.f32 $2, $7, z;
    add.f32 $3, $8, w;
}""", "=f,=f,=f,=f,l,f,f,f,f,~{memory}", [Int64(addr)] + [Float32(x) for x in (a, b, c, d)], loc, ip,
        results=4, floats=True)


@dsl_user_op
def st_shared_b32(addr: Int32, value: Int32, *, loc=None, ip=None) -> None:
    """One 32-bit shared-memory store."""
    _asm("st.shared.b32 [$0], $1;", "r,r,~{memory}", [Int32(addr), Int32(value)], loc, ip)


@dsl_user_op
def ld_shared_b32(addr: Int32, *, loc=None, ip=None) -> Int32:
    """One 32-bit shared-memory load."""
    return Int32(_asm("ld.shared.b32 $0, [$1];", "=r,r,~{memory}", [Int32(addr)], loc, ip, results=1,
                      result_type=T.i32))


@dsl_user_op
def fence_proxy_async_shared(*, loc=None, ip=None) -> None:
    """fence.proxy.async.shared::cta: order this thread's generic-proxy shared-memory stores before
    the async proxy's reads of them (wgmma's shared-memory operand) that follow a barrier."""
    _asm("fence.proxy.async.shared::cta;", "~{memory}", [], loc, ip)


@dsl_user_op
def fence_proxy_async_global(*, loc=None, ip=None) -> None:
    """fence.proxy.async.global: order this thread's generic-proxy global accesses with the async
    proxy (bulk tensor copies). The writer of data that another CTA's copies will read fences after
    its stores; the thread that issues those copies fences after it has seen the data published."""
    _asm("fence.proxy.async.global;", "~{memory}", [], loc, ip)


@dsl_user_op
def fence_proxy_async(*, loc=None, ip=None) -> None:
    """fence.proxy.async (every state space): as `fence_proxy_async_global`, and also for this
    thread's shared-memory accesses that later bulk copies into the same bytes must not overtake."""
    _asm("fence.proxy.async;", "~{memory}", [], loc, ip)


# A grid barrier for a grid that is resident at once (the persistent kernel's), split in two so
# that the threads that arrive (one a CTA, after the CTA's writes and a CTA-level barrier over the
# writers) and those that wait may differ. `state` points at a u64 in global memory, zero before
# the first launch, that only grows: the CTAs of one launch add 2^32 between them (CTA 0 the
# remainder of an even split), so a launch's target is the next multiple of 2^32 above the count
# that a CTA finds before any of its threads arrives (a CTA barrier in between). Arrival is a
# fire-and-forget release add, the wait an acquire poll; nothing is reset, so launches and graph
# replays need no reset, whatever their grid sizes (2^32 launches before the count wraps). No
# 64-bit division: ptxas makes that a subroutine call.

@dsl_user_op
def grid_target(state: Int64, *, loc=None, ip=None) -> Int64:
    """The count at which every CTA of this launch has arrived, read before this CTA arrives."""
    return Int64(_asm("""{
    .reg .u64 now;
    ld.relaxed.gpu.global.u64 now, [$1];
    and.b64 now, now, 0xFFFFFFFF00000000;
    add.u64 $0, now, 0x100000000;
}""", "=l,l,~{memory}", [Int64(state)], loc, ip, results=1, result_type=T.i64))


def _share(ctas: str, cta: str) -> str:
    """PTX setting `share` (u64) to CTA `cta`'s part of 2^32 over `ctas` CTAs (operand names)."""
    return f"""    .reg .u32 q, all, rest;
    .reg .u64 share, part;
    .reg .pred first;
    mov.u32 all, 0xFFFFFFFF;
    div.u32 q, all, {ctas};
    cvt.u64.u32 share, q;
    setp.eq.u32 first, {cta}, 0;
    sub.u32 rest, {ctas}, 1;
    mul.wide.u32 part, rest, q;
    @first sub.u64 share, 0x100000000, part;
"""


@dsl_user_op
def grid_arrive(state: Int64, ctas: Int32, cta: Int32, *, loc=None, ip=None) -> None:
    """One thread per CTA, after the CTA's writes and a CTA barrier over the writers: count CTA
    `cta` of `ctas` in (release)."""
    _asm("{\n" + _share("$1", "$2") + """    red.release.gpu.global.add.u64 [$0], share;
}""", "l,r,r,~{memory}", [Int64(state), Int32(ctas), Int32(cta)], loc, ip)


@dsl_user_op
def grid_wait(state: Int64, target: Int64, *, loc=None, ip=None) -> None:
    """Spin (acquire) until the count reaches `target` (from `grid_target`): every CTA has arrived."""
    _asm(
        """{
    .reg .u64 now;
    .reg .pred q;
GW_WAIT_${:uid}:
    ld.acquire.gpu.global.u64 now, [$0];
    setp.ge.u64 q, now, $1;
    @q bra.uni GW_DONE_${:uid};
    nanosleep.u32 32;
    bra.uni GW_WAIT_${:uid};
GW_DONE_${:uid}:
}""",
        "l,l,~{memory}", [Int64(state), Int64(target)], loc, ip)


# Readiness of the fp16 copy of A, row block by row block (the persistent kernel's "rows" build).
# Each counter is a u64 in global memory, zero before the first launch, never reset: a launch adds
# exactly its block's work units (rows × k/64) to it, so after launch E (counting from 0) it holds
# (E + 1) × units. A CTA learns E from the grid count above, read before it arrives there.

@dsl_user_op
def ready_add(counter: Int64, units: Int32, lane0: bool = False, *, loc=None, ip=None) -> None:
    """One thread, after a CTA barrier over the writers of `units` work units of the counter's
    rows (each of which fenced its stores for the async proxy): count them in (release). `lane0`:
    the whole warp calls it, after a warp barrier over the writers, and lane 0 alone adds (the
    predicate inside the asm)."""
    pick = "    mov.u32 lane, %laneid;\n    setp.eq.u32 p, lane, 0;\n" if lane0 else ""
    _asm("""{
    .reg .u64 n;
""" + ("    .reg .b32 lane;\n    .reg .pred p;\n" + pick if lane0 else "") + """    cvt.u64.u32 n, $1;
    """ + ("@p " if lane0 else "") + """red.release.gpu.global.add.u64 [$0], n;
}""", "l,r,~{memory}", [Int64(counter), Int32(units)], loc, ip)


@dsl_user_op
def ready_wait(counter: Int64, units: Int32, launches: Int64, *, loc=None, ip=None) -> None:
    """The whole warp spins (acquire) until every lane's counter holds `launches` × its `units`
    (launches = E + 1; `units` 0 passes at once). The lanes poll together and leave together
    (vote.sync, uniform branches): a lane-dependent loop here let ptxas no longer prove the
    producer warp converged, and it wrapped each later copy in a loop over lanes (SASS ELECT /
    BRA.U.ANY), slowing every stage. A warp barrier (sync_warp) after the wait orders the lanes'
    acquires before the copies one lane then issues."""
    _asm("""{
    .reg .u64 need, now, u;
    .reg .pred q, all;
    cvt.u64.u32 u, $1;
    mul.lo.u64 need, u, $2;
RW_WAIT_${:uid}:
    ld.acquire.gpu.global.u64 now, [$0];
    setp.ge.u64 q, now, need;
    vote.sync.all.pred all, q, 0xffffffff;
    @all bra.uni RW_DONE_${:uid};
    nanosleep.u32 20;
    bra.uni RW_WAIT_${:uid};
RW_DONE_${:uid}:
}""", "l,r,l,~{memory}", [Int64(counter), Int32(units), Int64(launches)], loc, ip)


@dsl_user_op
def ready_probe(counter: Int64, units: Int32, launches: Int64, ahead: Int32, *, loc=None, ip=None) -> Int32:
    """The whole warp, without waiting: each lane reads its counter (acquire) against `launches` ×
    its `units` (0 passes at once), and every lane gets the least `ahead` of the lanes whose
    counter falls short, or 0x7FFFFFFF where none does (redux.sync.min). Where that is 0 the warp
    sleeps briefly before returning, so that a caller polling again backs off. As in `ready_wait`,
    a warp barrier after the last probe orders the lanes' acquires before the copies."""
    return Int32(_asm("""{
    .reg .u64 need, now, u;
    .reg .pred q, z;
    .reg .b32 miss;
    cvt.u64.u32 u, $2;
    mul.lo.u64 need, u, $3;
    ld.acquire.gpu.global.u64 now, [$1];
    setp.ge.u64 q, now, need;
    selp.b32 miss, 0x7FFFFFFF, $4, q;
    redux.sync.min.u32 $0, miss, 0xffffffff;
    setp.eq.u32 z, $0, 0;
    @z nanosleep.u32 20;
}""", "=r,l,r,l,r,~{memory}", [Int64(counter), Int32(units), Int64(launches), Int32(ahead)], loc, ip, results=1,
        result_type=T.i32))


@dsl_user_op
def lanes_at_or_above(value: Int32, bound: Int32, *, loc=None, ip=None) -> Int32:
    """The whole warp: how many lanes hold a `bound` at or below `value` (signed), the same answer
    in every lane (vote.sync.ballot, popc)."""
    return Int32(_asm("""{
    .reg .pred q;
    .reg .b32 votes;
    setp.ge.s32 q, $1, $2;
    vote.sync.ballot.b32 votes, q, 0xffffffff;
    popc.b32 $0, votes;
}""", "=r,r,r", [Int32(value), Int32(bound)], loc, ip, results=1, result_type=T.i32))


@dsl_user_op
def count_launch(state: Int64, ctas: Int32, cta: Int32, *, loc=None, ip=None) -> Int32:
    """The whole warp: lane 0 reads the grid count, then counts CTA `cta` of `ctas` in (the same
    thread and address, so it cannot read its own arrival; nothing to publish, so relaxed), and
    every lane gets E + 1 for this launch (the count's high word read, plus one)."""
    return Int32(_asm("{\n" + _share("$2", "$3") + """    .reg .pred p;
    .reg .b32 lane, hi;
    .reg .u64 now;
    mov.u32 lane, %laneid;
    setp.eq.u32 p, lane, 0;
    mov.u32 hi, 0;
    @p ld.relaxed.gpu.global.u64 now, [$1];
    @p shr.u64 now, now, 32;
    @p cvt.u32.u64 hi, now;
    @p red.relaxed.gpu.global.add.u64 [$1], share;
    shfl.sync.idx.b32 hi, hi, 0, 0x1f, 0xffffffff;
    add.u32 $0, hi, 1;
}""", "=r,l,r,r,~{memory}", [Int64(state), Int32(ctas), Int32(cta)], loc, ip, results=1, result_type=T.i32))


@dsl_user_op
def use_host_tensormaps(desc: Int64, *, loc=None, ip=None) -> None:
    """One lane: make the host-encoded pair at `desc` (A's map, then B's, 128 bytes apart) current
    for its copies: acquire both at system scope (they were copied from the host before the launch;
    this also drops what the copy engine cached at those addresses from an earlier launch) and
    prefetch them. Nothing writes them in the kernel."""
    _asm(_lane0(f"""    @p fence.proxy.tensormap::generic.acquire.sys [$0], {TENSORMAP_BYTES};
    @p fence.proxy.tensormap::generic.acquire.sys [$0+{TENSORMAP_BYTES}], {TENSORMAP_BYTES};
    @p prefetch.tensormap [$0];
    @p prefetch.tensormap [$0+{TENSORMAP_BYTES}];"""), "l,~{memory}", [Int64(desc)], loc, ip)


# Programmatic dependent launch (PTX ISA griddepcontrol, sm_90): a launch made with the driver's
# programmatic stream serialization may start while the kernel before it in the stream still runs,
# once every CTA of that kernel has issued launch_dependents (or exited). The later kernel sees the
# earlier one's memory only after griddepcontrol.wait, which waits for it to complete.

@dsl_user_op
def launch_dependents(*, loc=None, ip=None) -> None:
    """Let the next kernel in the stream (if launched programmatically) start its CTAs."""
    _asm("griddepcontrol.launch_dependents;", "~{memory}", [], loc, ip)


@dsl_user_op
def wait_for_previous_grid(*, loc=None, ip=None) -> None:
    """Wait until the kernel before this one in the stream has completed and its memory is visible
    (returns at once when this launch was not programmatic, or after the first call)."""
    _asm("griddepcontrol.wait;", "~{memory}", [], loc, ip)
