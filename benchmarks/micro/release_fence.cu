// How long a warp waits at a release fence (fence.acq_rel.gpu, what red.release.gpu compiles to
// first) after 8 KB of 16-byte stores, by the stores' pattern: each lane its own 128-byte line
// (a store instruction touching 32 lines), 512 contiguous bytes a store, or lane pairs writing one
// 32-byte sector; 1 or 4 warps a CTA on 132 CTAs, after a 256 MB fill or with the lines in L2.
#include <cstdio>
#include <vector>
#include <algorithm>
#include "common.cuh"
__device__ __forceinline__ void st16(char* p, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory"); }
// pattern 0: lane l owns line l (our helpers: 8 stores of 16 B a lane, each store touches 32 lines)
// pattern 1: each store instruction writes 512 contiguous bytes (4 full lines)
// pattern 2: pairs of lanes write one 32-byte sector (store j: lane l -> line l/2, sector j... )
__global__ void k(char* buf, long long* out, int pattern, int warps_per_cta) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= warps_per_cta) return;
  char* base = buf + ((size_t)blockIdx.x * warps_per_cta + warp) * 8192;
  unsigned v = lane * 7 + 1;
  long long t0 = clock64();
  for (int j = 0; j < 8; ++j) {
    char* p;
    if (pattern == 0) p = base + lane * 128 + ((j + lane) % 8) * 16;  // rotate: lanes of one store hit different chunks
    else if (pattern == 3) p = base + lane * 128 + j * 16;
    else if (pattern == 1) p = base + j * 512 + lane * 16;
    else p = base + (lane / 2) * 512 + (j * 2 + lane % 2) * 16;   // 16 lines of 512 B? (lane pair: a sector)
    st16(p, v, v + j, v ^ j, j);
  }
  long long t1 = clock64();
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  long long t2 = clock64();
  if (lane == 0) { out[(blockIdx.x * warps_per_cta + warp) * 2] = t1 - t0; out[(blockIdx.x * warps_per_cta + warp) * 2 + 1] = t2 - t0; }
}
int main(){
  size_t N = 32ull<<20; long long* dummy; cudaMalloc(&dummy, N*8);
  char* buf; cudaMalloc(&buf, 132 * 4 * 8192 * 2);
  long long* out; cudaMalloc(&out, 132 * 4 * 2 * 8);
  const char* names[4] = {"lane a line, rotated", "512 B a store", "lane pairs a sector", "lane a line, same chunk"};
  for (int wpc = 1; wpc <= 4; wpc *= 4)
  for (int pattern = 0; pattern < 4; ++pattern) for (int st = 0; st < 2; ++st) {
    std::vector<double> a, b;
    for (int rep = 0; rep < 7; ++rep) {
      if (st == 0) fill<<<1056, 1024>>>(dummy, N); else k<<<132, 128>>>(buf, out, pattern, wpc);
      k<<<132, 128>>>(buf, out, pattern, wpc);
      cudaDeviceSynchronize();
      int n = 132 * wpc; std::vector<long long> o(n * 2); cudaMemcpy(o.data(), out, n * 16, cudaMemcpyDeviceToHost);
      std::vector<long long> x, y; for (int i = 0; i < n; ++i) { x.push_back(o[2*i]); y.push_back(o[2*i+1]); }
      std::sort(x.begin(), x.end()); std::sort(y.begin(), y.end()); a.push_back(x[n/2]); b.push_back(y[n/2]);
    }
    std::sort(a.begin(), a.end()); std::sort(b.begin(), b.end());
    printf("%d warps/CTA %-24s %-6s stores issued %6.0f cycles, fence done %6.0f cycles (%.2f us)\n", wpc, names[pattern], st ? "warm" : "dirty", a[3], b[3], b[3] / 1980.0);
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
