// Stage 15: Hopper's warpgroup MMA. Stage 14's implicit GEMM (the conv of a tile of output
// pixels by 128 output channels, k = (tap, 8 input channels), the pool taken from the
// accumulators) moved from mma.sync to wgmma.mma_async, sm_90a:
//  - conv+pool: a warpgroup (4 warps) issues m64n128k8 TF32 wgmma whose operands the tensor cores
//               read from shared memory through matrix descriptors; no fragment passes through
//               registers. wgmma wants both TF32 operands K-major: the weights are laid out so
//               once per run and arrive by one bulk copy (TMA) per step; x is copied in its own
//               layout and transposed by the block's threads, rounding to TF32 on the way, because
//               wgmma truncates fp32 bits (build/wgmma_peak shows it). The wgmma run
//               asynchronously: a step's transpose overlaps them, and one group stays in flight
//               into the next step;
//  - finish:    as in stage 14 (lib/fused_partials.cuh).
// wgmma exists only in sm_90a code: CMake builds this stage so when 90 is in the architecture
// list, and every other GPU (Blackwell included) or build takes the general FP32 path and says so.
// This file holds the stage's kernels; the instructions are common/toolkit/wgmma.cuh, the tile
// lib/wgmma_tile.cuh, the weight layout kernel lib/tf32_weight_kmajor.cuh (stage 17 reuses it)
// and the host half lib/wgmma_host.cuh.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/fused_partials.cuh"
#include "lib/register_stage.hpp"
#include "wgmma.cuh"           // descriptors, wgmma, mbarriers, the bulk copy, proxy fences
#include "lib/wgmma_tile.cuh"  // the tile, the rings, the kernel's arguments
#include "lib/tf32_weight_kmajor.cuh"  // the weights K-major in TF32, once per run
#include "lib/wgmma_host.cuh"  // WgmmaHost: the host half
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 15 kernels: begin ---------------------------------------------------------------

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of the tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's 128 channels; a
/// tile is 4 output rows x 64 columns. Stride (1, 1), dilation_w 1, kernel_w == KW (1..5); any
/// kernel_h, dilation_h, padding, output_padding, groups, sizes; sm_90a. As in stage 14,
///   out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[ci, co, kh, kw].
///
/// The implicit GEMM with wgmma.mma_async: warpgroup wg owns output rows 2*wg, 2*wg+1 of the tile,
/// each an m64 (64 pixels) x n128 x k8 wgmma per tap and chunk of 8 input channels, its 64 x 128
/// accumulators in registers (acc[r], 64 per thread). Both operands come from shared memory
/// through descriptors, and TF32 wgmma wants both K-major:
///   weights (B) [tap][khalf][128 co][4 channels]: one bulk copy (TMA) per step by thread 0;
///   x (A)       [khalf][rows][kKPitch columns][4 channels]: 8 consecutive pixels x 4 channels
///               are one 128-byte core matrix, so an m64 tile of one row is 8 of them 128 bytes
///               apart (stride byte offset 128), and tap (kh, kw) only moves the start address.
/// x reaches that layout in two moves: 16-byte cp.async copies of the patch in x's own layout
/// (one plane per channel, as in stage 14), then a transpose by all threads that rounds to TF32
/// on the way (wgmma truncates) and a proxy fence (those are ordinary stores; wgmma reads through
/// the async proxy). Three slots per ring; step s's wgmma overlap the transpose of step s+1, and
/// one wgmma group stays in flight across the step boundary.
template <int KW>
__global__ void __launch_bounds__(kThreads, 1) conv_pool_wgmma(WgmmaArgs a) {
  extern __shared__ __align__(128) float smem[];
  __shared__ float warp_pool[kWarps][kWgCo];
  __shared__ __align__(8) uint64_t wbar[kRing];  // weights of the slot landed
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wg = warp / 4, q = warp % 4;
  const int g = lane / 4, t = lane % 4;
  const BlockCoords bc = block_coords(a.g);
  const int co_count = min(kWgCo, p.out_per_group - bc.co_base);
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int ci_group = bc.group * p.in_per_group;
  const int chunks = (p.in_per_group + kCiChunk - 1) / kCiChunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int rows = a.patch_rows;
  const int stage_x = kCiChunk * rows * kStagePitch;
  const int weight_floats = taps * 2 * kWgCo * 4;
  const int kbuf_floats = 2 * rows * kKPitch * 4;
  // Shared memory: kRing weight slots, kRing x staging slots, kRing K-major x buffers.
  float* wring = smem;
  float* xring = wring + kRing * weight_floats;
  float* kbuf = xring + kRing * stage_x;
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const float* x_n = a.x + bc.n * p.in_channels * in_plane;
  const float* wt_block =
      a.wt + int64_t(bc.group * chunks * a.g.co_tiles_per_group + bc.co_base / kWgCo) * weight_floats;

  auto tile_origin = [&](int step, int& ih0, int& iw_al, int& chunk) {
    const int tile = tile_begin + step / chunks;
    chunk = step - (step / chunks) * chunks;
    const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
    ih0 = th * kOutRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
    iw_al = tw * kOutCols + p.padding_w - (KW - 1) - a.shift;
  };
  // Staging copy: warp w copies channel w: rows lane/16, +2, ...; vector columns lane%16 and +16.
  auto load_x = [&](int step) {
    float* xs = xring + (step % kRing) * stage_x;
    int ih0, iw_al, chunk;
    tile_origin(step, ih0, iw_al, chunk);
    const int ci = kCiChunk * chunk + warp;  // this warp's channel
    const bool ch_ok = ci < p.in_per_group;
    const float* x_c = x_n + int64_t(ch_ok ? ci_group + ci : 0) * in_plane;
    for (int r = lane / 16; r < rows; r += 2) {
      const int ih = ih0 + r;
      const bool row_ok = ch_ok && ih >= 0 && ih < p.in_h;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int vc = lane % 16 + 16 * j;
        if (vc >= a.vec_cols) continue;
        const int iw = iw_al + 4 * vc;
        float* dst = xs + (warp * rows + r) * kStagePitch + 4 * vc;
        if (a.vec16) {
          const bool ok = row_ok && iw >= 0 && iw < p.in_w;
          cp_async_16_or_zero(dst, ok ? x_c + int64_t(ih) * p.in_w + iw : a.x, ok);
        } else {
#pragma unroll
          for (int el = 0; el < 4; ++el) {
            const bool ok = row_ok && iw + el >= 0 && iw + el < p.in_w;
            cp_async_f32(dst + el, ok ? x_c + int64_t(ih) * p.in_w + iw + el : a.x, ok);
          }
        }
      }
    }
  };
  // The weights of a step: one bulk copy by thread 0, completion on wbar[slot].
  auto load_w = [&](int step) {
    if (tid != 0) return;
    const int chunk = step % chunks, slot = step % kRing;
    const float* w_src = wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats;
    mbar_arrive_expect_tx(&wbar[slot], uint32_t(weight_floats * 4));
    bulk_copy(wring + slot * weight_floats, w_src, uint32_t(weight_floats * 4), &wbar[slot]);
  };
  // Staging (channel planes) -> K-major buffer [khalf][row][col][4 channels], rounded to TF32.
  // Warp w: khalf w & 1, rows w >> 1, +4, ...; lane: columns lane, +32, +64.
  const int kcols = kOutCols + KW - 1;
  auto transpose = [&](int step) {
    const float* xs = xring + (step % kRing) * stage_x;
    float* kd = kbuf + (step % kRing) * kbuf_floats;
    const int khalf = warp & 1;
    for (int r = warp >> 1; r < rows; r += kWarps / 2) {
#pragma unroll
      for (int c0 = 0; c0 < kKPitch; c0 += 32) {
        const int c = c0 + lane;
        if (c >= kcols) continue;
        const float* src = xs + ((khalf * 4) * rows + r) * kStagePitch + a.shift + c;
        // BEGIN SOLUTION
        // STUB: if (step == 0 && r == 0 && c0 == 0)
        // STUB:   ladder_todo("15.1", "transpose: pixel (r, c)'s 4 channels, rounded, one float4 at kd");
        // STUB: ladder_unused(src, kd);
        float4 v;
        v.x = __uint_as_float(tf32_bits(src[0]));
        v.y = __uint_as_float(tf32_bits(src[rows * kStagePitch]));
        v.z = __uint_as_float(tf32_bits(src[2 * rows * kStagePitch]));
        v.w = __uint_as_float(tf32_bits(src[3 * rows * kStagePitch]));
        *reinterpret_cast<float4*>(kd + ((khalf * rows + r) * kKPitch + c) * 4) = v;
        // END SOLUTION
      }
    }
    fence_proxy_async();
  };

  float acc[kWgRows][64];  // read by the wgmma's "+f" operands; a tile's first wgmma ignores them (scale-d 0)
