"""The CuTe DSL side of the probe: one inline-PTX block a mark (nvgg/probe/__init__.py has the
buffer format). Imported only when a kernel with probes on is traced, so a submission with probes
off, or without nvgg, never needs it."""

from __future__ import annotations

from cutlass import Int32, Int64
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import dsl_user_op

from .error import ProbeError

# inline-asm constraints of a mark: the address and row count in registers, and a memory clobber
# that keeps the compiler from moving loads and stores across it (benchmarks/probe_cost.py
# measures a build without it)
CONSTRAINTS = "l,r,~{memory}"


def mark_ptx(column: int, slots: int, warp: int | None) -> str:
    """The PTX of one mark: $0 the buffer's global address, $1 its rows (the CTAs' rows and the
    overflow row; one less is the overflow row's index, computed here so that no value derived
    from the buffer stays live in a register through the kernel). Lane 0 of the calling warp (of
    warp `warp` only, when given) stores %globaltimer at [cta, column] if cta < rows, else raises
    the overflow row's column to cta + 1. The block is volatile with a memory clobber: the
    compiler moves no load or store across the mark."""
    col, row = 8 * column, 8 * slots
    lines = [
        "{",
        ".reg .pred nvp_lane, nvp_in, nvp_st, nvp_over;",
        ".reg .b32 nvr_a, nvr_b, nvr_c, nvr_nx, nvr_ny, nvr_rows;",
        ".reg .b64 nvd_at, nvd_t, nvd_n;",
        "mov.u32 nvr_a, %laneid;",
        "setp.eq.u32 nvp_lane, nvr_a, 0;",
    ]
    if warp is not None:
        lines += [
            # the calling thread's linear index in the CTA, shifted to its warp
            "mov.u32 nvr_a, %tid.x;", "mov.u32 nvr_b, %tid.y;", "mov.u32 nvr_c, %tid.z;",
            "mov.u32 nvr_nx, %ntid.x;", "mov.u32 nvr_ny, %ntid.y;",
            "mad.lo.u32 nvr_c, nvr_c, nvr_ny, nvr_b;", "mad.lo.u32 nvr_a, nvr_c, nvr_nx, nvr_a;",
            "shr.u32 nvr_a, nvr_a, 5;",
            f"setp.eq.and.u32 nvp_lane, nvr_a, {int(warp)}, nvp_lane;",
        ]
    lines += [
        # the linear CTA index x + nx * (y + ny * z)
        "mov.u32 nvr_a, %ctaid.x;", "mov.u32 nvr_b, %ctaid.y;", "mov.u32 nvr_c, %ctaid.z;",
        "mov.u32 nvr_nx, %nctaid.x;", "mov.u32 nvr_ny, %nctaid.y;",
        "mad.lo.u32 nvr_c, nvr_c, nvr_ny, nvr_b;", "mad.lo.u32 nvr_a, nvr_c, nvr_nx, nvr_a;",
        "sub.u32 nvr_rows, $1, 1;",
        "setp.lt.u32 nvp_in, nvr_a, nvr_rows;",
        "min.u32 nvr_b, nvr_a, nvr_rows;",
        f"mul.wide.u32 nvd_at, nvr_b, {row};",
        "add.s64 nvd_at, nvd_at, $0;",
        "mov.u64 nvd_t, %globaltimer;",
        "and.pred nvp_st, nvp_lane, nvp_in;",
        "not.pred nvp_over, nvp_in;",
        "and.pred nvp_over, nvp_over, nvp_lane;",
        f"@nvp_st st.global.b64 [nvd_at+{col}], nvd_t;",
        "add.u32 nvr_a, nvr_a, 1;",
        "cvt.u64.u32 nvd_n, nvr_a;",
        f"@nvp_over red.global.max.u64 [nvd_at+{col}], nvd_n;",
        "}",
    ]
    return "\n".join(lines)


@dsl_user_op
def mark(probes, column: int, slots: int, warp: int | None = None, *, loc=None, ip=None) -> None:
    """Emit one mark into `probes` (a CuTe tensor [rows + 1, slots] of Int64 in global memory)."""
    shape = probes.shape
    if len(shape) != 2:
        raise ProbeError(f"a probe buffer has 2 modes [rows + 1, marks]; this one has {len(shape)}: pass "
                         "the tensor Probe.cute_buffer(ctas) returned")
    if isinstance(shape[1], int) and shape[1] != slots:
        raise ProbeError(f"a probe buffer with {shape[1]} columns passed where the probe has {slots} marks: pass "
                         "this probe's own buffer")
    if probes.element_type is not Int64:
        raise ProbeError(f"a probe buffer holds Int64, not {probes.element_type}: pass Probe.cute_buffer(ctas)")
    base = probes.iterator.toint(loc=loc, ip=ip)
    llvm.inline_asm(None, [Int64(base).ir_value(loc=loc, ip=ip), Int32(shape[0]).ir_value(loc=loc, ip=ip)],
                    mark_ptx(column, slots, warp), CONSTRAINTS, has_side_effects=True, is_align_stack=False,
                    asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
