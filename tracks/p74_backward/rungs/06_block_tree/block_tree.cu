// Rung 06: a block tree in shared memory. What changed from rung 05: grad_multiplier and
// grad_bias are reduced per block before any atomic. Each block takes a chunk of one (n, c)
// plane (grid y: the planes; grid x: the chunks), every thread folds its elements, then the
// block halves its partials in shared memory (sequential addressing) and issues one atomicAdd
// per output: 1,024 times fewer atomics at the KernelBench size. The shared memory is sized by
// the block (blockDim.x float2, dynamic), never by the problem. The atomics still land in any
// order: not deterministic.
#include "../../device/backward.cuh"
#include "../../device/backward_generic.cuh"
#include "../../device/geometry.hpp"
#include "../../device/reduce.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "common/toolkit/cuda_check.hpp"

namespace ladder::p74 {
namespace {

/// Plane-chunk blocks (kReduceBlock threads, kReduceBlock float2 of dynamic shared memory):
/// g_y of the chunk stored, the chunk's (grad_multiplier, grad_bias) terms summed by
/// block_tree_sum, one atomicAdd per output per block (both zeroed before).
__global__ void __launch_bounds__(kReduceBlock)
    routed_block_tree(Geometry g, const float* __restrict__ grad_out, const float* __restrict__ y_saved,
                      const float* __restrict__ multiplier, float* __restrict__ g_y, float* grad_multiplier,
                      float* grad_bias) {
  extern __shared__ float2 tree[];
  const int64_t planes = int64_t(g.batch) * g.out_channels;
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const float2 sum = block_tree_sum(routed_chunk(g, plane, grad_out, y_saved, multiplier, g_y), tree);
    if (threadIdx.x == 0) {
      const int c = int(plane % g.out_channels);
      atomicAdd(&grad_multiplier[c], sum.x);
      atomicAdd(&grad_bias[c], sum.y);
    }
  }
}

size_t workspace(const Problem74& p) { return g_y_bytes(make_geometry(p)); }

void run(const BackwardArgs& a) {
  const Geometry g = make_geometry(a.problem);
  float* g_y = static_cast<float*>(a.workspace);
  a.mark("reduce");
  zero_channel_grads(g, a);
  const PlaneChunks pc = plane_chunks(g, "routed_block_tree");
  routed_block_tree<<<pc.grid, kReduceBlock, kReduceBlock * sizeof(float2), a.stream>>>(
      g, a.grad_out, a.y_saved, a.in.multiplier, g_y, a.grad_multiplier, a.grad_bias);
  CUDA_CHECK_LAUNCH("routed_block_tree");
  generic_weight_and_input(g, a, g_y);
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung x;
    x.id = LADDER_RUNG_ID;
    x.name = LADDER_RUNG_NAME;
    x.idea = "shared-memory tree per block, one atomicAdd per block";
    x.backward_workspace = workspace;
    x.backward = run;
    x.deterministic = false;
    return x;
  }();
  return r;
}

}  // namespace ladder::p74
