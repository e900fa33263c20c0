// Rung 05: fusion, writing once and rescaling. What changed from rung 04: the softmax's sum moves
// into the convolution's epilogue. The kernel that computes z clamps it, takes e = exp(z - hi)
// (the clamp bound hi replaces the row max: device/fused.cuh proves why that is safe), stores e
// and adds it into one partial sum per block; a small kernel sums each row's partials in a fixed
// order into factor = scale[c] / sum; a last pass multiplies the output by it. z never exists:
// the output is written, then read and written once more (the rescale).
#include "../../device/fused.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "todo.cuh"     // ladder_todo: the handout's stubs

namespace ladder::p38 {
namespace {

/// out[i] *= factor[row of i], grid-stride.
__global__ void rescale(Geometry g, const float* __restrict__ factor, float* __restrict__ out) {
  // BEGIN SOLUTION
  // STUB: ladder_todo("p38-05.1", "rescale: multiply each output by its row's factor (grid-stride loop)");
  // STUB: (void)g, (void)factor, (void)out;
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] *= factor[i / g.spatial];
  // END SOLUTION
}

size_t workspace(const Problem38& p) { return FusedWorkspace::bytes(make_geometry(p)); }

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  const FusedWorkspace w(g, a.workspace);
  a.mark("fused");
  launch_avg_pool3d(g, a.in.x, w.pooled, a.stream);
  // BEGIN SOLUTION
  // STUB: ladder_todo("p38-05.2", "run: launch conv_exp_partials<true> (e into a.out, block sums into w.partials)");
  conv_exp_partials<true><<<capped_grid(g.rows * parts_per_row(g)), kFusedBlock, 0, a.stream>>>(
      g, w.pooled, a.in.weight, a.in.bias, g.clamp_hi, a.out, w.partials);
  CUDA_CHECK_LAUNCH("conv_exp_partials<write>");
  // END SOLUTION
  launch_row_factor(g, w, a.in.scale, a.stream);
  const int64_t total = g.rows * g.spatial;
  // BEGIN SOLUTION
  // STUB: (void)total, (void)rescale;
  // STUB: ladder_todo("p38-05.3", "run: launch rescale over the total outputs, each times its row's w.factor");
  rescale<<<grid_for(total < (int64_t(1) << 30) ? total : (int64_t(1) << 30), 256, "rescale"), 256, 0, a.stream>>>(
      g, w.factor, a.out);
  CUDA_CHECK_LAUNCH("rescale");
  // END SOLUTION
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "epilogue clamps, exps and sums; write once, then rescale",
                      nullptr, workspace, run, shift_unsupported};
  return r;
}

}  // namespace ladder::p38
