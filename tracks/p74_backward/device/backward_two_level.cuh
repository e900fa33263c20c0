// The deterministic per-channel reduction (rung 08 introduces it, rung 09 reuses it): every
// (plane, chunk) block writes its (grad_multiplier, grad_bias) partial to its own slot of the
// workspace, and a second kernel, one block per channel, sums that channel's slots in an order
// fixed by the problem and the block size. No atomics: two runs give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../rung.hpp"
#include "backward.cuh"
#include "common/toolkit/cuda_check.hpp"
#include "geometry.hpp"
#include "reduce.cuh"
#include "todo.cuh"  // ladder_todo: the handout's stubs (labelled with the including rung)

namespace ladder::p74 {

/// Bytes of the partials: one float2 (grad_multiplier, grad_bias) per (plane, chunk).
inline size_t channel_partials_bytes(const Geometry& g) {
  const PlaneChunks pc = plane_chunks(g, "routed_partials");
  return backward_aligned(size_t(pc.planes) * pc.chunks * sizeof(float2));
}

/// Plane-chunk blocks (kReduceBlock threads): routed gradients of the chunk, g_y stored, the
/// block's (grad_multiplier, grad_bias) sum (warp shuffles, one slot per warp) written to
/// partials[plane * gridDim.x + chunk].
static __global__ void __launch_bounds__(kReduceBlock)
    routed_partials(Geometry g, const float* __restrict__ grad_out, const float* __restrict__ y_saved,
                    const float* __restrict__ multiplier, float* __restrict__ g_y, float2* __restrict__ partials) {
  __shared__ float2 slots[32];
  const int64_t planes = int64_t(g.batch) * g.out_channels;
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const float2 sum = block_warp_sum(routed_chunk(g, plane, grad_out, y_saved, multiplier, g_y), slots);
    // BEGIN SOLUTION p74-08
    // STUB: (void)sum, (void)partials;  // TODO(p74-08.2): thread 0 writes the block's sum to its own slot
    if (threadIdx.x == 0) partials[plane * gridDim.x + blockIdx.x] = sum;
    // END SOLUTION
  }
}

/// One block per channel c: grad_multiplier[c] and grad_bias[c] = the sum of c's partials, thread
/// t taking entries t, t + blockDim.x, ... of the (n, chunk) list in order, then a shared-memory
/// tree (blockDim.x float2 of dynamic shared memory, blockDim.x a power of two). The assignment
/// depends only on the sizes and the block: deterministic.
static __global__ void channel_sums(Geometry g, const float2* __restrict__ partials, int chunks,
                                    float* __restrict__ grad_multiplier, float* __restrict__ grad_bias) {
  // BEGIN SOLUTION p74-08
  // STUB: ladder_todo("p74-08.1", "channel_sums: block c sums channel c's partials in a fixed order, no atomics");
  // STUB: (void)g, (void)partials, (void)chunks, (void)grad_multiplier, (void)grad_bias;
  extern __shared__ float2 tree[];
  const int c = blockIdx.x;
  const int64_t count = int64_t(g.batch) * chunks;
  float2 sum = make_float2(0.f, 0.f);
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t n = j / chunks;
    sum = plus(sum, partials[(n * g.out_channels + c) * chunks + (j - n * chunks)]);
  }
  sum = block_tree_sum(sum, tree);
  if (threadIdx.x == 0) {
    grad_multiplier[c] = sum.x;
    grad_bias[c] = sum.y;
  }
  // END SOLUTION
}

/// The two kernels above: g_y into `g_y` (pool-sized), grad_multiplier and grad_bias into the
/// outputs, `partials` channel_partials_bytes(g) of scratch. Throws CudaError on a failed launch.
inline void launch_two_level_reduction(const Geometry& g, const BackwardArgs& a, float* g_y, float2* partials) {
  const PlaneChunks pc = plane_chunks(g, "routed_partials");
  routed_partials<<<pc.grid, kReduceBlock, 0, a.stream>>>(g, a.grad_out, a.y_saved, a.in.multiplier, g_y, partials);
  CUDA_CHECK_LAUNCH("routed_partials");
  constexpr int kSumBlock = 256;  // a power of two: the tree halves it
  channel_sums<<<unsigned(g.out_channels), kSumBlock, kSumBlock * sizeof(float2), a.stream>>>(
      g, partials, int(pc.chunks), a.grad_multiplier, a.grad_bias);
  CUDA_CHECK_LAUNCH("channel_sums");
}

}  // namespace ladder::p74
