// The tile of the multistage mma rung (14): stage 10's 16x16 output pixels per block, a warp
// tile the plan picks from the channel counts, and the input patch kept in x's own layout
// (channel planes of rows, 16-byte aligned, as wide as the tile needs) so that 16-byte cp.async copies fill it.
#pragma once

#include <cstdint>

#include "conv_params.hpp"
#include "lib/fused_partials.cuh"  // FusedGrid
#include "lib/mma_tile.cuh"        // kThreads, kTileRows/Cols, kCiChunk, mma_tf32, tf32_bits, channel_slot

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// A block's warp layout: kWarpsM x kWarpsN warps over 16 output rows by kCoTile channels.
/// Warp (wm, wn) owns tile rows kMTiles*wm .. +kMTiles-1 (one m16 tile per output row) and
/// channels kNTiles*8*wn .. +kNTiles*8-1 (n8 tiles).
template <int WarpsM, int NTiles>
struct TileShape {
  static constexpr int kWarpsM = WarpsM;
  static constexpr int kWarpsN = kWarps / WarpsM;
  static constexpr int kMTiles = kTileRows / WarpsM;
  static constexpr int kNTiles = NTiles;
  static constexpr int kCoTile = kWarpsN * NTiles * 8;
  static_assert(kWarpsM * kWarpsN == kWarps && kMTiles * kWarpsM == kTileRows, "warps cover the tile");
};
/// Warp tile 64 pixels x 64 channels, block 128 channels: 0.5 shared loads per mma.
using WideTile = TileShape<4, 8>;
/// Warp tile 32 x 32, block 32 channels: for out_per_group <= 32, where the wide tile would
/// compute mostly zero channels (KernelBench's first sizes have 16).
using NarrowTile = TileShape<8, 4>;

constexpr int kMaxStages = 4;   // cp.async stages in flight (CUTLASS's sm80 GEMMs use 3 to 5)
constexpr int kMaxXPitch = 24;  // patch columns per row: 16 + kernel_w - 1 + up to 3 of alignment
constexpr int kCopyRowsPerPass = 32 / 8;  // a warp copies 4 rows x 8 vector columns at once
constexpr int kMaxPatchRows = 64;

/// The multistage kernel's arguments, by value. x (N, Cin, H, W), partials (N, g.parts, Cout),
/// fp32; wt the weights as the stage's layout kernel writes them.
struct PipelineArgs {
  ConvParams p;
  const float* x;
  const float* wt;
  float* partials;
  FusedGrid g;
  int tiles_w;      ///< tiles per row of tiles
  int patch_rows;   ///< kTileRows + (kernel_h - 1) * dilation_h
  int pitch;        ///< floats per patch row: 4 * vec_cols (<= kMaxXPitch)
  int plane;        ///< floats per channel plane of the patch: patch_rows * pitch, padded to 8 mod 32
  int shift;        ///< first patch column's distance from the 16-byte aligned column below it (0..3)
  int vec_cols;     ///< 16-byte vectors per patch row that the tile's columns need (<= kMaxXPitch / 4)
  int stages;       ///< pipeline stages, 2 .. kMaxStages
  int vec16;        ///< x 16-byte aligned and in_w % 4 == 0: 16-byte copies; else 4-byte ones
};

}  // namespace
}  // namespace ladder
