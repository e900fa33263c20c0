// The mma tile of the tensor-core stages (10, 11): the block's 16x16 output pixels by 128 output
// channels, its warps' share of the m16n8k8 tiles, the kernel's arguments, and the device helpers
// both stages' kernels use (stage 09's cp.async copies, the TF32 mma, the shared-memory channel
// order). Each stage keeps its own kernels: what it does with these is its idea.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define LADDER_HAS_TF32_MMA 1
#else
#define LADDER_HAS_TF32_MMA 0
#endif

/// d += a * b on tensor cores, one warp: a 16x8 TF32 tile (row-major fragment, 4 registers),
/// b 8x8 TF32 (column-major fragment, 2 registers), d 16x8 FP32 (4 registers). Fragment
/// layout (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32), g = lane / 4, t = lane % 4:
///   a0 (row g, col t)   a1 (g+8, t)    a2 (g, t+4)    a3 (g+8, t+4)
///   b0 (row t, col g)   b1 (t+4, g)
///   d0 (row g, col 2t)  d1 (g, 2t+1)   d2 (g+8, 2t)   d3 (g+8, 2t+1)
__device__ inline void mma_tf32(float (&d)[4], const uint2& a_lo, const uint2& a_hi, const uint2& b) {
#if LADDER_HAS_TF32_MMA
  // a_lo = (a0, a2), a_hi = (a1, a3), b = (b0, b1): the order the shared layout delivers them
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a_lo.x), "r"(a_hi.x), "r"(a_lo.y), "r"(a_hi.y), "r"(b.x), "r"(b.y));
#else
  __trap();  // the plan never launches the tiled kernel below sm_80 (tensor_cores_here)
  (void)d, (void)a_lo, (void)a_hi, (void)b;
#endif
}

/// x rounded to TF32, to nearest with ties away from zero (cvt.rna; PTX ISA, "cvt"), as the 32-bit
/// register an mma operand takes: x's FP32 encoding with the low 13 mantissa bits zero. Below
/// sm_80, x unchanged (no tensor core runs there). common/toolkit/tf32.hpp emulates it.
__device__ inline uint32_t tf32_bits(float x) {
#if LADDER_HAS_TF32_MMA
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  return __float_as_uint(x);
#endif
}

/// Whether `kernel`'s code on this device has TF32 mma: it was compiled for compute_80 or newer
/// (the kernel's ptxVersion, so a newer GPU running PTX JIT-compiled from an older architecture
/// counts as old). Built with LADDER_NO_TF32_MMA (a test), false: the path an sm_75 build takes,
/// on any GPU. Throws CudaError.
template <typename Kernel>
bool tf32_mma_in(Kernel kernel) {
#ifdef LADDER_NO_TF32_MMA
  (void)kernel;
  return false;
#else
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return attr.ptxVersion >= 80;
#endif
}

/// What a tensor-core stage says when its kernel has no TF32 mma here (`what`: the stage's
/// arithmetic, e.g. "TF32 mma"): every problem then takes the general FP32 path.
inline std::string no_tf32_mma_note(const char* what) {
#ifdef LADDER_NO_TF32_MMA
  (void)what;
  return "built with LADDER_NO_TF32_MMA: every problem takes the general FP32 path";
#else
  return std::string(what) + " needs code for sm_80 or newer: every problem takes the general FP32 path";
#endif
}

/// Where input channel cl (0..7) of a chunk sits among a pixel's 8 shared-memory slots: channels
/// t and t+4 side by side (order 0 4 1 5 2 6 3 7), so the k pair (t, t+4) that a thread's A
/// registers a0/a2 (and B registers b0/b1) need is one 8-byte load at slot 2t.
__device__ inline int channel_slot(int cl) { return 2 * (cl % 4) + cl / 4; }


}  // namespace
}  // namespace ladder