#pragma unroll
  for (int r = 0; r < kWgRows; ++r)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[r][i] = 0.0f;
  float pool[16][2] = {};

  const uint32_t a_lbo = uint32_t(rows * kKPitch * 16), b_lbo = kWgCo * 16;
  // The weights of step s arrive by bulk copy on wbar[s % kRing]. x's copy groups, oldest first:
  // {x 0}, {x 1}, {x 2}, then one per step s, {x s+3}: step s transposes x s+1, in every group
  // but the newest.
  if (tid == 0) {
    for (int i = 0; i < kRing; ++i) mbar_init(&wbar[i], 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (steps > 0) load_w(0);
  for (int s = 0; s < kRing; ++s) {
    if (s < steps) load_x(s);
    cp_async_commit();
  }
  if (steps > 0) {
    cp_async_wait<2>();
    __syncthreads();
    transpose(0);
  }
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    for (int c = 0; c < chunks; ++c) {
      const int step = (tile - tile_begin) * chunks + c;
      cp_async_wait<1>();  // this thread's copies of x step+1 have landed
      __syncthreads();     // everyone's, and every transpose; wgmma step-2 done by both warpgroups
      if (step + 1 < steps) load_w(step + 1);  // slot of step-2
      if (step + 3 < steps) load_x(step + 3);  // slot of step, transposed last step
      cp_async_commit();
      const uint32_t kb_addr = smem_addr(kbuf + (step % kRing) * kbuf_floats);
      const uint32_t ws_addr = smem_addr(wring + (step % kRing) * weight_floats);
      const bool first = c == 0;  // a new tile: the first wgmma overwrites the accumulators
      mbar_wait(&wbar[step % kRing], (step / kRing) & 1);  // this step's weights have landed
      wgmma_fence();
      for (int kh = 0; kh < p.kernel_h; ++kh) {
        const int row_shift = (p.kernel_h - 1 - kh) * p.dilation_h;
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          // BEGIN SOLUTION
          // STUB: if (step == 0 && kh == 0 && kw == 0)
          // STUB:   ladder_todo("15.2", "the step's wgmma: descriptors, wgmma_m64n128k8 per row");
          // STUB: const uint64_t bd = 0;
          const uint64_t bd = wgmma_desc(ws_addr + uint32_t((kh * KW + kw) * 2 * kWgCo * 16), b_lbo, 128);
          // END SOLUTION
#pragma unroll
          for (int r = 0; r < kWgRows; ++r) {
            // BEGIN SOLUTION
            // STUB: ladder_unused(kb_addr, ws_addr, first, a_lbo, b_lbo, bd, row_shift);
            const int prow = wg * kWgRows + r + row_shift;
            const uint64_t ad = wgmma_desc(kb_addr + uint32_t((prow * kKPitch + (KW - 1 - kw)) * 16), a_lbo, 128);
            wgmma_m64n128k8(acc[r], ad, bd, !first || kh > 0 || kw > 0);
            // END SOLUTION
          }
        }
      }
      wgmma_commit();
      if (step + 1 < steps) transpose(step + 1);  // into the K-major buffer of step-2
      wgmma_wait<1>();  // wgmma step-1 done; step's may still run
    }
    {  // the tile is complete: pool its in-range pixels from the accumulators
      wgmma_wait<0>();
      const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
      const int ow_lo = tw * kOutCols + 16 * q + g, ow_hi = ow_lo + 8;
#pragma unroll
      for (int r = 0; r < kWgRows; ++r) {
        const int oh = th * kOutRows + wg * kWgRows + r;
        const bool in_lo = oh < p.out_h && ow_lo < p.out_w, in_hi = oh < p.out_h && ow_hi < p.out_w;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          pool[j][0] += (in_lo ? acc[r][4 * j] : 0.0f) + (in_hi ? acc[r][4 * j + 2] : 0.0f);
          pool[j][1] += (in_lo ? acc[r][4 * j + 1] : 0.0f) + (in_hi ? acc[r][4 * j + 3] : 0.0f);
        }
      }
    }
  }
  cp_async_wait<0>();
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int s = 4; s < 32; s *= 2) pool[j][e] += __shfl_xor_sync(0xffffffffu, pool[j][e], s);
  if (g == 0)
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) warp_pool[warp][8 * j + 2 * t + e] = pool[j][e];
  __syncthreads();
  if (tid < co_count) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_pool[w][tid];
    *partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels, bc.group * p.out_per_group + bc.co_base + tid) = s;
  }
}

// ---- stage 15 kernels: end -----------------------------------------------------------------

constexpr WgmmaOperands kOperands{1, kRing};  // TF32-rounded operands, three-slot rings

/// What the host half (lib/wgmma_host.cuh: probe, plan, workspace, opt-in, launches) takes from
/// this stage.
struct WgmmaRung {
  static constexpr WgmmaOperands operands = kOperands;
  template <int KW>
  static auto kernel() { return conv_pool_wgmma<KW>; }
  static auto weight_layout() { return tf32_weight_kmajor; }
};
using Host = WgmmaHost<WgmmaRung>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // probe, plan, workspace, opt-in, launches; tensor cores, deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "Hopper's wgmma: operands from shared memory through descriptors, weights by bulk copy";
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
