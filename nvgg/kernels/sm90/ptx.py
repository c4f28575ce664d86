"""Inline PTX for the sm_90a NVFP4 kernels: the few instructions CuTe DSL does not expose the way
these kernels need them.

Every helper takes plain integers: shared-memory addresses as 32-bit values (what a shared pointer's
`toint()` gives), global addresses as 64-bit values. Memory-touching helpers are volatile and clobber
memory so that the compiler keeps them in program order with the barriers around them.

Asynchronous copies (the bulk tensor copy and the plain bulk copy) and the tensor-map refresh are
issued by lane 0 of the calling warp, the predicate computed *inside* the asm. Wrapping them in a
branch instead lets ptxas sink the operand moves into uniform registers (R2UR) under the branch
predicate, which sm_90a rejects at run time (CUDA error 715, an illegal instruction); with the
predicate on the instruction itself every lane computes the operands and only the copy is
predicated. Always lane 0 (not `elect.sync`): the thread that fences a tensor map must be the one
that then uses it.
"""

from __future__ import annotations

from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op
from cutlass import Int32, Int64

# fp16 2^14 in both halves of a register: undoes the exponent bias of the bit-shift decode below
F16X2_TWO_POW_14 = 0x74007400

_DECODE_PAIR = """
    shl.b32 t, {src}, {shift};
    shr.b32 u, t, 3;
    and.b32 t, t, 0x80008000;
    and.b32 u, u, 0x0E000E00;
    or.b32 {dst}, t, u;
    mul.rn.f16x2 {dst}, {dst}, bias;
    mul.rn.f16x2 {dst}, {dst}, $1;"""


def _decode_word_ptx() -> str:
    """PTX that decodes the 8 e2m1 nibbles of register $0, scales them by the fp16 pair in $1 and
    stores the 8 fp16 results (16 bytes) at shared address $2.

    Output register i holds nibbles i (low half) and i + 4 (high half): shifting the word left by
    12 - 4i puts nibble i's sign at bit 15 and its 3 magnitude bits at 12..14 (and the same for
    nibble i + 4 sixteen bits higher); a right shift by 3 moves the magnitude to fp16 bits 9..11.
    That bit pattern is the fp16 number value * 2^-14 for every e2m1 code (the e2m1 subnormal 0.5
    lands on the fp16 subnormal 2^-15), so one multiply by 2^14 makes it exact and a second applies
    the scale; both products are exact (see FACTS: e2m1 * e4m3 fits fp16).
    """
    body = ["{", "    .reg .b32 t, u, r0, r1, r2, r3, bias;", "    mov.b32 bias, %d;" % F16X2_TWO_POW_14]
    for i in range(4):
        body.append(_DECODE_PAIR.format(src="$0", shift=12 - 4 * i, dst=f"r{i}"))
    body.append("    st.shared.v4.b32 [$2], {r0, r1, r2, r3};")
    body.append("}")
    return "\n".join(body)


_DECODE_WORD = _decode_word_ptx()


@dsl_user_op
def decode_store_word(word: Int32, scale2: Int32, dst: Int32, *, loc=None, ip=None) -> None:
    """Expand 8 e2m1 values (one 32-bit word, first value in the low nibble) to fp16 times the
    scale pair `scale2`, and store them as one 16-byte chunk at shared address `dst`.

    The chunk holds the values in the order 0, 4, 1, 5, 2, 6, 3, 7: a fixed permutation inside 8
    consecutive k, applied identically to both operands, so the dot products over k are unchanged.
    """
    llvm.inline_asm(
        None,
        [Int32(word).ir_value(loc=loc, ip=ip), Int32(scale2).ir_value(loc=loc, ip=ip),
         Int32(dst).ir_value(loc=loc, ip=ip)],
        _DECODE_WORD,
        "r,r,r,~{memory}",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


@dsl_user_op
def ld_shared_v4(addr: Int32, *, loc=None, ip=None) -> tuple[Int32, Int32, Int32, Int32]:
    """16-byte shared-memory load into four 32-bit registers."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.i32(), T.i32(), T.i32(), T.i32()]),
        [Int32(addr).ir_value(loc=loc, ip=ip)],
        "ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,r,~{memory}",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )
    return tuple(Int32(llvm.extractvalue(T.i32(), res, [i], loc=loc, ip=ip)) for i in range(4))


@dsl_user_op
def ld_shared_scale_pairs(addr: Int32, *, loc=None, ip=None) -> tuple[Int32, Int32]:
    """Load two adjacent e4m3 scales (2 bytes at `addr`, the first in the low byte) and return
    each converted to fp16 and broadcast to both halves of a register: (s0, s0), (s1, s1).
    e4m3 -> fp16 is exact (every e4m3 value is an fp16 value); `cvt ... e4m3x2` needs sm_89+."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.i32(), T.i32()]),
        [Int32(addr).ir_value(loc=loc, ip=ip)],
        """{
    .reg .b16 h;
    .reg .b32 f;
    ld.shared.u16 h, [$2];
    cvt.rn.f16x2.e4m3x2 f, h;
    prmt.b32 $0, f, f, 0x1010;
    prmt.b32 $1, f, f, 0x3232;
}""",
        "=r,=r,r,~{memory}",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )
    return (Int32(llvm.extractvalue(T.i32(), res, [0], loc=loc, ip=ip)),
            Int32(llvm.extractvalue(T.i32(), res, [1], loc=loc, ip=ip)))


