// Rung 09: tiled gradients for the KernelBench geometry family. What changed from rung 08: the
// two convolution gradients use the geometry instead of searching it. With ConvTranspose3d
// kernel 3, stride 2, padding 1 and MaxPool3d(2), input i reaches, per axis, conv positions
// 2i-1 (tap 0), 2i (tap 1) and 2i+1 (tap 2); they lie in pooling windows i-1 (offset 1), i
// (offset 0) and i (offset 1). So every input position sees exactly the 8 windows {i-1, i}^3,
// and a window whose argmax offset is j feeds at most one tap: along an axis where the window is
// i-1 only tap 0, and only if j = 1; where it is i, tap 1 + j. Windows outside the pool output
// (i-1 < 0, or i >= out size when output_padding is 0) feed nothing.
//  - grad_x: one thread per (n, input position) and 16 in_channels in registers; per output
//    channel it reads its 8 windows' (argmax, g_y) and adds weight[ci, co, tap] * g_y for each
//    window that feeds a tap, the weights staged in shared memory.
//  - grad_weight: per tile of 16 positions, the block stages x and the routed gradient by tap,
//    G[co][p][k] = g_y of the window tap k reads at position p if its argmax is the tap's
//    offset, else 0, in shared memory; each thread owns one (ci, co) pair with 27 register
//    accumulators, acc[k] += x[ci][p] * G[co][p][k]. Each block covers a chunk of positions and
//    writes its partial grad_weight; a second kernel sums the chunks in order: deterministic.
//  - grad_multiplier, grad_bias and g_y: rung 08's two-level reduction.
// The two gradient kernels live in device/backward_tiled.cuh, unchanged: rung 11 takes them where
// it has no TF32 mma (below sm_80).
#include <string>

#include "../../device/backward.cuh"
#include "../../device/backward_tiled.cuh"  // the two gradient kernels (rung 11 takes them below sm_80)
#include "../../device/backward_two_level.cuh"
#include "../../device/geometry.hpp"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

/// "" for the KernelBench geometry family, else the sentence naming the parameter outside it.
std::string unsupported(const Problem74& p) { return kernelbench_family_mismatch(p, LADDER_RUNG_ID); }

/// g_y, the per-channel partials, then the grad_weight partials.
size_t workspace(const Problem74& p) {
  const Geometry g = make_geometry(p);
  return g_y_bytes(g) + channel_partials_bytes(g) + tiled::weight_partials_bytes(g);
}

void run(const BackwardArgs& a) {
  const std::string why = unsupported(a.problem);
  if (!why.empty()) throw InvalidProblem(why);
  const Geometry g = make_geometry(a.problem);
  char* ws = static_cast<char*>(a.workspace);
  float* g_y = reinterpret_cast<float*>(ws);
  float2* channel_partials = reinterpret_cast<float2*>(ws + g_y_bytes(g));
  float* weight_partials = reinterpret_cast<float*>(ws + g_y_bytes(g) + channel_partials_bytes(g));

  a.mark("reduce");
  launch_two_level_reduction(g, a, g_y, channel_partials);

  a.mark("weight");
  tiled::launch_tiled_grad_weight(g, a, g_y, weight_partials);
  a.mark("input");
  tiled::launch_tiled_grad_x(g, a, g_y);
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung x;
    x.id = LADDER_RUNG_ID;
    x.name = LADDER_RUNG_NAME;
    x.idea = "KernelBench geometry: 8-window gather for grad_x, register-tiled grad_weight, fixed-order sums";
    x.backward_workspace = workspace;
    x.backward = run;
    x.unsupported = unsupported;
    x.deterministic = true;
    return x;
  }();
  return r;
}

}  // namespace ladder::p74
