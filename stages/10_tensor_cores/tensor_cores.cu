// Stage 10: tensor cores. Stage 09's pipeline (the same tiles, cp.async into two buffers, the
// partials and the finish), with the arithmetic moved from FP32 FMAs to tensor cores:
//  - conv+pool: the convolution of a 16x16 output tile and 128 output channels is an
//               implicit GEMM, D[m, n] = sum_k A[m, k] B[k, n] with m the tile's 256 pixels, n
//               its 128 channels and k = (tap, input channel): A[m, k] is the input under tap k
//               of pixel m, gathered from the shared input patch as in stage 09, and B[k, n] the
//               weight.
//               mma.sync.m16n8k8 with TF32 inputs and FP32 accumulation (sm_80+) does 16x8x8 of
//               it per warp and instruction. Shared memory holds each pixel's 8 channels of a
//               chunk side by side, in the order a thread's fragment wants them, so one 8-byte
//               load gives two fragment registers. Every value is rounded to TF32 (cvt.rna)
//               once, not at every use: the weights by a small kernel that also lays them out
//               in that shared-memory order (tf32_weight_layout, copied 16 bytes at a time), x
//               by the thread that copied it, before the barrier. The pool is summed
//               from the accumulator fragments when a tile is complete; D is never stored.
//               Every other ConvTranspose2d parameter set, and GPUs below sm_80, take the general
//               FP32 path (lib/conv_pool_general.cuh);
//  - finish:    partials summed in a fixed order, mean, conv bias, log-sum-exp
//               (lib/fused_partials.cuh).
// TF32 keeps 10 of FP32's 23 mantissa bits, so the stage is held to the TF32 bound
// (common/model/tolerance.hpp); stage 11 gets back to the FP32 bound on the same tensor cores.
// This file holds the stage's kernels; the tile they share with the next rung is lib/mma_tile.cuh
// and the host half (plan, workspace, launches) lib/mma_tile_host.cuh.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/fused_partials.cuh"
#include "lib/mma_tile.cuh"  // the tile, the kernel's arguments, cp.async, mma_tf32, channel_slot
#include "lib/mma_tile_host.cuh"  // MmaTileHost: the host half
#include "lib/register_stage.hpp"
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 10 kernels: begin ---------------------------------------------------------------

/// x rounded to TF32, to nearest with ties away from zero (cvt.rna; PTX ISA, "cvt"): the value
/// keeps its FP32 encoding with the low 13 mantissa bits zero. common/toolkit/tf32.hpp emulates it.
__device__ inline float round_to_tf32(float x) {
#if LADDER_HAS_TF32_MMA
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#else
  return x;
#endif
}

