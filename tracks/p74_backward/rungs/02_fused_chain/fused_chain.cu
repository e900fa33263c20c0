// Rung 02: the chain in one kernel. What changed from rung 01: lrelu, * multiplier and lrelu
// become one elementwise kernel, z = lrelu(multiplier[c] * lrelu(y)), reading y once and writing
// z once instead of three reads and three writes of a conv-sized buffer. Same arithmetic, so the
// results are bitwise rung 01's. The convolution and the pool stay as they were.
#include "../../device/forward_conv.cuh"
#include "../../device/forward_pool.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

/// z = lrelu(multiplier[c] * lrelu(y)), y and z (batch, out_channels, conv D*H*W).
__global__ void chain_kernel(Geometry g, const float* __restrict__ y, const float* __restrict__ multiplier,
                             float* __restrict__ z) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.conv_elems;
       i += int64_t(gridDim.x) * blockDim.x)
    z[i] = chain(y[i], multiplier[(i / g.conv_spatial) % g.out_channels], g.slope);
}

size_t workspace(const Problem74& p) { return ConvBuffers::bytes(make_geometry(p)); }

void forward(const ForwardArgs& a) {
  const Geometry g = make_geometry(a.problem);
  const ConvBuffers w(g, a.workspace);
  a.mark("conv");
  launch_conv_transpose(g, a.in.x, a.in.weight, a.in.bias, w.y, a.stream);
  a.mark("chain");
  chain_kernel<<<capped_grid(g.conv_elems, 256, "chain_kernel"), 256, 0, a.stream>>>(g, w.y, a.in.multiplier, w.z);
  CUDA_CHECK_LAUNCH("chain_kernel");
  a.mark("pool");
  launch_max_pool(g, w.z, w.y, a.out, a.argmax, a.y_saved, a.stream);
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung r;
    r.id = LADDER_RUNG_ID;
    r.name = LADDER_RUNG_NAME;
    r.idea = "lrelu, * multiplier, lrelu in one elementwise kernel";
    r.forward_workspace = workspace;
    r.forward = forward;
    r.deterministic = true;
    return r;
  }();
  return r;
}

}  // namespace ladder::p74
