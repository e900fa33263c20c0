// Rung 03: the whole forward in one kernel. What changed from rung 02: no conv-sized buffer. One
// thread per pooled element (n, c, q) walks its window, computes y at each in-range position by
// the same gather (device/forward_conv.cuh, so y is bitwise rung 02's), applies the chain, keeps
// the running max with its argmax and y there, and writes only out, argmax and y_saved. Memory
// traffic drops to x, the weights and the pool-sized results; when pooling windows overlap
// (stride < kernel_size) the shared positions are computed once per window, a trade this
// problem's default pool (kernel_size = stride = 2) never pays.
#include "../../device/forward_conv.cuh"
#include "../../device/forward_pool.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

/// One thread per pooled element e = (n, c, qd, qh, qw) (grid-stride loop): out[e] = max over the
/// window of lrelu(multiplier[c] * lrelu(y)), argmax[e] its window offset, y_saved[e] y there;
/// all three (batch, out_channels, pooled D, H, W). Neighbouring threads share (n, c), so their
/// weight reads coincide and their writes are contiguous.
__global__ void fused_forward_kernel(Geometry g, const float* __restrict__ x, const float* __restrict__ weight,
                                     const float* __restrict__ bias, const float* __restrict__ multiplier,
                                     float* __restrict__ out, int32_t* __restrict__ argmax,
                                     float* __restrict__ y_saved) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < g.out_elems;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = e / g.out_spatial;
    const int s = int(e - plane * g.out_spatial);
    const int n = int(plane / g.out_channels), c = int(plane - int64_t(n) * g.out_channels);
    const int qw = s % g.out[2], qh = (s / g.out[2]) % g.out[1], qd = s / (g.out[2] * g.out[1]);
    const float mult = multiplier[c];
    const PoolWindow win(g, qd, qh, qw);
    WindowMax m;
    float y_at = 0.f;
    win.for_each(g, [&](int off, int od, int oh, int ow) {
      const float y = conv_transpose_at(g, x, weight, bias, n, c, od, oh, ow);
      if (m.take(chain(y, mult, g.slope), off)) y_at = y;
    });
    store_window(g, win, m, y_at, e, out, argmax, y_saved);
  }
}

size_t workspace(const Problem74&) { return 0; }

void forward(const ForwardArgs& a) {
  const Geometry g = make_geometry(a.problem);
  a.mark("fused");
  fused_forward_kernel<<<capped_grid(g.out_elems, 128, "fused_forward_kernel"), 128, 0, a.stream>>>(
      g, a.in.x, a.in.weight, a.in.bias, a.in.multiplier, a.out, a.argmax, a.y_saved);
  CUDA_CHECK_LAUNCH("fused_forward_kernel");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung r;
    r.id = LADDER_RUNG_ID;
    r.name = LADDER_RUNG_NAME;
    r.idea = "one kernel: each pooled element computes its window's y, chains and keeps the max";
    r.forward_workspace = workspace;
    r.forward = forward;
    r.deterministic = true;
    return r;
  }();
  return r;
}

}  // namespace ladder::p74