@dsl_user_op
def tma_load_2d(dst: Int32, desc: Int64, x: Int32, y: Int32, mbar: Int32, *, loc=None, ip=None) -> None:
    """Lane 0 of the warp copies the box at element coordinates (x, y) of the 2-D tensor map at
    global address `desc` into shared memory at `dst`; completion is counted on mbarrier `mbar`."""
    llvm.inline_asm(
        None,
        [Int32(dst).ir_value(loc=loc, ip=ip), Int64(desc).ir_value(loc=loc, ip=ip),
         Int32(x).ir_value(loc=loc, ip=ip), Int32(y).ir_value(loc=loc, ip=ip),
         Int32(mbar).ir_value(loc=loc, ip=ip)],
        """{
    .reg .pred p;
    .reg .b32 lane;
    mov.u32 lane, %laneid;
    setp.eq.u32 p, lane, 0;
    @p cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];
}""",
        "r,l,r,r,r,~{memory}",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


@dsl_user_op
def bulk_load(dst: Int32, src: Int64, nbytes: Int32, mbar: Int32, *, loc=None, ip=None) -> None:
    """Lane 0 of the warp copies `nbytes` (a multiple of 16, both addresses 16-byte aligned)
    from global `src` to shared `dst`; completion is counted on mbarrier `mbar`."""
    llvm.inline_asm(
        None,
        [Int32(dst).ir_value(loc=loc, ip=ip), Int64(src).ir_value(loc=loc, ip=ip),
         Int32(nbytes).ir_value(loc=loc, ip=ip), Int32(mbar).ir_value(loc=loc, ip=ip)],
        """{
    .reg .pred p;
    .reg .b32 lane;
    mov.u32 lane, %laneid;
    setp.eq.u32 p, lane, 0;
    @p cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];
}""",
        "r,l,r,r,~{memory}",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )


def _refresh_ptx() -> str:
    lines = ["{", "    .reg .pred p;", "    .reg .b32 lane;", "    .reg .b64 a, b;",
             "    mov.u32 lane, %laneid;", "    setp.eq.u32 p, lane, 0;"]
    for i in range(2 * TENSORMAP_BYTES // 16):
        lines.append(f"    @p ld.global.v2.b64 {{a, b}}, [$1+{16 * i}];")
        lines.append(f"    @p st.global.v2.b64 [$0+{16 * i}], {{a, b}};")
    lines += ["    @p fence.proxy.tensormap::generic.release.gpu;",
              f"    @p fence.proxy.tensormap::generic.acquire.gpu [$0], {TENSORMAP_BYTES};",
              f"    @p fence.proxy.tensormap::generic.acquire.gpu [$0+{TENSORMAP_BYTES}], {TENSORMAP_BYTES};",
              "}"]
    return "\n".join(lines)


TENSORMAP_BYTES = 128
_REFRESH = _refresh_ptx()


@dsl_user_op
def refresh_tensormaps(dst: Int64, src: Int64, *, loc=None, ip=None) -> None:
    """Lane 0 copies a pair of 128-byte tensor maps (A then B) from `src` (written by the host) to
    `dst`, a slot only this CTA uses, and makes them usable by its own later bulk tensor copies.

    The PTX memory model treats a tensor map as data of the tensormap proxy: generic writes reach
    the copy engine only through fence.proxy.tensormap::generic release (by the writer) and
    acquire (by the user). Host writes carry no such release, and the copy engine keeps tensor
    maps cached by address across kernels, so a host-written map at a reused address can be read
    stale; copying it on the device, then releasing and acquiring it in the issuing thread, is the
    protocol the PTX ISA defines for tensor maps modified in global memory.
    """
    llvm.inline_asm(
        None,
        [Int64(dst).ir_value(loc=loc, ip=ip), Int64(src).ir_value(loc=loc, ip=ip)],
        _REFRESH,
        "l,l,~{memory}",
        has_side_effects=True,
        is_align_stack=False,
        asm_dialect=llvm.AsmDialect.AD_ATT,
    )
