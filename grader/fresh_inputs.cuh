// Fresh inputs for every timed repetition of grade_timing: uniform [0, 1) values (like
// torch.rand) drawn on the device from a hash of (seed, repetition, index), so each repetition's
// input is new to every contender and the refill costs a fraction of a millisecond per GB.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.hpp"

namespace ladder {
namespace {

/// splitmix64's finalizer: a well-mixed 64-bit hash of z.
__device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Fills data[0..n) (device memory, fp32) with values in [0, 1): data[i] holds 24 bits of a hash
/// of (seed, rep, i). Grid-stride loop: any grid covers any n.
__global__ void fill_fresh(float* data, int64_t n, uint64_t seed, uint64_t rep) {
  const uint64_t key = mix64(seed ^ mix64(rep));
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    data[i] = float(mix64(key + uint64_t(i)) >> 40) * (1.0f / 16777216.0f);
}

/// Enqueues fill_fresh over data[0..n) on `stream`: repetition `rep`'s input. Throws CudaError.
inline void refill_fresh(float* data, int64_t n, uint64_t seed, uint64_t rep, cudaStream_t stream) {
  const unsigned grid = unsigned(std::clamp<int64_t>((n + 255) / 256, 1, 65535));
  fill_fresh<<<grid, 256, 0, stream>>>(data, n, seed, rep);
  CUDA_CHECK_LAUNCH("fill_fresh");
}

}  // namespace
}  // namespace ladder
