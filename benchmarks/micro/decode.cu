// The e2m1 decode's rate on an SM: the kernels' decode (e4m3 conversions, ptx.decode_word) against
// a decode by bit placement (no conversion), and the three instructions alone. Prints, per variant,
// the time and words (or instructions) a clock an SM at the card's maximum clock.
#include <cstdio>
#include <cuda_runtime.h>
#define DECODE(NAME, BODY) \
__device__ __forceinline__ void NAME(unsigned w, unsigned s, unsigned &a, unsigned &b, unsigned &c, unsigned &d) { \
  asm volatile(BODY : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(w), "r"(s)); }
DECODE(dec_cvt, "{\n"
"    .reg .b32 t, u, even, odd, r;\n"
"    .reg .b16 e0, e1, o0, o1;\n"
"    shl.b32 t, %4, 4;\n"
"    and.b32 t, t, 0x80808080;\n"
"    shl.b32 u, %4, 2;\n"
"    and.b32 u, u, 0x1C1C1C1C;\n"
"    or.b32 even, t, u;\n"
"    and.b32 t, %4, 0x80808080;\n"
"    shr.b32 u, %4, 2;\n"
"    and.b32 u, u, 0x1C1C1C1C;\n"
"    or.b32 odd, t, u;\n"
"    mov.b32 {e0, e1}, even;\n"
"    mov.b32 {o0, o1}, odd;\n"
"    cvt.rn.f16x2.e4m3x2 r, e0;\n"
"    mul.rn.f16x2 %0, r, %5;\n"
"    cvt.rn.f16x2.e4m3x2 r, e1;\n"
"    mul.rn.f16x2 %1, r, %5;\n"
"    cvt.rn.f16x2.e4m3x2 r, o0;\n"
"    mul.rn.f16x2 %2, r, %5;\n"
"    cvt.rn.f16x2.e4m3x2 r, o1;\n"
"    mul.rn.f16x2 %3, r, %5;\n"
"}\n")
DECODE(dec_bits, "{\n"
"    .reg .b32 e, o, a, b, x, k;\n"
"    and.b32 e, %4, 0x0F0F0F0F;\n"
"    and.b32 o, %4, 0xF0F0F0F0;\n"
"    mov.b32 k, 0x74007400;\n"
"    shl.b32 a, e, 12;\n"
"    shl.b32 b, e, 9;\n"
"    or.b32 x, a, b;\n"
"    and.b32 x, x, 0x8E008E00;\n"
"    mul.rn.f16x2 x, x, k;\n"
"    mul.rn.f16x2 %0, x, %5;\n"
"    shl.b32 a, o, 8;\n"
"    shl.b32 b, o, 5;\n"
"    or.b32 x, a, b;\n"
"    and.b32 x, x, 0x8E008E00;\n"
"    mul.rn.f16x2 x, x, k;\n"
"    mul.rn.f16x2 %1, x, %5;\n"
"    shl.b32 a, e, 4;\n"
"    shl.b32 b, e, 1;\n"
"    or.b32 x, a, b;\n"
"    and.b32 x, x, 0x8E008E00;\n"
"    mul.rn.f16x2 x, x, k;\n"
"    mul.rn.f16x2 %2, x, %5;\n"
"    mov.b32 a, o;\n"
"    shr.b32 b, o, 3;\n"
"    or.b32 x, a, b;\n"
"    and.b32 x, x, 0x8E008E00;\n"
"    mul.rn.f16x2 x, x, k;\n"
"    mul.rn.f16x2 %3, x, %5;\n"
"}\n")
template <int V>
__global__ void bench(const unsigned *in, unsigned *out, int iters) {
  unsigned w0 = in[threadIdx.x], w1 = w0 * 3u, w2 = w0 * 5u, w3 = w0 * 7u;
  unsigned s = 0x3C003C00u, acc = 0;
  for (int i = 0; i < iters; ++i) {
    unsigned a, b, c, d;
#define ONE(W) if (V == 0) dec_cvt(W, s, a, b, c, d); else dec_bits(W, s, a, b, c, d); acc ^= a ^ b; acc ^= c ^ d; W = W * 1664525u + 1013904223u;
    ONE(w0) ONE(w1) ONE(w2) ONE(w3)
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
// one instruction, 8 independent registers a thread, `iters` times: ASM updates register %0
#define ONE_INSTRUCTION(NAME, FIRST, ASM) \
__global__ void NAME(unsigned *out, int iters) { \
  unsigned x[8]; \
  for (int j = 0; j < 8; ++j) x[j] = FIRST; \
  for (int i = 0; i < iters; ++i) \
    for (int j = 0; j < 8; ++j) asm volatile(ASM : "+r"(x[j])); \
  unsigned acc = 0; for (int j = 0; j < 8; ++j) acc ^= x[j]; \
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc; }
ONE_INSTRUCTION(cvt_only, threadIdx.x * 17u + j, "{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %0;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}")
ONE_INSTRUCTION(lop_only, threadIdx.x * 17u + j, "lop3.b32 %0, %0, 0x8E008E00, %0, 0x6a;")
ONE_INSTRUCTION(hmul_only, 0x3C003C00u + j, "mul.rn.f16x2 %0, %0, %0;")
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  unsigned *in, *out; cudaMalloc(&in, 1024 * 4); cudaMalloc(&out, 64 << 20);
  cudaMemset(in, 0x5A, 1024 * 4);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  int blocks = sms * 4, threads = 256, iters = 4096;
  for (int rep = 0; rep < 2; ++rep) {
    for (int v = 0; v < 5; ++v) {
      cudaEventRecord(e0);
      if (v == 0) bench<0><<<blocks, threads>>>(in, out, iters);
      if (v == 1) bench<1><<<blocks, threads>>>(in, out, iters);
      if (v == 2) cvt_only<<<blocks, threads>>>(out, iters);
      if (v == 3) lop_only<<<blocks, threads>>>(out, iters);
      if (v == 4) hmul_only<<<blocks, threads>>>(out, iters);
      cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      double ops = (double)blocks * threads * iters * (v < 2 ? 4 : 8);
      const char *name[] = {"decode, cvt (words)", "decode, bits (words)", "cvt e4m3x2", "lop3", "mul.f16x2"};
      printf("%-20s %9.3f ms  %8.2f per SM per clock (max clock %d MHz)\n", name[v], ms,
             ops / (ms * 1e-3) / sms / (clk * 1e3), clk / 1000);
    }
  }
  printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
