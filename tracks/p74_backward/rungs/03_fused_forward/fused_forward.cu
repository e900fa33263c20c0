// Rung 03: the whole forward in one kernel. What changed from rung 02: no conv-sized buffer. One
// thread per pooled element (n, c, q) walks its window, computes y at each in-range position by
// the same gather (device/forward_conv.cuh, so y is bitwise rung 02's), applies the chain, keeps
// the running max with its argmax and y there, and writes only out, argmax and y_saved. Memory
// traffic drops to x, the weights and the pool-sized results; when pooling windows overlap
// (stride < kernel_size) the shared positions are computed once per window, a trade this
// problem's default pool (kernel_size = stride = 2) never pays.
#include "../../device/forward_fused.cuh"  // fused_forward_kernel: this rung's kernel, shared with rung 10
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

size_t workspace(const Problem74&) { return 0; }

void forward(const ForwardArgs& a) {
  const Geometry g = make_geometry(a.problem);
  a.mark("fused");
  launch_fused_forward(g, a.in.x, a.in.weight, a.in.bias, a.in.multiplier, a.out, a.argmax, a.y_saved, a.stream);
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
