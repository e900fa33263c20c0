// Warp-level all-reduces that several stages share: a float sum and the log-sum-exp combine of
// online (max, sum of exp) pairs. Both are butterflies (__shfl_xor_sync over offsets 16, 8, 4,
// 2, 1), so every lane ends with the same value, reached by the same fixed tree on every run.
// Full-mask shuffles: all 32 lanes of the warp must call them (a lane without data passes the
// neutral element: 0 for the sum, the pair (-inf, 0) for the log-sum-exp).
#pragma once

#include "logsumexp.hpp"
#include "todo.cuh"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

/// The sum of v over the 32 lanes of the warp, returned to every lane. Registers only: no shared
/// memory, no barrier.
__device__ __forceinline__ float warp_allreduce_sum(float v) {
  // BEGIN SOLUTION 04
  // STUB: ladder_todo("04.4", "warp_allreduce_sum: a __shfl_xor_sync butterfly, the sum in every lane");
  // STUB: return v;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
  // END SOLUTION
}

/// Merges the online log-sum-exp pairs (max_value, sum) of the 32 lanes (lse_merge, which keeps
/// torch.logsumexp's max shift and inf/NaN rules); every lane ends with the warp's pair, which
/// lse_finish turns into the log-sum-exp.
__device__ __forceinline__ void warp_allreduce_lse(float& max_value, float& sum) {
  // BEGIN SOLUTION 04
  // STUB: ladder_todo("04.5", "warp_allreduce_lse: the same butterfly on the (max_value, sum) pair");
  // STUB: ladder_unused(max_value, sum);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other_max = __shfl_xor_sync(0xffffffffu, max_value, offset);
    const float other_sum = __shfl_xor_sync(0xffffffffu, sum, offset);
    lse_merge(max_value, sum, other_max, other_sum);
  }
  // END SOLUTION
}

/// The sum of v over a block of kBlockThreads threads, returned to every thread: shuffles within
/// each warp, one slot per warp in `scratch` (kBlockThreads/32 floats of shared memory), the
/// slots added in warp order. A fixed tree, so the result is the same bits on every run. Every
/// thread must call it (two barriers; the second lets the caller reuse scratch at once).
template <int kBlockThreads>
__device__ inline float block_allreduce_sum(float v, float* scratch) {
  static_assert(kBlockThreads % 32 == 0, "whole warps");
  v = warp_allreduce_sum(v);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kBlockThreads / 32; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

}  // namespace
}  // namespace ladder
