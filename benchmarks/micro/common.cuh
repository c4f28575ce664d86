// What the microbenchmarks here share (each .cu includes it; micro.py builds the .cu files): the
// %globaltimer reading and the leaderboard's L2 clear, a 256 MB fill that leaves every L2 line dirty.
#pragma once
#include <cstddef>
__device__ __forceinline__ long long gt() { long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
// launched as fill<<<1056, 1024>>>(buffer, 32 << 20): 32 Mi int64, 256 MB
__global__ void fill(long long* d, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i < n; i += (size_t)gridDim.x * blockDim.x) d[i] = 42;
}
