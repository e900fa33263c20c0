// The tile of the wgmma rungs (15, 16): 4 output rows x 64 columns x 128 channels per block, two
// warpgroups of two m64 rows each, the shared-memory rings and the kernel's arguments.
#pragma once

#include <cstdint>

#include "conv_params.hpp"
#include "lib/cp_async.cuh"        // 16-byte zero-filling cp.async
#include "lib/fused_partials.cuh"  // FusedGrid
#include "lib/mma_tile.cuh"        // kThreads, kCiChunk, kMaxKernelW, tf32_bits

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

constexpr int kWgRows = 2;                        // m64 rows (64 pixels of one output row) per warpgroup
constexpr int kWarpgroups = kThreads / 128;       // 2
constexpr int kOutRows = kWgRows * kWarpgroups;   // 4 output rows per tile
constexpr int kOutCols = 64;                      // one m64 = 64 consecutive pixels of a row
constexpr int kWgCo = 128;                        // n128: the block's output channels
constexpr int kStagePitch = 72;                   // x staging row: 18 vectors of 16 bytes
constexpr int kKPitch = kOutCols + kMaxKernelW - 1;  // K-major patch columns (68)
constexpr int kRing = 3;                          // slots of each ring: weights, x staging, K-major x
constexpr int kMaxWgPatchRows = 32;
constexpr int64_t kWgStaticBytes = sizeof(float) * kWarps * kWgCo + 1024;  // warp_pool, mbarriers, spare

/// What a wgmma stage keeps in a ring slot, and how many slots: the host half (lib/wgmma_host.cuh)
/// sizes the shared memory and the laid-out weights from it. parts 1: the TF32-rounded operands
/// (15); parts 2: each operand's big and small TF32 parts side by side (3xTF32, 16).
struct WgmmaOperands {
  int parts;
  int ring;
};

/// The wgmma kernel's arguments, by value. x (N, Cin, H, W), partials (N, g.parts, Cout), fp32; wt
/// the weights as tf32_weight_kmajor writes them.
struct WgmmaArgs {
  ConvParams p;
  const float* x;
  const float* wt;
  float* partials;
  FusedGrid g;
  int tiles_w;     ///< tiles per row of tiles
  int patch_rows;  ///< kOutRows + (kernel_h - 1) * dilation_h
  int shift;       ///< the first patch column's distance from the 16-byte aligned column below it
  int vec_cols;    ///< 16-byte vectors per staging row (<= kStagePitch / 4)
  int vec16;       ///< x 16-byte aligned and in_w % 4 == 0: 16-byte copies; else 4-byte ones
};

}  // namespace
}  // namespace ladder
