// Rung 01: the naive port. Every step of the model is its own kernel with one thread per element
// of its result, and every PyTorch parameter is honoured: ConvTranspose3d as a gather writing y,
// then the chain as three elementwise kernels (z = lrelu(y), z *= multiplier, z = lrelu(z)), then
// MaxPool3d with its argmax, reading z and, at each argmax, y. Two conv-sized buffers travel
// through memory: y is written once and read once per window, z is written three times and read
// three times.
#include "../../device/forward_conv.cuh"
#include "../../device/forward_pool.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

/// z[i] = lrelu(src[i]) over all g.conv_elems elements (src == z: in place).
__global__ void lrelu_kernel(Geometry g, const float* src, float* z) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.conv_elems;
       i += int64_t(gridDim.x) * blockDim.x)
    z[i] = lrelu(src[i], g.slope);
}

/// z[n, c, :] *= multiplier[c], in place, z (batch, out_channels, conv D*H*W).
__global__ void multiply_kernel(Geometry g, const float* __restrict__ multiplier, float* __restrict__ z) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.conv_elems;
       i += int64_t(gridDim.x) * blockDim.x)
    z[i] *= multiplier[(i / g.conv_spatial) % g.out_channels];
}

size_t workspace(const Problem74& p) { return ConvBuffers::bytes(make_geometry(p)); }

void forward(const ForwardArgs& a) {
  const Geometry g = make_geometry(a.problem);
  const ConvBuffers w(g, a.workspace);
  a.mark("conv");
  launch_conv_transpose(g, a.in.x, a.in.weight, a.in.bias, w.y, a.stream);
  a.mark("chain");
  const unsigned grid = capped_grid(g.conv_elems, 256, "chain kernels");
  lrelu_kernel<<<grid, 256, 0, a.stream>>>(g, w.y, w.z);
  CUDA_CHECK_LAUNCH("lrelu_kernel (first)");
  multiply_kernel<<<grid, 256, 0, a.stream>>>(g, a.in.multiplier, w.z);
  CUDA_CHECK_LAUNCH("multiply_kernel");
  lrelu_kernel<<<grid, 256, 0, a.stream>>>(g, w.z, w.z);
  CUDA_CHECK_LAUNCH("lrelu_kernel (second)");
  a.mark("pool");
  launch_max_pool(g, w.z, w.y, a.out, a.argmax, a.y_saved, a.stream);
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung r;
    r.id = LADDER_RUNG_ID;
    r.name = LADDER_RUNG_NAME;
    r.idea = "one kernel per step: gather conv, three elementwise kernels, max pool with argmax";
    r.forward_workspace = workspace;
    r.forward = forward;
    r.deterministic = true;
    return r;
  }();
  return r;
}

}  // namespace ladder::p74