/// The weights as the tiled kernel's shared memory wants them, rounded to TF32, written once per
/// run into the workspace: wt[group][chunk][co_tile][tap][128 channels][8 slots] with
/// wt[...][co][channel_slot(cl)] = tf32(weight[group*Cin/g + chunk*8 + cl, co_tile*128 + co, tap]),
/// zero past the group's channels. Each (group, chunk, co tile) block of taps*1024 floats is then
/// one contiguous copy. weight (Cin, Cout/g, kH, kW) fp32; one thread per wt element.
__global__ void tf32_weight_layout(ConvParams p, const float* weight, float* wt, int chunks, int co_tiles,
                                   int64_t total) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int taps = p.kernel_h * p.kernel_w;
  const int slot = int(e % kCiChunk), co = int(e / kCiChunk % kCoTile);
  int64_t rest = e / (kCiChunk * kCoTile);
  const int tap = int(rest % taps);
  rest /= taps;
  const int co_tile = int(rest % co_tiles);
  rest /= co_tiles;
  const int chunk = int(rest % chunks), group = int(rest / chunks);
  // BEGIN SOLUTION
  // STUB: ladder_todo("10.1", "tf32_weight_layout: wt[e], the weight of (slot, co, tap) rounded to TF32");
  // STUB: ladder_unused(slot, co, tap, co_tile, chunk, group, weight, wt);
  const int cl = slot / 2 + 4 * (slot % 2);  // channel_slot's inverse
  const int ci = chunk * kCiChunk + cl, co_g = co_tile * kCoTile + co;
  float v = 0.0f;
  if (ci < p.in_per_group && co_g < p.out_per_group)
    v = weight[(int64_t(group * p.in_per_group + ci) * p.out_per_group + co_g) * taps + tap];
  wt[e] = round_to_tf32(v);
  // END SOLUTION
}

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of 16x16 tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's 128 channels.
/// Stride (1, 1), dilation_w 1, kernel_w == KW (1..5); any kernel_h, dilation_h, padding,
/// output_padding, groups, sizes; sm_80+. As in stage 09,
///   out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[ci, co, kh, kw].
///
/// Per tile the block walks the group's input channels 8 at a time (zero-filled past the last),
/// double-buffered with cp.async, in shared memory:
///   x patch  [patch_rows][20 columns][8 slots]  (channel_slot order),
///   weights  [kh*KW taps][128 channels][8 slots]  (a block of wt: TF32 already).
/// After its x copies land each thread rounds them to TF32 in place; then a barrier. The GEMM's
/// k-steps are the taps: tap (kh, kw) with the chunk's 8 channels is one m16n8k8 k. For m16
/// tile i of warp (wm, wn), output row rr = 4*wm + i of the tile, fragment rows g and g+8 are
/// pixels (rr, g) and (rr, g+8); their A values under tap (kh, kw) are the patch at row
/// rr + (kernel_h-1-kh)*dh, columns g + KW-1-kw and g + 8 + KW-1-kw, slots 2t and 2t+1. Lanes
/// (g, t) read 64 consecutive words for each of these 8-byte loads, as do the B loads: no bank
/// conflict. When a tile's last chunk is done, each thread adds its in-range fragment rows to
/// two running sums per n8 tile (its columns 2t, 2t+1) and clears the accumulators; at the end
/// shuffles add the 8 row groups g of a warp and the 4 M-warps are added in a fixed order.
/// Shared memory: 2 * 8 * (patch_rows*20 + kh*KW*128) floats (97 KB for a 3x3 kernel).
template <int KW>
__global__ void __launch_bounds__(kThreads, 1) conv_pool_tensor_cores(TiledArgs a) {
  extern __shared__ __align__(16) float smem[];
  __shared__ float warp_pool[kWarpsM][kCoTile];  // the M-warps' channel sums
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int g = lane / 4, t = lane % 4;
  const BlockCoords bc = block_coords(a.g);
  const int co_count = min(kCoTile, p.out_per_group - bc.co_base);
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int ci_group = bc.group * p.in_per_group;
  const int chunks = (p.in_per_group + kCiChunk - 1) / kCiChunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int patch_floats = a.patch_rows * kPitch * kCiChunk;
  const int stage_floats = patch_floats + taps * kCoTile * kCiChunk;
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const float* x_n = a.x + bc.n * p.in_channels * in_plane;

  // Copy roles. The x patch: thread -> channel x_cl = tid % 8 of patch pixels tid / 8, + 32, ...
  // (row-major over the patch), so a warp writes 4 whole pixels, 32 consecutive words. The
  // weights: 16-byte pieces tid, tid + 256, ... of the step's contiguous block of wt.
  constexpr int kPixelStep = kThreads / kCiChunk;
  const int x_cl = tid % kCiChunk, x_pixel0 = tid / kCiChunk, x_slot = channel_slot(x_cl);
  const int patch_pixels = a.patch_rows * kPitch;
  const int weight_floats = taps * kCoTile * kCiChunk;
  const float* wt_block =
      a.wt + int64_t(bc.group * chunks * a.g.co_tiles_per_group + bc.co_base / kCoTile) * weight_floats;

  // Visits this thread's share of the x patch of pipeline step `step` (tile step / chunks, chunk
  // step % chunks): op(shared destination, global source, source valid) for every value. The
  // copy and the TF32 rounding walk the same elements: each thread rounds what it copied.
  auto for_my_x = [&](int step, auto op) {
    const int tile = tile_begin + step / chunks, chunk = step % chunks;
    const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
    const int ih0 = th * kTileRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
    const int iw0 = tw * kTileCols + p.padding_w - (KW - 1);
    const int ci0 = ci_group + chunk * kCiChunk;
    const bool x_ok = ci0 + x_cl < ci_group + p.in_per_group;  // past the group's end: zeros
    const float* x_c = x_n + int64_t(x_ok ? ci0 + x_cl : 0) * in_plane;
    // BEGIN SOLUTION 09
    // STUB: if (step == 0) ladder_todo("10.2", "for_my_x, as in stage 09: step `step` into buffer step & 1");
    // STUB: float* xs = smem;
    float* xs = smem + (step & 1) * stage_floats;
    // END SOLUTION
    for (int px = x_pixel0; px < patch_pixels; px += kPixelStep) {
      const int row = px / kPitch, col = px - row * kPitch;
      const int ih = ih0 + row, iw = iw0 + col;
      const bool inside = x_ok && ih >= 0 && ih < p.in_h && iw >= 0 && iw < p.in_w;
      op(xs + px * kCiChunk + x_slot, inside ? x_c + (ih * p.in_w + iw) : a.x, inside);
    }
  };
  auto load_step = [&](int step) {
    for_my_x(step, [](float* s, const float* src, bool valid) { cp_async_f32(s, src, valid); });
    const float* w_src = wt_block + int64_t(step % chunks) * a.g.co_tiles_per_group * weight_floats;
    float* ws = smem + (step & 1) * stage_floats + patch_floats;
    for (int q = tid * 4; q < weight_floats; q += kThreads * 4) cp_async_16(ws + q, w_src + q);
  };
  auto round_x = [&](int step) {
    for_my_x(step, [](float* s, const float*, bool) { *s = round_to_tf32(*s); });
  };

  float acc[kMTiles][kNTiles][4] = {};
  float pool[kNTiles][2] = {};  // columns 2t, 2t+1 of each n8 tile, summed over the thread's rows

  load_step(0);
  cp_async_commit();
  for (int step = 0; step < steps; ++step) {
    // BEGIN SOLUTION 09
    // STUB: if (step == 0) ladder_todo("10.3", "the pipeline, as in stage 09: enqueue step + 1, commit, wait");
    // STUB: cp_async_commit();
    // STUB: cp_async_wait<0>();
    if (step + 1 < steps) load_step(step + 1);
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies of `step` have landed
    // END SOLUTION
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("10.4", "round this thread's x copies of `step` to TF32 (round_x)");
    // STUB: ladder_unused(round_x);
    round_x(step);       // ... and the x values are rounded to TF32 by their copier
    // END SOLUTION
    __syncthreads();
    const float* xs = smem + (step & 1) * stage_floats;
    const float* ws = xs + patch_floats;
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("10.5", "the implicit GEMM of one step: fragments, then mma_tf32");
    // STUB: ladder_unused(xs, ws, wm, wn, g, t, acc);
    for (int kh = 0; kh < p.kernel_h; ++kh) {
      // A of m16 tile i, tap (kh, kw): patch row 4*wm + i + (kernel_h-1-kh)*dh, column
      // g + KW-1-kw (fragment row g) and 8 columns on (row g+8), slots 2t, 2t+1.
      const float* a_row = xs + ((kMTiles * wm + (p.kernel_h - 1 - kh) * p.dilation_h) * kPitch + g + KW - 1) *
                                    kCiChunk + 2 * t;
      const float* b_tap = ws + ((kh * KW) * kCoTile + wn * (kCoTile / kWarpsN) + g) * kCiChunk + 2 * t;
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        uint2 b[kNTiles];
#pragma unroll
        for (int j = 0; j < kNTiles; ++j)
          b[j] = *reinterpret_cast<const uint2*>(b_tap + (kw * kCoTile + 8 * j) * kCiChunk);
#pragma unroll
        for (int i = 0; i < kMTiles; ++i) {
          const float* a_px = a_row + (i * kPitch - kw) * kCiChunk;
          const uint2 a_lo = *reinterpret_cast<const uint2*>(a_px);
          const uint2 a_hi = *reinterpret_cast<const uint2*>(a_px + 8 * kCiChunk);
#pragma unroll
          for (int j = 0; j < kNTiles; ++j) mma_tf32(acc[i][j], a_lo, a_hi, b[j]);
        }
      }
    }
    // END SOLUTION
    if (step % chunks == chunks - 1) {  // the tile is complete: pool its in-range pixels
      const int tile = tile_begin + step / chunks;
      const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
      // BEGIN SOLUTION
      // STUB: ladder_todo("10.6", "the pool from the fragments: in-range acc into pool, then clear acc");
      // STUB: ladder_unused(th, tw);
      const int ow_lo = tw * kTileCols + g, ow_hi = ow_lo + 8;
#pragma unroll
      for (int i = 0; i < kMTiles; ++i) {
        const int oh = th * kTileRows + kMTiles * wm + i;
        const bool in_lo = oh < p.out_h && ow_lo < p.out_w, in_hi = oh < p.out_h && ow_hi < p.out_w;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          pool[j][0] += (in_lo ? acc[i][j][0] : 0.0f) + (in_hi ? acc[i][j][2] : 0.0f);
          pool[j][1] += (in_lo ? acc[i][j][1] : 0.0f) + (in_hi ? acc[i][j][3] : 0.0f);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
        }
      }
      // END SOLUTION
    }
    __syncthreads();  // the buffer just read is refilled by the next iteration's load_step
  }

  // Channel sums: over the 8 row groups g of the warp (lanes t, t+4, ..., t+28: xor 4, 8, 16),
  // then over the 4 M-warps that share the channels, in a fixed order through shared memory.
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int s = 4; s < 32; s *= 2) pool[nt][e] += __shfl_xor_sync(0xffffffffu, pool[nt][e], s);
  if (g == 0)
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) warp_pool[wm][wn * (kCoTile / kWarpsN) + 8 * nt + 2 * t + e] = pool[nt][e];
  __syncthreads();
  if (tid < co_count) {
    float s = 0.0f;
#pragma unroll
    for (int m = 0; m < kWarpsM; ++m) s += warp_pool[m][tid];
    *partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels, bc.group * p.out_per_group + bc.co_base + tid) = s;
  }
}

// ---- stage 10 kernels: end -----------------------------------------------------------------

/// What the host half (lib/mma_tile_host.cuh: plan, workspace, opt-in, launches) takes from
/// this stage.
struct Tf32MmaRung {
  template <int KW>
  static auto kernel() { return conv_pool_tensor_cores<KW>; }
  static auto weight_layout() { return tf32_weight_layout; }
  static constexpr const char* weight_layout_name = "tf32_weight_layout";
  static constexpr const char* arithmetic = "TF32 mma";
};
using Host = MmaTileHost<Tf32MmaRung>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // plan, workspace, opt-in, launches, device note; tensor cores, deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "tensor cores: the conv as an implicit GEMM on mma.sync TF32, pooled from the fragments";
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
