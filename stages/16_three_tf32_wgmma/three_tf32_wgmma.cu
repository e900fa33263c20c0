// Stage 16: 3xTF32 on wgmma, held to the FP32 bound on Hopper's fastest tensor-core path. Stage 15's
// kernel, with each operand split instead of rounded, as stage 11 did to stage 10:
//  - conv+pool: every x and weight value v becomes big = tf32(v) plus small = tf32(v - big), the
//               bits TF32 drops. Both parts sit side by side in shared memory, each in stage 15's
//               K-major layout, and each wgmma becomes three on the same accumulators:
//               small*big + big*small + big*big (small*small, about 2^-22 of the product, is
//               left out). The weights are split once per run; x is split by the transpose that
//               stage 15 uses to round it. The parts double the weights and K-major x per slot,
//               so the rings hold two slots instead of three (222 KB at the KernelBench size);
//               three times the tensor work per step leaves the copies more time to land;
//  - finish:    as in stage 15 (lib/fused_partials.cuh).
// The result is held to the FP32 bound (near FP32 accuracy, not bit for bit: the chapter measures
// its error against stage 09's FFMA kernel). sm_90a only, as
// stage 15; every other GPU or build takes the general FP32 path and says so.
// This file holds the stage's kernels; the instructions are common/toolkit/wgmma.cuh, the tile
// lib/wgmma_tile.cuh and the host half lib/wgmma_host.cuh.
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
#include "lib/wgmma_host.cuh"  // WgmmaHost: the host half
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 16 kernels: begin ---------------------------------------------------------------

constexpr int kParts = 2;       // big, small
constexpr int kSplitRing = 2;   // slots per ring: two parts of three slots do not fit in 227 KB

/// The 3xTF32 part of v: part 0 big = tf32(v), part 1 small = tf32(v - big), both rounded with
/// cvt.rna (wgmma truncates). big + small equals v to about 2^-22 relative (common/toolkit/tf32.hpp
/// emulates the split: split_tf32).
__device__ __forceinline__ float tf32_part(float v, int part) {
  // BEGIN SOLUTION
  // STUB: if (part == 0) ladder_todo("16.1", "tf32_part: big = tf32_bits(v), small = tf32_bits(v - big), as floats");
  // STUB: return v;
  const float big = __uint_as_float(tf32_bits(v));
  return part == 0 ? big : __uint_as_float(tf32_bits(v - big));
  // END SOLUTION
}

