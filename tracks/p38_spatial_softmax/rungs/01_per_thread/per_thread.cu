// Rung 01: the per-thread port. Every step becomes a kernel with one thread per element of its
// result: AvgPool3d (one thread per pooled element, every PyTorch parameter honoured, nothing
// hard-coded), the transposed convolution as a gather with the clamp (one thread per output
// element), then the softmax with one thread per (sample, channel) row, which walks its whole
// row three times: max, sum of exp(z - max), write. That last kernel is the lesson: only
// batch*out_channels threads, each reading addresses S floats apart from its neighbours'.
#include "../../device/geometry.hpp"
#include "../../device/pool_conv.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p38 {
namespace {

/// One thread per row of z (batch*out_channels rows of S, in place): z <- softmax(z) * scale.
__global__ void softmax_thread_per_row(Geometry g, const float* __restrict__ scale, float* __restrict__ z) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (row >= g.rows) return;
  float* v = z + row * g.spatial;
  float m = -INFINITY;
  for (int64_t i = 0; i < g.spatial; ++i) m = fmaxf(m, v[i]);
  float sum = 0.f;
  for (int64_t i = 0; i < g.spatial; ++i) sum += expf(v[i] - m);
  const float factor = scale[row % g.out_channels] / sum;
  for (int64_t i = 0; i < g.spatial; ++i) v[i] = expf(v[i] - m) * factor;
}

size_t workspace(const Problem38& p) { return pooled_bytes(make_geometry(p)); }

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  a.mark("conv");
  launch_pool_conv_clamp(g, a.in.x, a.in.weight, a.in.bias, static_cast<float*>(a.workspace), a.out, a.stream);
  a.mark("softmax");
  softmax_thread_per_row<<<grid_for(g.rows, 128, "softmax_thread_per_row"), 128, 0, a.stream>>>(g, a.in.scale, a.out);
  CUDA_CHECK_LAUNCH("softmax_thread_per_row");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "one thread per element; the softmax one thread per row",
                      nullptr, workspace, run};
  return r;
}

}  // namespace ladder::p38
