"""NVFP4 grouped GEMM in plain CUDA C++, with nvgg's phase marks: a competition-format submission.

For each group g, C_g = A_g · B_gᵀ, where A_g is [m, k] and B_g is [n, k], both packed e2m1 (FP4)
values with one e4m3 scale per 16 values along k. The result C_g is [m, n] fp16. The kernel is
built on the first call with torch.utils.cpp_extension.load_inline and launched once for all groups.
It shows these pieces:

- tensor maps (TMA descriptors) encoded on the host with cuTensorMapEncodeTiled, two per group,
  passed to the kernel in one `__grid_constant__` parameter and prefetched by each CTA;
- TMA loads (cp.async.bulk.tensor) of the packed operands into shared memory, completing on an
  mbarrier the CTA waits on; rows past m come back as zeros, which handles the ragged last tile;
- decoding FP4 × e4m3 scale into fp16 shared tiles (every such product is exact in fp16), then
  fp16 tensor-core MMAs through the WMMA API with fp32 accumulation;
- phase marks at start, maps_ready, first_tma_landed, first_mma, mainloop_done and epilogue_done,
  which show where a CTA's time goes. To record them:

      nvgg profile --phases --submission examples/cuda_grouped_gemm/submission.py --case 4

  Without nvgg installed (as in the competition's harness), or with probes off, the marks compile
  to nothing, and the kernel's PTX is the same as if they had never been written.

Tiles: a CTA computes 64 rows of C (m) × 128 columns (n), stepping through k 128 values at a time
with 256 threads (8 warps, each holding a 32 × 32 piece of the tile). The grid is
(max n/128, max ceil(m/64), groups). A CTA whose tile lies outside its own group returns at once.
The tile is the file's one choice to sweep: `TUNE` declares 32, 64 or 128 rows and 64 or 128
columns (a warp for each 32 × 32 piece), and `nvgg tune --submission` sets `CONFIG` to each point
before a call; without nvgg the defaults (the first values) hold. Each tile is its own build.
The kernel is written to be read, not to be fast. It has one buffer of packed bytes: the next k
step's load is issued once the current step is decoded, so it overlaps only the MMAs. All threads
decode, and B is decoded again for every m tile. It is a teaching example, not a tuned kernel.

Needs an H100/H200 (sm_90a; run there) or a B200 (sm_100a; compiled, never run) and CUDA 12.5 or
newer (cudaGetDriverEntryPointByVersion); written for CUDA 13.0.
"""

from __future__ import annotations

import hashlib

import torch

try:                                   # nvgg present: `nvgg profile --phases` turns the marks on
    from nvgg.probe import Probe
except ImportError:                    # absent: the marks compile to nothing
    Probe = None

MARKS = ("start", "maps_ready", "first_tma_landed", "first_mma", "mainloop_done", "epilogue_done")
PHASES = Probe("cuda_gemm", MARKS) if Probe else None

# What nvgg's probe source defines when probes are off: the argument type and marks that vanish.
OFF_SOURCE = r"""
struct nvgg_probes { long long* data; int rows; int slots; };
#define NVGG_MARK(probes, name) ((void)0)
#define NVGG_MARK_WARP(probes, name, warp) ((void)0)
"""
PROBE_SOURCE = PHASES.cuda_source() if PHASES else OFF_SOURCE

# The tile a CTA computes, the choice nvgg tune sweeps: BM rows of A (m) and BN rows of B (n), each
# list's first value the default. CONFIG (set by nvgg before a call, absent in the competition's
# harness) picks one.
TUNE = {"bm": [64, 32, 128], "bn": [128, 64]}
BM, BN = TUNE["bm"][0], TUNE["bn"][0]
BK = 128         # k values a main-loop step loads: 64 bytes of packed FP4 a row
MAX_GROUPS = 16  # fixed by the size of the kernel's parameter block (see KERNEL_SOURCE)


