// The tile of the 3xTF32 warp-specialized rung (18, a draft): stage 17's tile, roles, x box and
// register budget (lib/warp_specialized_tile.cuh, included unchanged), with two TF32 parts of the
// weights per ring slot and a ring whose depth the plan picks (2 to 4 slots) instead of stage
// 17's fixed 4: two parts of the KernelBench weights do not fit four slots.
#pragma once

#include <cstdint>

#include "conv_params.hpp"
#include "lib/fused_partials.cuh"          // FusedGrid
#include "lib/warp_specialized_tile.cuh"   // kWsThreads, kWsConsumerWarps, registers, XBox, x_box, box_shift

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

constexpr int kTwsParts = 2;    // big = tf32(v), small = tf32(v - big): both in every weight slot
constexpr int kTwsMaxRing = 4;  // stage 17's depth, where it fits (the mbarrier arrays' size)
constexpr int kTwsMinRing = 2;  // below 2 the producer cannot copy while the consumers compute

static_assert(2 * kTwsMaxRing * sizeof(uint64_t) <= 1024,
              "the full and empty mbarriers fit the 1,024 spare bytes of kWsStaticBytes");

/// The kernel's arguments, by value (the tensor map of x is a separate __grid_constant__
/// parameter): stage 17's WsArgs plus the ring's depth. wt: the weights as
/// tf32_split_weight_kmajor writes them, [group][chunk][co tile][part][tap][khalf][128 co][4];
/// partials (N, g.parts, Cout) fp32.
struct TwsArgs {
  ConvParams p;
  const float* wt;
  float* partials;
  FusedGrid g;
  int tiles_w;    ///< tiles per row of tiles
  int box_rows;   ///< XBox::rows
  int box_cols;   ///< XBox::cols
  int box_shift;  ///< columns of the box left of the patch (box_shift)
  int ring;       ///< slots of the ring, kTwsMinRing .. kTwsMaxRing (the plan's)
};

}  // namespace
}  // namespace ladder
