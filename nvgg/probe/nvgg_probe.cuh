// nvgg_probe.cuh: phase marks inside a CUDA C++ kernel, in the buffer format nvgg reads
// (nvgg/probe/__init__.py): one int64 buffer a launch, [rows + 1, slots], row `rows` the
// overflow row. Get it with Probe.cuda_source() (which also names the columns) or include it
// from nvgg.probe.include_dir().
//
//   NVGG_MARK(probes, gemm::first_mma);          lane 0 of each warp that reaches it writes
//   NVGG_MARK_WARP(probes, gemm::start, 0);      only warp 0 of the CTA writes (a constant)
//
// With NVGG_PROBES undefined or 0 both expand to nothing: the kernel compiles as if unmarked.
#ifndef NVGG_PROBE_CUH
#define NVGG_PROBE_CUH

struct nvgg_probes {
  long long* data;  // [rows + 1, slots] int64; nullptr when probes are off
  int rows;         // CTAs the buffer holds; row `rows` counts the CTAs past them
  int slots;        // columns: the probe's marks
};

#if defined(NVGG_PROBES) && NVGG_PROBES
// One asm block, no branch (the instructions of the CuTe DSL mark, nvgg/probe/cute.py): lane 0 of the
// calling warp (of warp Warp only, when Warp >= 0) stores %globaltimer (ns) at [cta, Column] if
// cta < rows, else raises the overflow row's column to cta + 1. Predicated stores instead of `if`s:
// a branch in a hot loop would make the compiler split the loop around the mark. Volatile with a
// memory clobber: the compiler moves no load or store across the mark.
#define NVGG_MARK_PTX_CTA_                                                        \
  "mov.u32 nvr_a, %%ctaid.x;\n mov.u32 nvr_b, %%ctaid.y;\n mov.u32 nvr_c, %%ctaid.z;\n" \
  "mov.u32 nvr_nx, %%nctaid.x;\n mov.u32 nvr_ny, %%nctaid.y;\n"                          \
  "mad.lo.u32 nvr_c, nvr_c, nvr_ny, nvr_b;\n mad.lo.u32 nvr_a, nvr_c, nvr_nx, nvr_a;\n"    \
  "setp.lt.u32 nvp_in, nvr_a, %1;\n min.u32 nvr_b, nvr_a, %1;\n"                          \
  "mul.wide.u32 nvd_at, nvr_b, %2;\n add.s64 nvd_at, nvd_at, %0;\n"                       \
  "mov.u64 nvd_t, %%globaltimer;\n"                                                          \
  "and.pred nvp_st, nvp_lane, nvp_in;\n not.pred nvp_over, nvp_in;\n"                       \
  "and.pred nvp_over, nvp_over, nvp_lane;\n"                                                 \
  "@nvp_st st.global.b64 [nvd_at+%3], nvd_t;\n"                                              \
  "add.u32 nvr_a, nvr_a, 1;\n cvt.u64.u32 nvd_n, nvr_a;\n"                                  \
  "@nvp_over red.global.max.u64 [nvd_at+%3], nvd_n;\n"
#define NVGG_MARK_PTX_REGS_                                    \
  ".reg .pred nvp_lane, nvp_in, nvp_st, nvp_over;\n"           \
  ".reg .b32 nvr_a, nvr_b, nvr_c, nvr_nx, nvr_ny;\n"           \
  ".reg .b64 nvd_at, nvd_t, nvd_n;\n"                          \
  "mov.u32 nvr_a, %%laneid;\n setp.eq.u32 nvp_lane, nvr_a, 0;\n"

template <int Column, int Warp>
__device__ __forceinline__ void nvgg_mark_(const nvgg_probes& p) {
  if (Warp < 0) {
    asm volatile("{\n" NVGG_MARK_PTX_REGS_ NVGG_MARK_PTX_CTA_ "}\n"
                 :: "l"(p.data), "r"(p.rows), "r"(8 * p.slots), "n"(8 * Column) : "memory");
  } else {
    // the calling thread's linear index in the CTA, shifted to its warp
    asm volatile("{\n" NVGG_MARK_PTX_REGS_
                 "mov.u32 nvr_a, %%tid.x;\n mov.u32 nvr_b, %%tid.y;\n mov.u32 nvr_c, %%tid.z;\n"
                 "mov.u32 nvr_nx, %%ntid.x;\n mov.u32 nvr_ny, %%ntid.y;\n"
                 "mad.lo.u32 nvr_c, nvr_c, nvr_ny, nvr_b;\n mad.lo.u32 nvr_a, nvr_c, nvr_nx, nvr_a;\n"
                 "shr.u32 nvr_a, nvr_a, 5;\n setp.eq.and.u32 nvp_lane, nvr_a, %4, nvp_lane;\n"
                 NVGG_MARK_PTX_CTA_ "}\n"
                 :: "l"(p.data), "r"(p.rows), "r"(8 * p.slots), "n"(8 * Column), "n"(Warp) : "memory");
  }
}
#define NVGG_MARK(probes, name) nvgg_mark_<(int)(name), -1>(probes)
#define NVGG_MARK_WARP(probes, name, warp) nvgg_mark_<(int)(name), (warp)>(probes)
#else
#define NVGG_MARK(probes, name) ((void)0)
#define NVGG_MARK_WARP(probes, name, warp) ((void)0)
#endif

#endif  // NVGG_PROBE_CUH
