// Rung 07: warp shuffles. What changed from rung 06: the block's sum. Each warp sums its 32
// values by __shfl_down_sync (registers only, no barrier), lane 0 puts the warp's sum in one
// shared slot, and the first warp sums the slots: two barriers in place of the tree's ten, and
// 32 float2 of shared memory. Still one atomicAdd per block per output: not deterministic.
#include "../../device/backward.cuh"
#include "../../device/backward_generic.cuh"
#include "../../device/geometry.hpp"
#include "../../device/reduce.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "common/toolkit/cuda_check.hpp"

namespace ladder::p74 {
namespace {

/// Plane-chunk blocks (kReduceBlock threads): g_y of the chunk stored, the chunk's
/// (grad_multiplier, grad_bias) terms summed by block_warp_sum, one atomicAdd per output per
/// block (both zeroed before).
__global__ void __launch_bounds__(kReduceBlock)
    routed_warp_shuffle(Geometry g, const float* __restrict__ grad_out, const float* __restrict__ y_saved,
                        const float* __restrict__ multiplier, float* __restrict__ g_y, float* grad_multiplier,
                        float* grad_bias) {
  __shared__ float2 slots[32];
  const int64_t planes = int64_t(g.batch) * g.out_channels;
  for (int64_t plane = blockIdx.y; plane < planes; plane += gridDim.y) {
    const float2 sum = block_warp_sum(routed_chunk(g, plane, grad_out, y_saved, multiplier, g_y), slots);
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
  const PlaneChunks pc = plane_chunks(g, "routed_warp_shuffle");
  routed_warp_shuffle<<<pc.grid, kReduceBlock, 0, a.stream>>>(g, a.grad_out, a.y_saved, a.in.multiplier, g_y,
                                                              a.grad_multiplier, a.grad_bias);
  CUDA_CHECK_LAUNCH("routed_warp_shuffle");
  generic_weight_and_input(g, a, g_y);
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung x;
    x.id = LADDER_RUNG_ID;
    x.name = LADDER_RUNG_NAME;
    x.idea = "warp shuffles and one shared slot per warp, one atomicAdd per block";
    x.backward_workspace = workspace;
    x.backward = run;
    x.deterministic = false;
    return x;
  }();
  return r;
}

}  // namespace ladder::p74
