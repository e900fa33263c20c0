// Rung 06: fusion, recomputing instead of rescaling. What changed from rung 05: the first pass only
// sums (it writes nothing), and a second pass computes the convolution again and writes the final
// value exp(z - hi) * factor once. The output makes one trip to memory instead of three (write,
// read, write); the price is a second convolution. Which wins depends on whether the
// convolution or the memory traffic is the bottleneck: the ladder measures both.
#include "../../device/fused.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p38 {
namespace {

/// One thread per output element: out = exp(clamp(conv) - shift) * factor[row].
__global__ void conv_exp_scaled(Geometry g, const float* __restrict__ pooled, const float* __restrict__ weight,
                                const float* __restrict__ bias, float shift, const float* __restrict__ factor,
                                float* __restrict__ out) {
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / g.spatial;
    out[i] = expf(clamped_conv_at(g, pooled, weight, bias, row, int(i - row * g.spatial)) - shift) * factor[row];
  }
}

size_t workspace(const Problem38& p) { return FusedWorkspace::bytes(make_geometry(p)); }

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  const FusedWorkspace w(g, a.workspace);
  a.mark("fused");
  launch_avg_pool3d(g, a.in.x, w.pooled, a.stream);
  conv_exp_partials<false><<<capped_grid(g.rows * parts_per_row(g)), kFusedBlock, 0, a.stream>>>(
      g, w.pooled, a.in.weight, a.in.bias, g.clamp_hi, nullptr, w.partials);
  CUDA_CHECK_LAUNCH("conv_exp_partials<sum only>");
  launch_row_factor(g, w, a.in.scale, a.stream);
  const int64_t total = g.rows * g.spatial;
  conv_exp_scaled<<<grid_for(total < (int64_t(1) << 30) ? total : (int64_t(1) << 30), 256, "conv_exp_scaled"), 256, 0,
                    a.stream>>>(g, w.pooled, a.in.weight, a.in.bias, g.clamp_hi, w.factor, a.out);
  CUDA_CHECK_LAUNCH("conv_exp_scaled");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "sum in a first pass, recompute and write once in a second",
                      nullptr, workspace, run, shift_unsupported, true, /*conv_passes=*/2};
  return r;
}

}  // namespace ladder::p38
