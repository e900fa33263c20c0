// Rung 08: a two-level reduction, deterministic. What changed from rung 07: no atomics. Each
// block writes its (grad_multiplier, grad_bias) sum to its own slot of the workspace, and a
// second kernel, one block per channel, sums that channel's slots in a fixed order (a strided
// fold, then a shared-memory tree). Every sum's order depends only on the sizes, so two runs
// give the same bits, and nothing needs zeroing first (device/backward_two_level.cuh).
#include "../../device/backward.cuh"
#include "../../device/backward_generic.cuh"
#include "../../device/backward_two_level.cuh"
#include "../../device/geometry.hpp"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

/// g_y, then the (plane, chunk) partials.
size_t workspace(const Problem74& p) {
  const Geometry g = make_geometry(p);
  return g_y_bytes(g) + channel_partials_bytes(g);
}

void run(const BackwardArgs& a) {
  const Geometry g = make_geometry(a.problem);
  char* ws = static_cast<char*>(a.workspace);
  float* g_y = reinterpret_cast<float*>(ws);
  float2* partials = reinterpret_cast<float2*>(ws + g_y_bytes(g));
  a.mark("reduce");
  launch_two_level_reduction(g, a, g_y, partials);
  generic_weight_and_input(g, a, g_y);
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung x;
    x.id = LADDER_RUNG_ID;
    x.name = LADDER_RUNG_NAME;
    x.idea = "per-block partials, then a fixed-order sum per channel: deterministic";
    x.backward_workspace = workspace;
    x.backward = run;
    x.deterministic = true;
    return x;
  }();
  return r;
}

}  // namespace ladder::p74
