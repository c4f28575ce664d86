// How fast L2 feeds the sm_90a kernel's stages of copies on case 4: 128 CTAs (one an SM), each
// stage a CTA bulk-copies (cp.async.bulk, the TMA's path) 64 KB of fp16 A (one of 4 regions, 32
// CTAs a region: the 4 A tiles of 128 rows x 256 k) and 16 KB of packed B (one of 32 regions, 4
// CTAs a region: the n tiles) into its shared memory, waits for them, and goes on to the next
// stage; 6 stages, data in L2 (read once before). Modes: as the kernel does now; B alone; A
// multicast to CTA pairs (a cluster of 2 along n: each CTA copies half of its pair's A tile to
// both, so L2 serves each A line half as often); A halved without multicast (the L2 reads of the
// pair mode, each CTA's shared memory receiving half). At the MMA's rate a stage takes about
// 1.03 us (128 x 128 x 256 multiply-adds at 2048 a clock an SM, 1980 MHz). Prints microseconds a
// stage (the median CTA's time for the 6 stages over 6, median of 7 launches) and what L2 delivered,
// TB/s.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include "common.cuh"
constexpr int CTAS = 128, STAGES = 6, A_BYTES = 64 << 10, B_BYTES = 16 << 10;
__device__ __forceinline__ unsigned smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
__device__ __forceinline__ void copy_mc(unsigned dst, const void* src, unsigned bytes, unsigned bar, unsigned short mask) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar), "h"(mask) : "memory");
}
__device__ __forceinline__ void wait(unsigned bar) {
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n @!p bra W;\n}" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// mode 0: A whole + B; 1: B alone; 2: A multicast in pairs + B; 3: half of A + B (no multicast)
template <bool PAIRS>
__global__ void k(const char* a, const char* b, long long* out, int mode) {
  extern __shared__ __align__(1024) char buf[];
  __shared__ __align__(8) unsigned long long bars[STAGES];
  unsigned rank = 0;
  if (PAIRS) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  int cta = blockIdx.x, a_tile = cta % 4, n_tile = cta / 4;
  unsigned a_bytes = mode == 1 ? 0 : mode == 0 ? A_BYTES : A_BYTES / 2;
  unsigned expect = (mode == 2 ? A_BYTES : a_bytes) + B_BYTES;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(&bars[s])) : "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem(&bars[s])), "r"(expect) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (PAIRS) cluster_sync(); else __syncthreads();
  long long t0 = gt();
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      unsigned bar = smem(&bars[s]);
      const char* as = a + ((size_t)s * 4 + a_tile) * A_BYTES;
      const char* bs = b + ((size_t)s * 32 + n_tile) * B_BYTES;
      copy(smem(buf + A_BYTES), bs, B_BYTES, bar);
      if (mode == 0 || mode == 3)
        for (unsigned off = 0; off < a_bytes; off += 16 << 10) copy(smem(buf + off), as + off, 16 << 10, bar);
      if (mode == 2)
        for (unsigned off = rank * (A_BYTES / 2); off < (rank + 1) * (A_BYTES / 2); off += 16 << 10)
          copy_mc(smem(buf + off), as + off, 16 << 10, bar, 3);
      wait(bar);
    }
    out[cta] = gt() - t0;
  }
  if (PAIRS) cluster_sync();
}
__global__ void warm(const int4* p, size_t n, int* sink) {
  int s = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) s ^= p[i].x;
  if (s == 0x7fffffff) *sink = s;
}
int main() {
  size_t a_total = (size_t)STAGES * 4 * A_BYTES, b_total = (size_t)STAGES * 32 * B_BYTES;
  char *a, *b;
  long long* out;
  int* sink;
  cudaMalloc(&a, a_total);
  cudaMalloc(&b, b_total);
  cudaMalloc(&out, CTAS * 8);
  cudaMalloc(&sink, 4);
  cudaMemset(a, 1, a_total);
  cudaMemset(b, 2, b_total);
  int shared = A_BYTES + B_BYTES;
  cudaFuncSetAttribute(k<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
  cudaFuncSetAttribute(k<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
  const char* names[4] = {"A whole + B (as now)", "B alone", "A multicast in pairs + B", "half of A + B, no multicast"};
  for (int mode = 0; mode < 4; ++mode) {
    std::vector<double> us;
    for (int rep = 0; rep < 7; ++rep) {
      warm<<<1056, 256>>>((const int4*)a, a_total / 16, sink);
      warm<<<1056, 256>>>((const int4*)b, b_total / 16, sink);
      if (mode == 2) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(CTAS);
        cfg.blockDim = dim3(128);
        cfg.dynamicSmemBytes = shared;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 2;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        cudaLaunchKernelEx(&cfg, k<true>, (const char*)a, (const char*)b, out, mode);
      } else {
        k<false><<<CTAS, 128, shared>>>(a, b, out, mode);
      }
      cudaDeviceSynchronize();
      std::vector<long long> o(CTAS);
      cudaMemcpy(o.data(), out, CTAS * 8, cudaMemcpyDeviceToHost);
      std::sort(o.begin(), o.end());
      us.push_back(o[CTAS / 2] / 1000.0 / STAGES);
    }
    std::sort(us.begin(), us.end());
    double per_stage = us[3];
    double bytes = (double)CTAS * ((mode == 1 ? 0 : mode == 0 ? A_BYTES : A_BYTES / 2) + B_BYTES);
    printf("%-30s %.3f us a stage, L2 delivering %.1f TB/s (median CTA, median of 7)\n", names[mode], per_stage,
           bytes / (per_stage * 1e-6) / 1e12);
  }
  cudaError_t e = cudaGetLastError();
  printf("%s\n", cudaGetErrorString(e));
}
