// Latency of dependent global loads and of kernel-parameter reads at a kernel's start: after
// a 256 MB fill (the leaderboard's L2 clear, every L2 line dirty), after a fill and a 256 MB
// read (clean lines), and with the data in L2 (no clear); one thread a CTA, 132 CTAs, all
// reading the same lines or each its own. Prints cycles after the start at each step (median CTA,
// median of 7 launches); a parameter read is the first two columns of the param rows.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include "common.cuh"
struct P { long long v[480]; };  // 3840-byte parameter block
__device__ __forceinline__ long long ld(const long long* p){ long long v; asm volatile("ld.global.b64 %0, [%1];":"=l"(v):"l"(p):"memory"); return v; }
// mode 0: chain of global loads; mode 1: param read first then chain; each CTA thread 0 records times
__global__ void k(const __grid_constant__ P prm, const long long* table, long long* out, int mode, int steps, int distinct) {
  if (threadIdx.x != 0) return;
  long long t[12]; int n = 0;
  long long t0 = clock64();
  long long idx = distinct ? blockIdx.x : 0;
  if (mode == 1) {
    long long a = prm.v[(idx * 3) % 480];   // dynamic index into param space
    t[n++] = clock64() - t0 + (a & 0);
    long long b = prm.v[(a + idx * 7 + 17) % 480];  // a second read, dependent
    t[n++] = clock64() - t0 + (b & 0);
    idx += (a + b) & 0;
  }
  long long cur = idx * 16;   // table: chain entries, 128-byte lines; distinct CTAs start at distinct lines
  for (int s = 0; s < steps; ++s) {
    cur = ld(table + cur);
    t[n++] = clock64() - t0 + (cur & 0);
  }
  for (int i = 0; i < n; ++i) out[blockIdx.x * 12 + i] = t[i];
  out[blockIdx.x * 12 + 11] = cur;
}
__global__ void readall(const long long* d, size_t n, long long* sink){ long long s=0; size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; for (; i < n; i += (size_t)gridDim.x*blockDim.x) s += d[i]; if (s==1) *sink = s; }
int main(){
  size_t N = 32ull<<20;  // 256 MB of int64
  long long *dummy, *other, *table, *out, *sink;
  cudaMalloc(&dummy, N*8); cudaMalloc(&other, N*8); cudaMalloc(&sink, 8);
  const int TL = 1<<20;  // table: 8 MB; chain: entry at line L points to line L + 4096 lines on
  cudaMalloc(&table, TL*8); cudaMalloc(&out, 132*12*8);
  std::vector<long long> h(TL, 0);
  for (int i = 0; i < TL; i += 16) h[i] = (i + 16*4099) % TL;   // a new line, far away, each step
  cudaMemcpy(table, h.data(), TL*8, cudaMemcpyHostToDevice);
  P prm; for (int i = 0; i < 480; ++i) prm.v[i] = (i * 37) % 480;
  const char* states[3] = {"dirty (256 MB fill)", "clean (256 MB read)", "warm (no clear)"};
  for (int mode = 0; mode < 2; ++mode) for (int distinct = 0; distinct < 2; ++distinct) for (int st = 0; st < 3; ++st) {
    std::vector<double> med[12]; int n = 0;
    for (int rep = 0; rep < 7; ++rep) {
      if (st == 0) fill<<<1056, 1024>>>(dummy, N);
      if (st == 1) { fill<<<1056,1024>>>(dummy, N); readall<<<1056, 1024>>>(other, N, sink); }
      if (st == 2) k<<<132, 32>>>(prm, table, out, mode, 6, distinct);
      k<<<132, 32>>>(prm, table, out, mode, 6, distinct);
      cudaDeviceSynchronize();
      std::vector<long long> o(132*12); cudaMemcpy(o.data(), out, o.size()*8, cudaMemcpyDeviceToHost);
      n = (mode == 1 ? 2 : 0) + 6;
      for (int i = 0; i < n; ++i) { std::vector<long long> c; for (int b = 0; b < 132; ++b) c.push_back(o[b*12+i]); std::sort(c.begin(), c.end()); med[i].push_back(c[66]); }
    }
    printf("%s %s %-22s cycles after start (median CTA, median of 7):", mode ? "param+chain" : "chain      ", distinct ? "distinct" : "same    ", states[st]);
    for (int i = 0; i < n; ++i) { std::sort(med[i].begin(), med[i].end()); printf(" %6.0f", med[i][3]); }
    printf("\n");
  }
  cudaError_t e = cudaGetLastError(); printf("%s\n", cudaGetErrorString(e));
}