def threads(bm: int, bn: int) -> int:
    """A warp for each 32 × 32 piece of the tile: 256 threads (8 warps) for 64 × 128."""
    return 32 * (bm // 32) * (bn // 32)


def tile_source(bm: int, bn: int) -> str:
    """The tile constants, written once here and shared by the Python and CUDA code."""
    return (f"\nconstexpr int BM = {bm}, BN = {bn}, BK = {BK}, THREADS = {threads(bm, bn)}, "
            f"MAX_GROUPS = {MAX_GROUPS};\n")


TILE_SOURCE = tile_source(BM, BN)

# The device code. It needs no torch header, so it can also be compiled standalone with
# `nvcc -gencode=arch=compute_90a,code=sm_90a -c`, after PROBE_SOURCE and TILE_SOURCE.
KERNEL_SOURCE = r"""
#include <cstdint>
#include <type_traits>  // std::true_type, std::false_type: which k step is the first, at compile time
#include <cuda.h>       // CUtensorMap (the type only; the kernel calls no driver function)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <mma.h>

constexpr int BK_BYTES = BK / 2;  // packed FP4: two values a byte, the even-k value in the low nibble
constexpr int LDS = BK + 8;       // fp16 tile row pitch. WMMA needs ldm to be a multiple of 8 halves, and
                                  // the 16 extra bytes shift each row by 4 banks
constexpr int LDC = BN + 4;       // float epilogue tile row pitch (WMMA: a multiple of 4 floats)

// Each group's arguments. All groups travel in one __grid_constant__ kernel parameter: about 4.7 KB
// for 16 groups. CUDA 12.1+ allows kernel parameters of up to 32,764 bytes on Volta and newer
// (CUDA C++ Programming Guide, "Function Parameters"); before that the limit was 4 KB. The tensor maps
// must stay in parameter (or global) memory, because the TMA reads them by address.
struct GroupArgs {
  __half* c;             // [m, n] fp16, row-major
  const uint8_t* sfa;    // A's e4m3 scales in the blocked layout (scale_offset)
  const uint8_t* sfb;    // B's
  int m, n, k;
};
struct GemmArgs {
  CUtensorMap maps[MAX_GROUPS][2];  // [g][0]: A_g as uint8 [m, k/2]; [g][1]: B_g as uint8 [n, k/2]
  GroupArgs groups[MAX_GROUPS];
};
static_assert(sizeof(GemmArgs) + sizeof(nvgg_probes) <= 32764, "kernel parameters exceed 32,764 bytes");

// Dynamic shared memory. It is over 48 KB, which is the most a kernel may declare statically, so the
// host raises cudaFuncAttributeMaxDynamicSharedMemorySize (an H100 allows 227 KB a block).
struct SharedTiles {
  alignas(128) uint8_t a_packed[BM * BK_BYTES];  // TMA destinations: the boxes land row-major, 64 B a row
  alignas(128) uint8_t b_packed[BN * BK_BYTES];
  union {
    struct {
      __half a[BM][LDS];  // decoded A tile, [m][k]
      __half b[BN][LDS];  // decoded B tile, [n][k], which is the k × n operand in column-major order
    } in;
    float c[BM][LDC];     // the accumulators on their way to global memory, after the main loop
  } u;
  alignas(8) uint64_t full;  // mbarrier: a k step's packed tiles have landed
  float e2m1[16];            // e2m1 code -> value
};

// e2m1: bit 3 is the sign; bits 2..0 give the magnitude 0, 0.5, 1, 1.5, 2, 3, 4, 6.
__constant__ float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// Byte offset of row `row`, scale column `col` (= k / 16) in the blocked scale layout (cuBLAS's
// "block scaling factors layout"): each 128 rows × 4 columns (64 k values) are one 512-byte block,
// and the blocks run along k first, k/64 of them per 128 rows. Inside a block, row i sits at
// (i % 32) * 16 + (i % 128) / 32 * 4 and column j at j % 4.
__device__ __forceinline__ int scale_offset(int row, int col, int col_blocks) {
  return ((row / 128) * col_blocks + col / 4) * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + col % 4;
}

__device__ __forceinline__ float e4m3_to_float(uint8_t byte) {
  // every e4m3 value is exact in fp16 (sm_89+ converts it with one cvt instruction)
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(byte, __NV_E4M3)));
}

// ---- TMA and mbarrier, in inline PTX (PTX ISA: mbarrier, cp.async.bulk.tensor, prefetch) ----------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem_addr(bar)), "r"(arrivals) : "memory");
  // make the initialised barrier visible to the TMA unit (the async proxy) before any load uses it
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` of TMA writes to come; the phase completes once they land.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Wait until the phase with this parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  }
}

// Copy the box at (x bytes, y rows) of a 2-D tensor map into shared memory. The byte count goes to
// the mbarrier. The CTA's own shared::cta address is also a valid shared::cluster address.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int x, int y, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
      :: "r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}

// ---- decode ----------------------------------------------------------------------------------------

// Expand a packed tile of ROWS × BK FP4 values (64 bytes a row, as the TMA left it) into fp16 with the
// scales applied: out[r][kk] = e2m1(r, kk) * scale(row0 + r, (k0 + kk) / 16). Each thread takes 4
// bytes at a time (8 values, all under one scale). Rows at or past `rows` get scale 0; their bytes are
// the TMA's zero fill. Those rows' results are never stored, and the padding scales are never read.
template <int ROWS>
__device__ __forceinline__ void decode_tile(const uint8_t* packed, __half (*out)[LDS], const uint8_t* sf,
                                            int row0, int rows, int k0, int col_blocks, const float* e2m1) {
  constexpr int WORDS_PER_ROW = BK_BYTES / 4;
  static_assert(ROWS * WORDS_PER_ROW % THREADS == 0, "every thread decodes the same number of words");
#pragma unroll
  for (int pass = 0; pass < ROWS * WORDS_PER_ROW / THREADS; ++pass) {
    const int w = pass * THREADS + threadIdx.x;
    const int r = w / WORDS_PER_ROW, kk = (w % WORDS_PER_ROW) * 8;
    const float scale = row0 + r < rows ? e4m3_to_float(sf[scale_offset(row0 + r, (k0 + kk) / 16, col_blocks)]) : 0.0f;
    const uint32_t bytes = reinterpret_cast<const uint32_t*>(packed)[w];  // little-endian: byte i is values 2i, 2i+1
    alignas(16) __half2 h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t byte = (bytes >> (8 * i)) & 0xFF;
      h[i] = __floats2half2_rn(e2m1[byte & 0xF] * scale, e2m1[byte >> 4] * scale);  // low nibble first
    }
    *reinterpret_cast<uint4*>(&out[r][kk]) = *reinterpret_cast<const uint4*>(h);
  }
}

// ---- the kernel --------------------------------------------------------------------------------------

// Two CTAs an SM (at the default tile: 128 registers a thread, about 65 KB of shared memory each), so
// that one CTA can decode or multiply while the other waits for its loads; one for a tile of 16 warps.
__global__ void __launch_bounds__(THREADS, THREADS <= 256 ? 2 : 1)
grouped_gemm_kernel(const __grid_constant__ GemmArgs args, const nvgg_probes probes) {
  using namespace nvcuda;
  NVGG_MARK_WARP(probes, cuda_gemm::start, 0);

  const int g = blockIdx.z;
  const GroupArgs& grp = args.groups[g];
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  if (m0 >= grp.m || n0 >= grp.n) return;  // the grid fits the largest group; this tile is past ours

  extern __shared__ uint8_t smem_raw[];
  // the host asks for 128 spare bytes so the tiles can start on a 128-byte boundary
  SharedTiles& s = *reinterpret_cast<SharedTiles*>((reinterpret_cast<uintptr_t>(smem_raw) + 127) & ~uintptr_t(127));
  const CUtensorMap* map_a = &args.maps[g][0];
  const CUtensorMap* map_b = &args.maps[g][1];
  const int tid = threadIdx.x, warp = tid / 32;
  const int k_steps = grp.k / BK, col_blocks = grp.k / 64;
  // Each step, the full boxes land, and they all count toward the transaction total, including
  // rows past m that the TMA fills with zeros.
  constexpr uint32_t STEP_BYTES = (BM + BN) * BK_BYTES;

  if (tid == 0) {
    prefetch_tensor_map(map_a);
    prefetch_tensor_map(map_b);
  }
  NVGG_MARK_WARP(probes, cuda_gemm::maps_ready, 0);
  if (tid == 0) {
    mbarrier_init(&s.full, 1);  // one arrival a phase: thread 0's arrive.expect_tx
    mbarrier_arrive_expect_tx(&s.full, STEP_BYTES);
    tma_load_2d(s.a_packed, map_a, 0, m0, &s.full);
    tma_load_2d(s.b_packed, map_b, 0, n0, &s.full);
  }
  if (tid < 16) s.e2m1[tid] = kE2M1[tid];
  __syncthreads();  // the barrier is initialised and the table is filled before anyone uses them

  // warps form a (BM / 32) × (BN / 32) grid of 32 × 32 pieces of the tile (2 × 4 for 64 × 128); each
  // piece is 2 × 2 WMMA tiles
  constexpr int WARPS_N = BN / 32;
  static_assert(BM % 32 == 0 && BN % 32 == 0 && THREADS == 32 * (BM / 32) * WARPS_N, "a warp a 32 x 32 piece");
  const int wm = (warp / WARPS_N) * 32, wn = (warp % WARPS_N) * 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  // One k step: wait for its packed tiles, decode them, start the next step's loads, multiply.
  // `first` (a compile-time true or false) places the marks of the first step. That step runs on
  // its own before the loop, so the marks stay out of the loop: code there, even a branch around a
  // mark that never fires again, changes how the compiler schedules every step (measured with
  // benchmarks/probe_cost.py: about 1.5% of the kernel's time on an H100).
  auto k_step = [&](int step, auto first) {
    const int k0 = step * BK;
    mbarrier_wait(&s.full, step & 1);  // step s completes the barrier's phase s
    if constexpr (decltype(first)::value) NVGG_MARK_WARP(probes, cuda_gemm::first_tma_landed, 0);

    decode_tile<BM>(s.a_packed, s.u.in.a, grp.sfa, m0, grp.m, k0, col_blocks, s.e2m1);
    decode_tile<BN>(s.b_packed, s.u.in.b, grp.sfb, n0, grp.n, k0, col_blocks, s.e2m1);
    __syncthreads();  // the fp16 tiles are complete, and the packed buffers are free again

    if (tid == 0 && step + 1 < k_steps) {  // the next step's load overlaps this step's MMAs
      mbarrier_arrive_expect_tx(&s.full, STEP_BYTES);
      tma_load_2d(s.a_packed, map_a, (k0 + BK) / 2, m0, &s.full);
      tma_load_2d(s.b_packed, map_b, (k0 + BK) / 2, n0, &s.full);
    }

#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &s.u.in.a[wm + 16 * i][kk], LDS);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &s.u.in.b[wn + 16 * j][kk], LDS);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
          if constexpr (decltype(first)::value)
            if (kk == 0 && i == 0 && j == 0) NVGG_MARK_WARP(probes, cuda_gemm::first_mma, 0);
        }
    }
    __syncthreads();  // every warp has read the fp16 tiles before the next step overwrites them
  };
  k_step(0, std::true_type{});
  for (int step = 1; step < k_steps; ++step) k_step(step, std::false_type{});
  NVGG_MARK_WARP(probes, cuda_gemm::mainloop_done, 0);

  // Epilogue. The fp16 tiles are dead (the loop ended on a barrier), so the float tile reuses their space.
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&s.u.c[wm + 16 * i][wn + 16 * j], acc[i][j], LDC, wmma::mem_row_major);
  __syncthreads();
  // 8 consecutive fp16 values (16 bytes) per thread and pass; rows past m are not stored
  for (int e = tid; e < BM * BN / 8; e += THREADS) {
    const int r = e / (BN / 8), col = (e % (BN / 8)) * 8;
    if (m0 + r >= grp.m) break;  // r only grows with e
    alignas(16) __half2 h[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(s.u.c[r][col + 2 * i], s.u.c[r][col + 2 * i + 1]);
    *reinterpret_cast<uint4*>(grp.c + (size_t)(m0 + r) * grp.n + n0 + col) = *reinterpret_cast<const uint4*>(h);
  }
  __syncthreads();  // every warp's stores are issued, so epilogue_done times the whole CTA
  NVGG_MARK_WARP(probes, cuda_gemm::epilogue_done, 0);
}
"""

# The host side: encode the tensor maps, fill the parameter block, and launch on torch's current stream.
WRAPPER_SOURCE = r"""
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <torch/types.h>
#include <optional>
#include <vector>

// cuTensorMapEncodeTiled belongs to the driver library (libcuda). The runtime can hand out its address,
// so the extension does not have to link -lcuda.
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    TORCH_CHECK(found == cudaDriverEntryPointSuccess && fn, "the CUDA driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A packed FP4 operand as a 2-D uint8 tensor [rows, row_bytes] (row-major), read in boxes of
// box_rows × BK_BYTES. The driver's rules (CUDA Driver API, cuTensorMapEncodeTiled) are: the address
// is 16-byte aligned, the row stride is a multiple of 16 bytes, each box side is at most 256
// elements, and without interleave the inner box side is a multiple of 16 bytes. Here row_bytes =
// k/2 is a multiple of 64, and the box is 64 bytes wide. With OOB_FILL_NONE, reads past the last row
// come back as zeros.
static CUtensorMap packed_fp4_map(const at::Tensor& t, int rows, int row_bytes, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)row_bytes, (cuuint64_t)rows};  // innermost first
  const cuuint64_t strides[1] = {(cuuint64_t)row_bytes};                 // bytes from row to row
  const cuuint32_t box[2] = {(cuuint32_t)BK_BYTES, (cuuint32_t)box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult err = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, t.data_ptr(), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(err == CUDA_SUCCESS, "cuTensorMapEncodeTiled failed (CUresult ", (int)err, ") for a [", rows, ", ",
              row_bytes, "] operand");
  return map;
}

// a, b: each group's packed operands as row-major uint8 [m, k/2] and [n, k/2]. c: fp16 [m, n].
// sfa, sfb: the blocked scales, as uint8. The grid is (grid_n, grid_m, groups).
// probes: nvgg's int64 [ctas + 1, marks] buffer, or None.
void grouped_gemm(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b,
                  const std::vector<at::Tensor>& c, const std::vector<at::Tensor>& sfa,
                  const std::vector<at::Tensor>& sfb, int64_t grid_n, int64_t grid_m,
                  const std::optional<at::Tensor>& probes) {
  const int groups = (int)a.size();
  TORCH_CHECK(groups >= 1 && groups <= MAX_GROUPS, "1 to ", MAX_GROUPS, " groups, got ", groups);
  TORCH_CHECK(b.size() == a.size() && c.size() == a.size() && sfa.size() == a.size() && sfb.size() == a.size(),
              "a, b, c, sfa and sfb need one tensor a group each");
  const c10::cuda::CUDAGuard guard(c[0].device());

  GemmArgs args{};
  for (int g = 0; g < groups; ++g) {
    const int m = (int)c[g].size(0), n = (int)c[g].size(1), k = 2 * (int)a[g].size(1);
    TORCH_CHECK(a[g].is_cuda() && b[g].is_cuda() && c[g].is_cuda() && sfa[g].is_cuda() && sfb[g].is_cuda(),
                "group ", g, ": every tensor must be on the GPU");
    TORCH_CHECK(n % BN == 0 && k % BK == 0, "group ", g, ": n must be a multiple of ", BN, " and k of ", BK);
    TORCH_CHECK(a[g].size(0) == m && b[g].size(0) == n && b[g].size(1) == k / 2, "group ", g, ": shapes disagree");
    TORCH_CHECK((m + BM - 1) / BM <= grid_m && n / BN <= grid_n, "group ", g, ": the grid is too small");
    TORCH_CHECK(a[g].stride(0) == k / 2 && a[g].stride(1) == 1 && b[g].stride(0) == k / 2 && b[g].stride(1) == 1 &&
                (uintptr_t)a[g].data_ptr() % 16 == 0 && (uintptr_t)b[g].data_ptr() % 16 == 0,
                "group ", g, ": a and b must be row-major bytes, 16-byte aligned (the TMA's rule)");
    TORCH_CHECK(c[g].scalar_type() == at::kHalf && c[g].stride(0) == n && c[g].stride(1) == 1 &&
                (uintptr_t)c[g].data_ptr() % 16 == 0, "group ", g, ": c must be row-major fp16 [m, n], 16-byte aligned");
    args.maps[g][0] = packed_fp4_map(a[g], m, k / 2, BM);
    args.maps[g][1] = packed_fp4_map(b[g], n, k / 2, BN);
    args.groups[g] = GroupArgs{reinterpret_cast<__half*>(c[g].data_ptr<at::Half>()),
                               static_cast<const uint8_t*>(sfa[g].data_ptr()),
                               static_cast<const uint8_t*>(sfb[g].data_ptr()), m, n, k};
  }

  nvgg_probes marks{nullptr, 0, 0};
  if (probes.has_value() && probes->defined()) {
    TORCH_CHECK(probes->is_cuda() && probes->scalar_type() == at::kLong && probes->dim() == 2 &&
                probes->is_contiguous(), "probes must be nvgg's contiguous int64 [ctas + 1, marks] GPU buffer");
    marks = nvgg_probes{reinterpret_cast<long long*>(probes->data_ptr<int64_t>()), (int)probes->size(0) - 1,
                        (int)probes->size(1)};
  }

  const size_t smem = sizeof(SharedTiles) + 128;  // + room to align the tiles to 128 bytes
  C10_CUDA_CHECK(cudaFuncSetAttribute(grouped_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const dim3 grid((unsigned)grid_n, (unsigned)grid_m, (unsigned)groups);
  grouped_gemm_kernel<<<grid, THREADS, smem, c10::cuda::getCurrentCUDAStream()>>>(args, marks);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

# The C++ declaration load_inline binds to Python (its body is in WRAPPER_SOURCE).
CPP_SOURCE = r"""
void grouped_gemm(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b,
                  const std::vector<at::Tensor>& c, const std::vector<at::Tensor>& sfa,
                  const std::vector<at::Tensor>& sfb, int64_t grid_n, int64_t grid_m,
                  const std::optional<at::Tensor>& probes);
"""



def cuda_source(bm: int = BM, bn: int = BN) -> str:
    return PROBE_SOURCE + tile_source(bm, bn) + KERNEL_SOURCE + WRAPPER_SOURCE


# The "a" targets admit the arch-specific instructions; a plain -arch=sm_90a can also compile for
# sm_90, which would reject them. TMA, mbarriers and WMMA exist on both (the B200 build compiles,
# with a few spilled registers under the 128 a thread of two CTAs an SM, but has never been run).
ARCHS = {(9, 0): "90a", (10, 0): "100a"}


def cuda_flags() -> list[str]:
    capability = torch.cuda.get_device_capability()
    if capability not in ARCHS:
        raise RuntimeError(f"this example builds for sm_90a (H100/H200) or sm_100a (B200); this GPU is "
                           f"sm_{capability[0]}{capability[1]}")
    arch = ARCHS[capability]
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}", "-O3"]

_extensions: dict = {}  # (bm, bn) -> the extension built for that tile


def _build(bm: int, bn: int):
    """Compile the tile's extension once per process. The name hashes the sources and flags, so a
    changed source (including probes on versus off, or another tile) builds anew instead of loading a
    stale cached build."""
    if (bm, bn) not in _extensions:
        from torch.utils.cpp_extension import load_inline
        flags, source = cuda_flags(), cuda_source(bm, bn)
        digest = hashlib.sha256("\0".join([CPP_SOURCE, source, *flags]).encode()).hexdigest()[:16]
        _extensions[(bm, bn)] = load_inline(name=f"cuda_grouped_gemm_{digest}", cpp_sources=CPP_SOURCE,
                                            cuda_sources=source, functions=["grouped_gemm"], extra_cuda_cflags=flags)
    return _extensions[(bm, bn)]


def tile() -> tuple[int, int]:
    """The tile of this call: CONFIG's where nvgg set one, else the defaults."""
    chosen = globals().get("CONFIG") or {}
    bm, bn = chosen.get("bm", BM), chosen.get("bn", BN)
    if bm not in TUNE["bm"] or bn not in TUNE["bn"]:
        raise ValueError(f"CONFIG {chosen}: bm must be one of {TUNE['bm']} and bn one of {TUNE['bn']}")
    return bm, bn


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def _check_blocked(sf: torch.Tensor, rows: int, k: int, what: str) -> None:
    """The kernel reads scales with the blocked layout's fixed byte offsets (scale_offset in the
    CUDA source). Check that this view has exactly those strides; otherwise, fail rather than
    read the wrong bytes. The view is (i%32, (i%128)//32, i//128, j%4, j//4, l)."""
    shape = (32, 4, _ceil_div(rows, 128), 4, k // 64)
    strides = (16, 4, 512 * (k // 64), 1, 512)
    if tuple(sf.shape[:5]) != shape or tuple(sf.stride()[:5]) != strides:
        raise ValueError(f"{what}: expected the blocked scale layout, shape {shape} strides {strides}, "
                         f"got shape {tuple(sf.shape)} strides {tuple(sf.stride())}")


def custom_kernel(data):
    """The competition's entry point: data = (abc, sfasfb, sfasfb_reordered, problem_sizes). Writes
    each C_g = A_g · B_gᵀ into abc[g][2] and returns those tensors."""
    abc, _, sf_blocked, sizes = data
    bm, bn = tile()
    groups = len(abc)
    if not 1 <= groups <= MAX_GROUPS:
        raise ValueError(f"this kernel takes 1 to {MAX_GROUPS} groups (its parameter block holds "
                         f"{MAX_GROUPS} groups' tensor maps), got {groups}")
    a_list, b_list, c_list, sfa_list, sfb_list = [], [], [], [], []
    for g, ((a, b, c), (sfa, sfb), (m, n, k, l)) in enumerate(zip(abc, sf_blocked, sizes)):
        if l != 1 or n % bn or k % BK:
            raise ValueError(f"group {g}: needs l = 1, n a multiple of {bn} and k a multiple of {BK}; "
                             f"got m={m} n={n} k={k} l={l}")
        _check_blocked(sfa, m, k, f"group {g} sfa")
        _check_blocked(sfb, n, k, f"group {g} sfb")
        # packed FP4 as plain bytes; row i of A starts at byte i·k/2
        a_list.append(a.view(torch.uint8)[:, :, 0])
        b_list.append(b.view(torch.uint8)[:, :, 0])
        c_list.append(c[:, :, 0])
        sfa_list.append(sfa.view(torch.uint8))
        sfb_list.append(sfb.view(torch.uint8))

    grid_n = max(n // bn for _, n, _, _ in sizes)
    grid_m = max(_ceil_div(m, bm) for m, _, _, _ in sizes)
    probes = PHASES.buffer(grid_n * grid_m * groups) if PHASES else None  # None unless probes are on
    _build(bm, bn).grouped_gemm(a_list, b_list, c_list, sfa_list, sfb_list, grid_n, grid_m, probes)
    return [c for _, _, c in abc]
