// The tile of the warp-specialized rung (17): stage 15's tile (4 output rows x 64 columns x 128
// channels, two consumer warpgroups of two m64 rows each) fed by a producer warpgroup, the shape
// of the x box the copy engine writes, the ring, the register budget and the kernel's arguments.
#pragma once

#include <cstdint>

#include "conv_params.hpp"
#include "lib/fused_partials.cuh"  // FusedGrid
#include "lib/wgmma_tile.cuh"      // kWgRows, kOutRows, kOutCols, kWgCo, kCiChunk, kMaxKernelW, kMaxWgPatchRows

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

// Roles: warpgroup 0 produces (one thread of its warp 0 issues every copy), warpgroups 1 and 2
// consume (stage 15's two warpgroups: output rows 0-1 and 2-3 of the tile).
constexpr int kWsConsumerGroups = kOutRows / kWgRows;              // 2
constexpr int kWsThreads = 128 * (1 + kWsConsumerGroups);          // 384
constexpr int kWsConsumerThreads = 128 * kWsConsumerGroups;        // 256
constexpr int kWsConsumerWarps = kWsConsumerThreads / 32;          // 8: arrivals on an empty barrier
constexpr int kWsRing = 4;                                         // slots of (x box, weights) pairs

// Registers. __launch_bounds__(384, 1) caps every thread at 65536 / 384 = 170, so 168 (a multiple
// of 8) at entry: the block holds 384 x 168 = 64,512. The producer warpgroup gives back
// 128 x (168 - 40) = 16,384, which the consumers take: 256 x (232 - 168) = 16,384.
constexpr int kWsEntryRegs = 65536 / kWsThreads / 8 * 8;  // 168
constexpr int kWsProducerRegs = 40;
constexpr int kWsConsumerRegs = 232;
static_assert(128 * kWsProducerRegs + kWsConsumerThreads * kWsConsumerRegs <= kWsThreads * kWsEntryRegs,
              "the consumers take no more registers than the producer gives back");
static_assert(kWsProducerRegs <= kWsEntryRegs && kWsConsumerRegs >= kWsEntryRegs && kWsConsumerRegs <= 256,
              "setmaxnreg: dec below the entry count, inc above it, at most 256");

// Static shared memory: warp_pool (8 consumer warps x 128 floats), two rings of mbarriers, spare.
constexpr int64_t kWsStaticBytes = sizeof(float) * kWsConsumerWarps * kWgCo + 1024;

/// The x box of one step, as the copy engine writes it: [8 channels][rows][cols] fp32, dense
/// (a channel plane is rows x cols floats). rows >= the patch's rows (kOutRows + (kH - 1) * dh),
/// cols >= shift + 64 + kW - 1 and a multiple of 4 (the box's rows are 16-byte multiples).
/// The box starts `shift` columns left of the patch (box_shift): the copy engine faults with an
/// illegal instruction when a box's first column is not 16 bytes into a row of x (measured on an
/// H100: every failing problem had its first column at 2 mod 4, every passing one at 0 mod 4).
struct XBox {
  int rows = 0;
  int cols = 0;
};

/// Columns between the box's first column and the patch's: the patch of tile column tw starts at
/// input column 64 tw + padding_w - (kW - 1), so the box starts at the multiple of 4 at or left of
/// it, the same shift for every tile.
constexpr int box_shift(int padding_w, int kernel_w) { return ((padding_w - (kernel_w - 1)) % 4 + 4) % 4; }

/// The smallest box (rows x cols) that holds the shifted patch and whose channel plane, rows x cols
/// floats, is 8 mod 16: then the A fragment loads are free of bank conflicts. A load instruction
/// reads, in lane 4g + t, the word t * plane + g + (the same offset for all lanes) (pixel g,
/// channel t; or pixel g + 8, or channel t + 4: the same pattern shifted). Its bank is that mod 32.
/// With plane = 8 mod 16, t * plane mod 32 is 0, 8, 16, 24 in some order, so the 32 lanes hit 32
/// banks; with plane = 0 mod 16, two channels share banks (2 or 4-way). Every patch gets such a
/// box: odd rows with cols = 8 mod 16, rows = 2 mod 4 with cols = 4 mod 8, rows = 0 mod 4 with one
/// extra row (odd). At the KernelBench size (rows 6, kW 3): 6 x 68 = 408 = 24 mod 32.
constexpr XBox x_box(int patch_rows, int kernel_w, int shift) {
  const int need = (shift + kOutCols + kernel_w - 1 + 3) / 4 * 4;
  XBox best;
  for (int r = patch_rows; r <= patch_rows + 1; ++r)
    for (int c = need; c < need + 16; c += 4)
      if ((r * c) % 16 == 8 && (best.rows == 0 || r * c < best.rows * best.cols)) best = XBox{r, c};
  return best;
}
/// Whether every patch the plan accepts (4 .. kMaxWgPatchRows rows, kernel_w 1 .. kMaxKernelW, any
/// shift) gets a box that holds it, is conflict-free, fits the copy engine's box limit of 256 and
/// adds at most one row.
constexpr bool every_x_box_ok() {
  for (int rows = kOutRows; rows <= kMaxWgPatchRows; ++rows)
    for (int kw = 1; kw <= kMaxKernelW; ++kw)
      for (int shift = 0; shift < 4; ++shift) {
        const XBox b = x_box(rows, kw, shift);
        if (b.rows < rows || b.rows > rows + 1 || b.cols < shift + kOutCols + kw - 1 || b.cols % 4 != 0 ||
            b.cols > 256 || (b.rows * b.cols) % 16 != 8)
          return false;
      }
  return true;
}
static_assert(every_x_box_ok(), "x_box: a conflict-free box for every patch the plan accepts");
static_assert(box_shift(0, 3) == 2 && box_shift(2, 3) == 0 && box_shift(1, 5) == 1, "shift = start mod 4");
static_assert(x_box(6, 3, box_shift(0, 3)).rows == 6 && x_box(6, 3, box_shift(0, 3)).cols == 68,
              "the KernelBench box: 6 rows x 68 columns, 2 of them left of the patch");
static_assert(x_box(4, 1, 0).rows == 5 && (5 * x_box(4, 1, 0).cols) % 16 == 8, "rows 0 mod 4 take one row more");

/// The warp-specialized kernel's arguments, by value (the tensor map of x is a separate
/// __grid_constant__ parameter). wt: the weights as tf32_weight_kmajor writes them; partials
/// (N, g.parts, Cout) fp32.
struct WsArgs {
  ConvParams p;
  const float* wt;
  float* partials;
  FusedGrid g;
  int tiles_w;   ///< tiles per row of tiles
  int box_rows;  ///< XBox::rows
  int box_cols;  ///< XBox::cols
  int box_shift;  ///< columns of the box left of the patch (box_shift)
};

}  // namespace
}  // namespace ladder
