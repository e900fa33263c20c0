// Block-wide sums the backward rungs share. Each sums a float2 per thread, the two per-channel
// gradients at once: .x the grad_multiplier terms, .y the grad_bias terms. Every one sums in an
// order fixed by the block size alone, so a block's result is the same on every run; only what a
// rung does with it afterwards (an atomicAdd, or a write to its own slot) decides determinism.
#pragma once

#include <cuda_runtime.h>

#include "todo.cuh"  // ladder_todo: the handout's stubs (labelled with the including rung)

namespace ladder::p74 {

__device__ __forceinline__ float2 plus(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }

/// Shared-memory tree with sequential addressing (rung 06): thread t adds t + stride, so the
/// active threads stay contiguous and read distinct banks. `partial` holds blockDim.x float2
/// (dynamic shared memory: sized by the block, never by the problem); blockDim.x a power of two.
/// Every thread returns the block's sum.
__device__ inline float2 block_tree_sum(float2 v, float2* partial) {
  // BEGIN SOLUTION p74-06
  // STUB: ladder_todo("p74-06.1", "block_tree_sum: sum v over the block, a tree in shared memory");
  // STUB: (void)partial;
  // STUB: return v;
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] = plus(partial[threadIdx.x], partial[threadIdx.x + stride]);
    __syncthreads();
  }
  const float2 sum = partial[0];
  __syncthreads();  // before a next call overwrites partial
  return sum;
  // END SOLUTION
}

/// Sum over the warp by __shfl_down_sync: lane 0 gets the warp's sum (the other lanes partial
/// sums). All 32 lanes must call it.
__device__ __forceinline__ float2 warp_sum_down(float2 v) {
  // BEGIN SOLUTION p74-07
  // STUB: // TODO(p74-07.2): warp_sum_down, the warp's sum in lane 0 by __shfl_down_sync
  for (int offset = 16; offset > 0; offset >>= 1) {
    v.x += __shfl_down_sync(0xffffffffu, v.x, offset);
    v.y += __shfl_down_sync(0xffffffffu, v.y, offset);
  }
  // END SOLUTION
  return v;
}

/// Warp shuffles, one shared slot per warp, then the first warp sums the slots (rung 07): one
/// barrier instead of the tree's log2(blockDim.x). `slots` holds 32 float2; blockDim.x a multiple
/// of 32, at most 1024. Thread 0 returns the block's sum (the others partial sums).
__device__ inline float2 block_warp_sum(float2 v, float2* slots) {
  // BEGIN SOLUTION p74-07
  // STUB: ladder_todo("p74-07.1", "block_warp_sum: each warp's sum, then the first warp sums the slots");
  // STUB: (void)slots;
  // STUB: return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum_down(v);
  __syncthreads();  // slots may still be read by the first warp of a previous call
  if (lane == 0) slots[warp] = v;
  __syncthreads();
  if (warp == 0) v = warp_sum_down(lane < warps ? slots[lane] : make_float2(0.f, 0.f));
  return v;
  // END SOLUTION
}

}  // namespace ladder::p74
