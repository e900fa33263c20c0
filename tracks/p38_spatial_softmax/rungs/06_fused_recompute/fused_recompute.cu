// Rung 06: fusion, recomputing instead of rescaling. What changed from rung 05: the first pass only
// sums (it writes nothing), and a second pass computes the convolution again and writes the final
// value exp(z - hi) * factor once. The output makes one trip to memory instead of three (write,
// read, write); the price is a second convolution. Which wins depends on whether the
// convolution or the memory traffic is the bottleneck: the ladder measures both. The two passes
// and the factor between them are launch_gather_recompute in device/fused.cuh, where rung 08
// reuses them as its general path.
#include "../../device/fused.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p38 {
namespace {

size_t workspace(const Problem38& p) { return FusedWorkspace::bytes(make_geometry(p)); }

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  const FusedWorkspace w(g, a.workspace);
  a.mark("fused");
  launch_avg_pool3d(g, a.in.x, w.pooled, a.stream);
  launch_gather_recompute(g, w, a.in, a.out, a.stream);  // device/fused.cuh: sum, factor, recompute and write
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "sum in a first pass, recompute and write once in a second",
                      nullptr, workspace, run, shift_unsupported, true, /*conv_passes=*/2};
  return r;
}

}  // namespace ladder::p38
