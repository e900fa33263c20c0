// Warp-shuffle reductions the track's later rungs share (rung 04 introduces them).
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace ladder::p38 {

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// A softmax partial: the largest value seen, m, and the sum of exp(v - m) over the values seen.
struct MaxSum {
  float m, s;
};

/// The online softmax's merge (Milakov and Gimelshein, "Online normalizer calculation for
/// softmax", 2018): both sums rescaled to the larger max. An empty partial is {-inf, 0}.
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, offset), __shfl_xor_sync(0xffffffffu, v.s, offset)};
    v = merge(v, o);
  }
  return v;
}

/// Sum of one float per thread over the block, every thread gets it. `scratch` holds 32 floats;
/// blockDim.x a multiple of 32. Fixed order: deterministic.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  return warp_sum(v);
}

}  // namespace ladder::p38
