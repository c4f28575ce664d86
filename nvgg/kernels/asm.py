"""Inline PTX both architectures' kernels share: the helper that emits one asm block, the global
timer of the instrumented builds, and the tensor-map prefetch, acquire and large-tensor bit by
address. Each helper takes and returns DSL integers (global addresses as 64-bit values, shared
ones as 32-bit)."""

from __future__ import annotations

from cutlass import Float32, Int32, Int64
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


def inline(text: str, constraints: str, operands, loc, ip, *, results: int = 0, result_type=None,
           pure: bool = False, floats: bool = False):
    """One inline-PTX block over `operands` (DSL values, in $-order after the results): None, the
    one `result_type` value (T.i32 or T.i64), or a tuple of `results` Int32 (Float32 with
    `floats`). Side-effecting unless `pure`, so the compiler keeps it in program order with the
    barriers around it."""
    element, wrap = (T.f32, Float32) if floats else (T.i32, Int32)
    if results > 1:
        rtype = llvm.StructType.get_literal([element()] * results)
    else:
        rtype = result_type() if results == 1 else None
    res = llvm.inline_asm(rtype, [v.ir_value(loc=loc, ip=ip) for v in operands], text, constraints,
                          has_side_effects=not pure, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    if results > 1:
        return tuple(wrap(llvm.extractvalue(element(), res, [i], loc=loc, ip=ip)) for i in range(results))
    return res


@dsl_user_op
def globaltimer(*, loc=None, ip=None) -> Int64:
    """The GPU's global nanosecond timer (%globaltimer), for the instrumented builds only."""
    return Int64(inline("mov.u64 $0, %globaltimer;", "=l", [], loc, ip, results=1, result_type=T.i64))


@dsl_user_op
def prefetch_tensormap(address: Int64, *, loc=None, ip=None) -> None:
    """Ask the copy engine to fetch the tensor map at generic address `address` into its cache
    (PTX ISA `prefetch.tensormap`, sm_90 and later); a hint, it orders nothing."""
    inline("prefetch.tensormap [$0];", "l,~{memory}", [Int64(address)], loc, ip)


@dsl_user_op
def acquire_tensormap_sys(address: Int64, *, loc=None, ip=None) -> None:
    """Order the copy engine's later reads of the tensor map at `address` after writes made
    outside this kernel (a host-to-device copy before the launch): PTX ISA
    `fence.proxy.tensormap::generic.acquire` at system scope, the scope the CUDA C++ Programming
    Guide's example uses for a map copied to global memory with cudaMemcpy. It also drops what the
    copy engine cached at that address (an earlier launch's maps)."""
    inline("fence.proxy.tensormap::generic.acquire.sys [$0], 128;", "l,~{memory}", [Int64(address)], loc, ip)


@dsl_user_op
def set_large_tensor_bit(smem_map: Int32, span: Int64, threshold: int, *, loc=None, ip=None) -> None:
    """The warp's elected lane sets bit 21 of word 1 (bit 21 of the 32-bit word at byte 8) of the
    tensor map at shared address `smem_map` as the encoder does for a tensor of `span` bytes: set
    from `threshold` bytes on, clear below (sm100/params.py, LARGE_TENSOR_BYTES). The whole warp
    must execute it; the lane is the one elect.sync picks over the full warp, as CuTe DSL's map
    update (tensormap.replace) elects it, so that lane's later writes of the map build on this one."""
    inline(f"""{{
    .reg .pred p, large;
    .reg .b32 w, bit;
    elect.sync _|p, 0xffffffff;
    setp.ge.u64 large, $1, {threshold};
    selp.b32 bit, {1 << 21}, 0, large;
    @p ld.shared.b32 w, [$0+8];
    and.b32 w, w, {0xFFFFFFFF & ~(1 << 21)};
    or.b32 w, w, bit;
    @p st.shared.b32 [$0+8], w;
}}""", "r,l,~{memory}", [Int32(smem_map), Int64(span)], loc, ip)
