// The mma tile of the tensor-core stages (10, 11): the block's 16x16 output pixels by 128 output
// channels, its warps' share of the m16n8k8 tiles, the kernel's arguments, and the device helpers
// both stages' kernels use (stage 09's cp.async copies, the shared-memory channel order; the TF32
// mma itself is common/toolkit/mma_tf32.cuh). Each stage keeps its own kernels: what it does with
// these is its idea.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "mma_tf32.cuh"             // mma_tf32, tf32_bits, tf32_mma_in, no_tf32_mma_note
#include "lib/cp_async.cuh"       // stage 09's copies, and the 16-byte one of the weights
#include "lib/fused_partials.cuh"  // FusedGrid
#include "lib/kernel_width.cuh"    // ceil_div

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Geometry. Block: a 16x16 output tile (M = 256 pixels) by 128 output channels (N). Warp
// (wm, wn) = (warp % 4, warp / 4) owns tile rows 4*wm .. 4*wm+3 (kMTiles m16 tiles, one output
// row of 16 pixels each) and channels 64*wn .. +63 (kNTiles n8 tiles): 4 x 8 mma tiles, 128 FP32
// accumulators per thread. Per k-step 8 A loads and 8 B loads of 8 bytes feed 32 mma: shared
// memory delivers 128 bytes (32 banks x 4) a clock per SM, so a smaller warp tile would wait
// on it.
constexpr int kTileRows = 16;
constexpr int kTileCols = 16;
constexpr int kCoTile = 128;
constexpr int kWarpsM = 4;
constexpr int kWarpsN = kWarps / kWarpsM;
constexpr int kMTiles = kTileRows / kWarpsM;    // 4: one m16 tile = one output row of the tile
constexpr int kNTiles = kCoTile / kWarpsN / 8;  // 8 n8 tiles
constexpr int kCiChunk = 8;                     // input channels per step = the mma's k
constexpr int kMaxKernelW = 5;
constexpr int kPitch = kTileCols + kMaxKernelW - 1;  // patch columns per row, as in stage 09
constexpr int kBuffers = 2;
constexpr int64_t kTargetBlocks = 4096;
static_assert(kWarpsM * kMTiles == kTileRows && kTileCols == 16, "an m16 tile is one output row");
static_assert(kThreads % kCiChunk == 0, "fixed per-thread copy roles: thread -> channel tid % 8");

/// The grid of a tensor-core kernel that walks `units` pixel tiles per plane, kCiChunk input
/// channels a step, co_per_tile output channels a block (10, 11, 14, 15, 16): about
/// kTargetBlocks blocks, and at least enough parts that a block's steps (tiles x chunks) fit in
/// an int. Throws std::runtime_error naming `kernel` past CUDA's grid limit (make_fused_grid).
inline FusedGrid chunked_tile_grid(const Problem& pr, int64_t units, int64_t co_per_tile, const char* kernel) {
  const int64_t co_tiles = pr.groups * ceil_div(pr.out_per_group(), co_per_tile);
  const int64_t chunks = ceil_div(pr.in_per_group(), kCiChunk);
  const int64_t min_parts = ceil_div(units * chunks, 2147483647 - chunks);
  const int64_t parts = std::max(ceil_div(kTargetBlocks, pr.batch * co_tiles), min_parts);
  return make_fused_grid(pr, units, co_per_tile, parts, kernel);
}

/// The tiled kernel's arguments, by value. x (N, Cin, H, W), weight (Cin, Cout/g, kH, kW),
/// partials (N, g.parts, Cout), fp32. The grid (make_fused_grid): units are the plane's 16x16
/// tiles, kCoTile channels per block.
struct TiledArgs {
  ConvParams p;
  const float* x;
  const float* wt;  ///< the weights as the stage's weight layout kernel writes them
  float* partials;
  FusedGrid g;
  int tiles_w;     ///< tiles per row of tiles
  int patch_rows;  ///< kTileRows + (kernel_h - 1) * dilation_h
};

/// Where input channel cl (0..7) of a chunk sits among a pixel's 8 shared-memory slots: channels
/// t and t+4 side by side (order 0 4 1 5 2 6 3 7), so the k pair (t, t+4) that a thread's A
/// registers a0/a2 (and B registers b0/b1) need is one 8-byte load at slot 2t.
__device__ inline int channel_slot(int cl) { return 2 * (cl % 4) + cl / 4; }


}  // namespace
}  // namespace ladder
