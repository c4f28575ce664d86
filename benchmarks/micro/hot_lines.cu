// Whether reads of lines many CTAs share slow a concurrent read of lines no other CTA reads, at a
// kernel's start after a 256 MB fill (the leaderboard's L2 clear, every L2 line dirty): 132 CTAs,
// each with 8 warps reading 16 KB of "A" (4 loads of 16 bytes a thread: the sm_90a kernel's own
// stage of A, 128 rows x 128 bytes) and one warp reading 16 KB of "B" of its own (the first stage
// of packed B). The A reads are shared (the 132 CTAs read 4 regions: 33 a region, as the kernel's
// CTAs of one A tile do), spread (24 regions, 5-6 CTAs a region: as if those CTAs began their
// tiles at six different stages of k), distinct (a region each), or absent. Prints, for each, the time from the
// CTA's start until its A warps and its B warp have their data (median CTA, median of 7 launches).
#include <cstdio>
#include <vector>
#include <algorithm>
#include "common.cuh"
__device__ __forceinline__ int4 ld16(const int4* p) {
  int4 v;
  asm volatile("ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
  return v;
}
constexpr int KB16 = 1024;  // 16 KB in int4
// mode 0: A shared (region cta % 4), 1: A distinct (region cta), 2: no A, 3: A spread (region cta % 24)
__global__ void k(const int4* a, const int4* b, long long* out, int* sink, int mode) {
  long long t0 = gt();
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __shared__ int acc[9];
  int s = 0;
  if (warp < 8) {
    if (mode != 2) {
      const int4* region = a + (size_t)(mode == 0 ? blockIdx.x % 4 : mode == 3 ? blockIdx.x % 24 : blockIdx.x) * KB16;
      int4 v[4];
      for (int j = 0; j < 4; ++j) v[j] = ld16(region + j * 256 + threadIdx.x);
      for (int j = 0; j < 4; ++j) s += v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    }
  } else {
    const int4* region = b + (size_t)blockIdx.x * KB16;
    int4 v[32];
    for (int j = 0; j < 32; ++j) v[j] = ld16(region + j * 32 + lane);
    for (int j = 0; j < 32; ++j) s += v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (lane == 0) acc[warp] = 0;
  __syncwarp();
  atomicAdd(&acc[warp], s);  // every lane's data in before the warp's time is taken
  __syncwarp();
  long long t1 = gt();
  if (lane == 0) {
    out[blockIdx.x * 9 + warp] = t1 - t0;
    if (acc[warp] == 0x7fffffff) *sink = warp;
  }
}
int main() {
  size_t N = 32ull << 20;  // 256 MB of int64
  long long *dummy, *out;
  int4 *a, *b;
  int* sink;
  cudaMalloc(&dummy, N * 8);
  cudaMalloc(&a, 132 * KB16 * sizeof(int4));
  cudaMalloc(&b, 132 * KB16 * sizeof(int4));
  cudaMemset(a, 1, 132 * KB16 * sizeof(int4));
  cudaMemset(b, 2, 132 * KB16 * sizeof(int4));
  cudaMalloc(&out, 132 * 9 * 8);
  cudaMalloc(&sink, 4);
  const char* names[4] = {"A shared (33 CTAs a region)", "A distinct (a region a CTA)", "no A",
                          "A spread (5-6 CTAs a region)"};
  for (int mode = 0; mode < 4; ++mode) {
    std::vector<double> a_us, b_us;
    for (int rep = 0; rep < 7; ++rep) {
      fill<<<1056, 1024>>>(dummy, N);
      k<<<132, 288>>>(a, b, out, sink, mode);
      cudaDeviceSynchronize();
      std::vector<long long> o(132 * 9);
      cudaMemcpy(o.data(), out, o.size() * 8, cudaMemcpyDeviceToHost);
      std::vector<long long> at, bt;
      for (int c = 0; c < 132; ++c) {
        long long m = 0;
        for (int w = 0; w < 8; ++w) m = std::max(m, o[c * 9 + w]);
        at.push_back(m);
        bt.push_back(o[c * 9 + 8]);
      }
      std::sort(at.begin(), at.end());
      std::sort(bt.begin(), bt.end());
      a_us.push_back(at[66] / 1000.0);
      b_us.push_back(bt[66] / 1000.0);
    }
    std::sort(a_us.begin(), a_us.end());
    std::sort(b_us.begin(), b_us.end());
    printf("%-28s A warps' data in %.2f us, B warp's %.2f us after the CTA's start (median CTA, median of 7)\n",
           names[mode], a_us[3], b_us[3]);
  }
  cudaError_t e = cudaGetLastError();
  printf("%s\n", cudaGetErrorString(e));
}