/// The weights as wgmma reads B, K-major and split into TF32 parts, written once per run:
/// wt[group][chunk][co_tile][part][tap][khalf][128 co][4] =
/// tf32_part(weight[group*Cin/g + chunk*8 + khalf*4 + e, co_tile*128 + co, tap], part), zero past
/// the group's channels. A (group, chunk, co_tile) block is one step's bulk copy: all taps of the
/// big part, then all of the small; each (tap, khalf) block of 128 x 4 floats is 16 core matrices
/// of 8 channels x 16 bytes, 128 bytes apart. weight (Cin, Cout/g, kH, kW) fp32; one thread per
/// wt element.
__global__ void tf32_weight_kmajor(ConvParams p, const float* weight, float* wt, int chunks, int co_tiles,
                                   int64_t total) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int taps = p.kernel_h * p.kernel_w;
  const int el = int(e % 4), co = int(e / 4 % kWgCo), khalf = int(e / (4 * kWgCo) % 2);
  int64_t rest = e / (8 * kWgCo);
  const int tap = int(rest % taps);
  rest /= taps;
  const int part = int(rest % kParts);
  rest /= kParts;
  const int co_tile = int(rest % co_tiles);
  rest /= co_tiles;
  const int chunk = int(rest % chunks), group = int(rest / chunks);
  const int ci = chunk * kCiChunk + khalf * 4 + el, co_g = co_tile * kWgCo + co;
  float v = 0.0f;
  if (ci < p.in_per_group && co_g < p.out_per_group)
    v = weight[(int64_t(group * p.in_per_group + ci) * p.out_per_group + co_g) * taps + tap];
  wt[e] = tf32_part(v, part);
}

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of the tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's 128 channels; a
/// tile is 4 output rows x 64 columns. The problems, tile, layouts, descriptors and schedule of
/// stage 15's kernel, with two changes:
///   - every slot holds two parts: weights (B) [part][tap][khalf][128 co][4 channels] (one bulk
///     copy), K-major x (A) [part][khalf][rows][kKPitch columns][4 channels], each part in stage
///     15's layout, the small part one part's size after the big;
///   - per tap and m64 row three wgmma into the same accumulators: A small x B big, A big x B
///     small, A big x B big, the small products first (their sums are the smallest).
/// Two slots per ring (kSplitRing), so stage 15's schedule keeps one step less in flight: at step
/// s, x s+1 is copied and its weights are on their way; the wgmma of step s overlap the transpose
/// of step s+1 and complete within the step, since step s+1 overwrites the slots of step s-1.
template <int KW>
__global__ void __launch_bounds__(kThreads, 1) conv_pool_wgmma(WgmmaArgs a) {
  extern __shared__ __align__(128) float smem[];
  __shared__ float warp_pool[kWarps][kWgCo];
  __shared__ __align__(8) uint64_t wbar[kSplitRing];  // weights of the slot landed
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
  const int weight_part = taps * 2 * kWgCo * 4, weight_floats = kParts * weight_part;
  const int kbuf_part = 2 * rows * kKPitch * 4, kbuf_floats = kParts * kbuf_part;
  // Shared memory: kSplitRing weight slots, x staging slots and K-major x buffers.
  float* wring = smem;
  float* xring = wring + kSplitRing * weight_floats;
  float* kbuf = xring + kSplitRing * stage_x;
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
    float* xs = xring + (step % kSplitRing) * stage_x;
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
    const int chunk = step % chunks, slot = step % kSplitRing;
    const float* w_src = wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats;
    mbar_arrive_expect_tx(&wbar[slot], uint32_t(weight_floats * 4));
    bulk_copy(wring + slot * weight_floats, w_src, uint32_t(weight_floats * 4), &wbar[slot]);
  };
  // Staging (channel planes) -> K-major buffer [part][khalf][row][col][4 channels], split into TF32 parts.
  // Warp w: khalf w & 1, rows w >> 1, +4, ...; lane: columns lane, +32, +64.
  const int kcols = kOutCols + KW - 1;
  auto transpose = [&](int step) {
    const float* xs = xring + (step % kSplitRing) * stage_x;
    float* kd = kbuf + (step % kSplitRing) * kbuf_floats;
    const int khalf = warp & 1;
    for (int r = warp >> 1; r < rows; r += kWarps / 2) {
#pragma unroll
      for (int c0 = 0; c0 < kKPitch; c0 += 32) {
        const int c = c0 + lane;
        if (c >= kcols) continue;
        const float* src = xs + ((khalf * 4) * rows + r) * kStagePitch + a.shift + c;
        // BEGIN SOLUTION
        // STUB: if (step == 0 && r == 0 && c0 == 0)
        // STUB:   ladder_todo("16.2", "transpose: pixel (r, c)'s 4 channels split with tf32_part");
        // STUB: ladder_unused(src, kd);
        const float v[4] = {src[0], src[rows * kStagePitch], src[2 * rows * kStagePitch], src[3 * rows * kStagePitch]};
#pragma unroll
        for (int part = 0; part < kParts; ++part)
          *reinterpret_cast<float4*>(kd + part * kbuf_part + ((khalf * rows + r) * kKPitch + c) * 4) =
              make_float4(tf32_part(v[0], part), tf32_part(v[1], part), tf32_part(v[2], part), tf32_part(v[3], part));
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
  // The weights of step s arrive by bulk copy on wbar[s % kSplitRing]. x's copy groups, oldest first:
  // {x 0}, {x 1}, then one per step s, {x s+2}: step s transposes x s+1, the newest group but one.
  if (tid == 0) {
    for (int i = 0; i < kSplitRing; ++i) mbar_init(&wbar[i], 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (steps > 0) load_w(0);
  for (int s = 0; s < kSplitRing; ++s) {
    if (s < steps) load_x(s);
    cp_async_commit();
  }
  if (steps > 0) {
    cp_async_wait<1>();
    __syncthreads();
    transpose(0);
  }
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    for (int c = 0; c < chunks; ++c) {
      const int step = (tile - tile_begin) * chunks + c;
      cp_async_wait<0>();  // this thread's copies of x step+1 have landed
      __syncthreads();     // everyone's, and every transpose; wgmma step-1 done by both warpgroups
      if (step + 1 < steps) load_w(step + 1);  // slot of step-1
      if (step + 2 < steps) load_x(step + 2);  // slot of step, transposed last step
      cp_async_commit();
      const uint32_t kb_addr = smem_addr(kbuf + (step % kSplitRing) * kbuf_floats);
      const uint32_t ws_addr = smem_addr(wring + (step % kSplitRing) * weight_floats);
      const bool first = c == 0;  // a new tile: the first wgmma overwrites the accumulators
      mbar_wait(&wbar[step % kSplitRing], (step / kSplitRing) & 1);  // this step's weights have landed
      wgmma_fence();
      for (int kh = 0; kh < p.kernel_h; ++kh) {
        const int row_shift = (p.kernel_h - 1 - kh) * p.dilation_h;
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          // BEGIN SOLUTION
          // STUB: if (step == 0 && kh == 0 && kw == 0)
          // STUB:   ladder_todo("16.3", "the 3xTF32 wgmma of tap (kh, kw): four descriptors, three wgmma");
          // STUB: const uint64_t bd_big = 0, bd_small = 0;
          // B descriptors of tap (kh, kw): the big part, and the small one weight_part floats after it.
          const uint32_t b_tap = ws_addr + uint32_t((kh * KW + kw) * 2 * kWgCo * 16);
          const uint64_t bd_big = wgmma_desc(b_tap, b_lbo, 128);
          const uint64_t bd_small = wgmma_desc(b_tap + uint32_t(weight_part * 4), b_lbo, 128);
          // END SOLUTION
#pragma unroll
          for (int r = 0; r < kWgRows; ++r) {
            // BEGIN SOLUTION
            // STUB: ladder_unused(kb_addr, ws_addr, first, a_lbo, b_lbo, row_shift);
            // STUB: ladder_unused(weight_part, kbuf_part, bd_big, bd_small);
            const int prow = wg * kWgRows + r + row_shift;
            const uint32_t a_tap = kb_addr + uint32_t((prow * kKPitch + (KW - 1 - kw)) * 16);
            const uint64_t ad_big = wgmma_desc(a_tap, a_lbo, 128);
            const uint64_t ad_small = wgmma_desc(a_tap + uint32_t(kbuf_part * 4), a_lbo, 128);
            wgmma_m64n128k8(acc[r], ad_small, bd_big, !first || kh > 0 || kw > 0);
            wgmma_m64n128k8(acc[r], ad_big, bd_small, true);
            wgmma_m64n128k8(acc[r], ad_big, bd_big, true);
            // END SOLUTION
          }
        }
      }
      wgmma_commit();
      if (step + 1 < steps) transpose(step + 1);  // into the K-major buffer of step-1
      wgmma_wait<0>();  // wgmma step done: step+1 overwrites the slots of step-1, the other pair
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

// ---- stage 16 kernels: end -----------------------------------------------------------------

constexpr WgmmaOperands kOperands{kParts, kSplitRing};  // big and small parts, two-slot rings

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
  d.idea = "3xTF32 on wgmma: big and small TF32 parts of each operand, three wgmma, FP32 accuracy";
  d.precision = Precision::Fp32;  // the split recovers FP32 accuracy: held to the FP32 bound
}

}  // namespace ladder
