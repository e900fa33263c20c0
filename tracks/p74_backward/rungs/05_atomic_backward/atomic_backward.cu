// Rung 05: the first backward rung, the earlier attempt's kernel. One thread per pooled element
// computes the element's routed gradient (routed_gradient, device/backward.cuh), stores g_y, and
// adds its two per-channel terms by one atomicAdd each into grad_multiplier[c] and grad_bias[c].
// At the KernelBench size that is 8,388,608 atomics per output onto its 32 addresses (262,144
// each): they serialize in L2, and the order they land in, so the rounding of each sum, changes
// from run to run. grad_weight and grad_x come from the generic kernels of
// device/backward_generic.cuh (one thread per output element, a fixed order), which rungs 06-08
// keep.
#include "../../device/backward.cuh"
#include "../../device/backward_generic.cuh"
#include "../../device/geometry.hpp"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "common/toolkit/cuda_check.hpp"

namespace ladder::p74 {
namespace {

/// One thread per pooled element e = (n, c, q): g_y[e] from routed_gradient, and one atomicAdd
/// per element into grad_multiplier[c] and grad_bias[c] (both zeroed before).
__global__ void routed_atomic(Geometry g, const float* __restrict__ grad_out, const float* __restrict__ y_saved,
                              const float* __restrict__ multiplier, float* __restrict__ g_y, float* grad_multiplier,
                              float* grad_bias) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= g.out_elems) return;
  const int c = int((e / g.out_spatial) % g.out_channels);
  const float2 r = routed_gradient(grad_out[e], y_saved[e], multiplier[c], g.slope);
  g_y[e] = r.y;
  atomicAdd(&grad_multiplier[c], r.x);
  atomicAdd(&grad_bias[c], r.y);
}

size_t workspace(const Problem74& p) { return g_y_bytes(make_geometry(p)); }

void run(const BackwardArgs& a) {
  const Geometry g = make_geometry(a.problem);
  float* g_y = static_cast<float*>(a.workspace);
  a.mark("reduce");
  zero_channel_grads(g, a);
  constexpr int kBlock = 256;
  routed_atomic<<<grid_for(g.out_elems, kBlock, "routed_atomic"), kBlock, 0, a.stream>>>(
      g, a.grad_out, a.y_saved, a.in.multiplier, g_y, a.grad_multiplier, a.grad_bias);
  CUDA_CHECK_LAUNCH("routed_atomic");
  generic_weight_and_input(g, a, g_y);
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung x;
    x.id = LADDER_RUNG_ID;
    x.name = LADDER_RUNG_NAME;
    x.idea = "per-channel gradients by one atomicAdd per pooled element";
    x.backward_workspace = workspace;
    x.backward = run;
    x.deterministic = false;
    return x;
  }();
  return r;
}

}  // namespace ladder::p74
