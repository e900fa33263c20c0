// Rung 11: tensor-core gradients. Rung 09's backward (the KernelBench geometry family only:
// ConvTranspose3d kernel_size 3, stride 2, padding 1, dilation 1, output_padding 0 or 1, groups 1;
// MaxPool3d(2)), with its two convolution gradients moved from FP32 FMAs to mma.sync.m16n8k8 on
// TF32 operands with FP32 accumulation (sm_80+), the max-pool routing fused in as rung 09 fuses
// it: the routed gradient is built in shared memory from the argmax and the pool-sized g_y, never
// written at conv-output size to global memory.
// What changed from rung 09: its two inner products become GEMMs whose K dimension is walked
// 8 at a time (the mma's k). Per axis, input i reaches conv positions 2i-1 (tap 0, in window i-1
// at offset 1), 2i (tap 1, window i, offset 0) and 2i+1 (tap 2, window i, offset 1) (rung 09), so
// tap k = (kd, kh, kw) reads window b(k) = ((kd != 0)*2 + (kh != 0))*2 + (kw != 0) of the 8
// windows {i-1, i}^3 and needs the window offset need(k) = ((kd != 1)*2 + (kh != 1))*2 + (kw != 1).
// The routed gradient of tap k at input position i is
//   G[n, co, i, k] = g_y[n, co, window b(k) of i]  if argmax there == need(k),  else 0.
//  - grad_x[n, ci, i] = sum over (co, k) of G[n, co, i, k] * weight[ci, co, k]:
//      M = input positions (a 4 x 4 x 16 box of one sample per block), N = in_channels (16 per
//      block), K = (co, tap) = out_channels * 27, walked 8 channels at a time and, per 8 channels,
//      the 27 taps. Why (co, tap) and not (co, 8 windows): an mma's B fragment must be the same
//      for every row of the tile, and the weight a window meets depends on that window's argmax,
//      which differs row by row; with the tap in K, B = weight[ci, co, k] is fixed and the row's
//      argmax only decides whether its A entry is g_y or 0. Of the 27 K slots of a (row, co) at
//      most 8 are nonzero (one per window): the tensor cores multiply 27/8 of rung 09's products,
//      most of them by exact zeros, which add nothing.
//  - grad_weight[ci, co, k] = sum over (n, i) of x[n, ci, i] * G[n, co, i, k]: 27 GEMMs, one per
//      tap, sharing A: M = in_channels (16 per block), N = out_channels (32 per block), K =
//      positions (batch*D*H*W, split into rung 09's chunks, walked 8 at a time). Each block writes
//      the partial of its chunk; rung 09's second kernel sums the chunks in order: deterministic.
//  - grad_multiplier, grad_bias and g_y: rung 08's two-level reduction, unchanged (FP32).
// TF32 keeps 10 of FP32's 23 mantissa bits: every operand is rounded to nearest (cvt.rna) before
// it reaches an mma: g_y and x by the thread that stages them to shared memory, the weights once
// per call by tf32_weight_layout_x, which also lays them out as the B fragments want them. So the
// two convolution gradients are held to the TF32 gradient bound (tolerance.hpp, Precision::Tf32;
// grad_bias and grad_multiplier keep the FP32 one). Exact inputs (small dyadic numbers, g_y with
// at most 5 significant bits) are TF32 values already: there the rung must still be exact.
// GPUs (or code) below sm_80 (tf32_mma_in) take rung 09's FP32 kernels (device/backward_tiled.cuh):
// a rung calls no other rung.
#include <cstdint>
#include <string>

#include "../../device/backward.cuh"
#include "../../device/backward_tiled.cuh"  // rung 09's kernels: below sm_80, and its chunk sums
#include "../../device/backward_two_level.cuh"
#include "../../device/geometry.hpp"
#include "../../rung.hpp"
#include "common/toolkit/cuda_check.hpp"
#include "common/toolkit/mma_tf32.cuh"  // mma_tf32, tf32_bits, tf32_mma_in
#include "rung_id.hpp"                  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "todo.cuh"                     // ladder_todo: the handout's stubs

namespace ladder::p74 {
namespace {

constexpr int kThreads = 256;  // 8 warps, both kernels
constexpr int kWarps = kThreads / 32;
constexpr int kTaps = 27;
constexpr int kK = 8;  // the mma's k: out_channels (grad_x) or positions (grad_weight) per step

/// Where k index kl (0..7) of a step sits among a row's 8 slots: k t and t+4 side by side (order
/// 0 4 1 5 2 6 3 7), so the k pair (t, t+4) of a thread's a0/a2 (and b0/b1) registers is one
/// 8-byte load at slot 2t (rung 10's channel_slot).
__host__ __device__ constexpr int k_slot(int kl) { return 2 * (kl % 4) + kl / 4; }

/// Which of the 8 windows {i-1, i}^3 tap k reads, b = (bd*2 + bh)*2 + bw with 1 for window i.
__host__ __device__ constexpr int tap_window(int kd, int kh, int kw) {
  return ((kd != 0) * 2 + (kh != 0)) * 2 + (kw != 0);
}
/// The window offset (jd*2 + jh)*2 + jw that routes a window's gradient to tap k's position.
__host__ __device__ constexpr int tap_need(int kd, int kh, int kw) {
  return ((kd != 1) * 2 + (kh != 1)) * 2 + (kw != 1);
}

// ---- grad_x: M = input positions, N = in_channels, K = (co, tap).
constexpr int kXTD = 4, kXTH = 4, kXTW = 16;  // the block's input box; an m16 tile = one row of 16 along w
constexpr int kXMTiles = 2;                    // m16 tiles per warp: box rows 2*warp, 2*warp + 1
constexpr int kXNTiles = 2;                    // n8 tiles per warp: the block's 16 in_channels
constexpr int kXCi = kXNTiles * 8;             // 16 in_channels per block
constexpr int kWinD = kXTD + 1, kWinH = kXTH + 1, kWinW = kXTW + 1;  // windows {i-1, i} of the box: 5 x 5 x 17
constexpr int kWinPixels = kWinD * kWinH * kWinW;                    // 425
constexpr int kXWeightFloats = kTaps * kXCi * kK;                    // one (co chunk, ci tile) of wx: 3456
static_assert(kXTD * kXTH == kWarps * kXMTiles && kXTW == 16, "one m16 tile = one row of 16 inputs along w");
static_assert(kXWeightFloats % 4 == 0, "the weight block is copied 16 bytes at a time");

/// grad_x's tiling (host-computed): boxes of kXTD x kXTH x kXTW inputs, tiles of kXCi in_channels,
/// chunks of kK out_channels (K steps).
struct XGrid {
  int tiles_d, tiles_h, tiles_w, ci_tiles, co_chunks;
  int64_t blocks(const Geometry& g) const { return int64_t(g.batch) * tiles_d * tiles_h * tiles_w * ci_tiles; }
  __host__ __device__ int64_t weight_floats() const { return int64_t(co_chunks) * ci_tiles * kXWeightFloats; }
};
XGrid x_grid(const Geometry& g) {
  return {(g.in[0] + kXTD - 1) / kXTD, (g.in[1] + kXTH - 1) / kXTH, (g.in[2] + kXTW - 1) / kXTW,
          (g.in_channels + kXCi - 1) / kXCi, (g.out_channels + kK - 1) / kK};
}

/// The weights as grad_x's B fragments want them, rounded to TF32 (cvt.rna), one thread per element:
///   wx[co_chunk][ci_tile][tap 27][ci 16][slot 8] = tf32(weight[ci_tile*16 + ci, co_chunk*8 + cl, tap])
/// with slot = k_slot(cl), 0 past in_channels or out_channels: B[(co, tap), ci] = weight[ci, co, tap]
/// with the k index (co) fastest. Each (co_chunk, ci_tile) block of kXWeightFloats floats is then one
/// contiguous copy. weight (in_channels, out_channels, 3, 3, 3), fp32.
__global__ void tf32_weight_layout_x(Geometry g, XGrid xg, const float* __restrict__ weight, float* __restrict__ wx) {
  // BEGIN SOLUTION
  // STUB: ladder_todo("p74-11.1", "tf32_weight_layout_x: wx[e], weight[ci, co, tap] at its B slot, TF32");
  // STUB: ladder_unused(g, xg, weight, wx);
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= xg.weight_floats()) return;
  const int slot = int(e % kK), ci = int(e / kK % kXCi), tap = int(e / (kK * kXCi) % kTaps);
  const int64_t block = e / kXWeightFloats;
  const int ci_tile = int(block % xg.ci_tiles), chunk = int(block / xg.ci_tiles);
  const int cl = (slot >> 1) + 4 * (slot & 1);  // k_slot's inverse
  const int c_in = ci_tile * kXCi + ci, co = chunk * kK + cl;
  const float v =
      c_in < g.in_channels && co < g.out_channels ? weight[(int64_t(c_in) * g.out_channels + co) * kTaps + tap] : 0.f;
  wx[e] = __uint_as_float(tf32_bits(v));
  // END SOLUTION
}

/// 1-D grid, block b = ((n*tiles + tile)*ci_tiles + ci_tile) with tile = (td*tiles_h + th)*tiles_w
/// + tw: sample n, inputs (td*4 + 0..3, th*4 + 0..3, tw*16 + 0..15), in_channels ci_tile*16 + 0..15.
/// grad_x[n, ci, i] = sum over co (chunks of 8, ascending) and the 27 taps k (in window order) of
/// G[n, co, i, k] * weight[ci, co, k], written for the inputs and channels that exist. g_y and
/// argmax: pool-sized (batch, out_channels, pooled D, H, W); wx: tf32_weight_layout_x's; grad_x
/// (batch, in_channels, D, H, W). All fp32 but argmax (window offsets, int32).
///
/// Per chunk of 8 out_channels the block stages, g_y rounded to TF32:
///   gy_s  (5, 5, 17, 8):(680, 136, 8, 1)   g_y of windows {i-1, i} of the box; slot = k_slot(co)
///   off_s (5, 5, 17, 8):(680, 136, 8, 1)   their argmax offsets, -1 outside the pool output
///   w_s   (27, 16, 8):(128, 8, 1)          taps x in_channels x slots: a block of wx, copied as is
/// Warp w owns m16 tiles mi = 2w + i (i < 2), the box row (d, h) = (mi / 4, mi % 4) of 16 inputs
/// along w, and both n8 tiles (in_channels 0..7, 8..15). Fragments, lane = 4g + t:
///   gy_lo, gy_hi   uint2 x (2 m16 tiles)     (input g | g+8, co t and t+4): g_y of one window b
///   off_lo, off_hi int2 x (2 m16 tiles)      their argmax offsets
///   a_lo, a_hi     uint2 x (2 m16 tiles)     the A fragment of tap k: g_y where off == need(k), else 0
///   b              uint2 x (2 n8 tiles)      (co t and t+4, ci g) of tap k
///   acc            float (2, 2, 4)           d0..d3 = (input g, ci 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
/// A window's fragments are loaded once and serve its 8, 4, 4, 4, 2, 2, 2 or 1 taps (27 in all);
/// lanes read 64 consecutive words per 8-byte load, as do the B loads of w_s: no bank conflict.
__global__ void __launch_bounds__(kThreads)
    tensor_core_grad_x(Geometry g, XGrid xg, const float* __restrict__ wx, const int32_t* __restrict__ argmax,
                       const float* __restrict__ g_y, float* __restrict__ grad_x) {
  __shared__ __align__(16) float gy_s[kWinPixels * kK];  // (5, 5, 17, 8):(680, 136, 8, 1)
  __shared__ __align__(16) int off_s[kWinPixels * kK];   // (5, 5, 17, 8):(680, 136, 8, 1)
  __shared__ __align__(16) float w_s[kXWeightFloats];    // (27, 16, 8):(128, 8, 1)

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, gq = lane / 4, tq = lane % 4;
  const int ci_tile = int(blockIdx.x % unsigned(xg.ci_tiles));
  const int64_t rest = blockIdx.x / unsigned(xg.ci_tiles);
  const int tiles = xg.tiles_d * xg.tiles_h * xg.tiles_w;
  const int n = int(rest / tiles), tile = int(rest % tiles);
  const int tw = tile % xg.tiles_w, th = (tile / xg.tiles_w) % xg.tiles_h, td = tile / (xg.tiles_w * xg.tiles_h);
  const int id0 = td * kXTD, ih0 = th * kXTH, iw0 = tw * kXTW, ci0 = ci_tile * kXCi;

  float acc[kXMTiles][kXNTiles][4];  // (2 m16, 2 n8, 4)
#pragma unroll
  for (int i = 0; i < kXMTiles; ++i)
#pragma unroll
    for (int j = 0; j < kXNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // Copy roles. Windows: thread -> channel cl = tid % 8 of window pixels tid / 8, + 32, ... (a warp
  // writes 4 whole pixels, 32 consecutive words). Weights: 16-byte pieces tid, tid + 256, ...
  const int cl = tid % kK, slot = k_slot(cl);
  const float* wx_tile = wx + int64_t(ci_tile) * kXWeightFloats;

  for (int chunk = 0; chunk < xg.co_chunks; ++chunk) {
    __syncthreads();  // the previous chunk's gy_s, off_s and w_s are no longer read
    const int co = chunk * kK + cl;
    const int64_t plane = (int64_t(n) * g.out_channels + co) * g.out_spatial;
    for (int px = tid / kK; px < kWinPixels; px += kThreads / kK) {
      const int pw = px % kWinW, ph = (px / kWinW) % kWinH, pd = px / (kWinW * kWinH);
      const int qd = id0 - 1 + pd, qh = ih0 - 1 + ph, qw = iw0 - 1 + pw;  // window i-1 of the box's first input, on
      const bool inside = co < g.out_channels && qd >= 0 && qd < g.out[0] && qh >= 0 && qh < g.out[1] && qw >= 0 &&
                          qw < g.out[2];
      float gy = 0.f;
      int off = -1;  // no offset: feeds no tap
      if (inside) {
        const int64_t at = plane + (int64_t(qd) * g.out[1] + qh) * g.out[2] + qw;
        gy = __ldg(g_y + at);
        off = __ldg(argmax + at);
      }
      // BEGIN SOLUTION
      // STUB: if (chunk == 0 && px < kThreads / kK) ladder_todo("p74-11.2", "grad_x staging: g_y rounded to TF32");
      // STUB: gy_s[px * kK + slot] = gy;
      gy_s[px * kK + slot] = __uint_as_float(tf32_bits(gy));  // rounded to nearest by its copier
      // END SOLUTION
      off_s[px * kK + slot] = off;
    }
    const float4* w_src = reinterpret_cast<const float4*>(wx_tile + int64_t(chunk) * xg.ci_tiles * kXWeightFloats);
    for (int q = tid; q < kXWeightFloats / 4; q += kThreads) reinterpret_cast<float4*>(w_s)[q] = __ldg(w_src + q);
    __syncthreads();

    // The implicit GEMM of one chunk: per window, its fragments once, then every tap reading it.
    // BEGIN SOLUTION
    // STUB: if (chunk == 0) ladder_todo("p74-11.5", "grad_x's chunk: each window's fragments, then its taps' mma");
    // STUB: ladder_unused(gy_s, off_s, w_s, warp, gq, tq, acc);
#pragma unroll
    for (int b = 0; b < 8; ++b) {
      const int bd = b >> 2, bh = (b >> 1) & 1, bw = b & 1;
      uint2 gy_lo[kXMTiles], gy_hi[kXMTiles];
      int2 off_lo[kXMTiles], off_hi[kXMTiles];
#pragma unroll
      for (int mt = 0; mt < kXMTiles; ++mt) {
        const int mi = warp * kXMTiles + mt, dl = mi / kXTH, hl = mi % kXTH;
        const int pix = ((dl + bd) * kWinH + hl + bh) * kWinW + gq + bw;
        gy_lo[mt] = *reinterpret_cast<const uint2*>(gy_s + pix * kK + 2 * tq);
        gy_hi[mt] = *reinterpret_cast<const uint2*>(gy_s + (pix + 8) * kK + 2 * tq);
        off_lo[mt] = *reinterpret_cast<const int2*>(off_s + pix * kK + 2 * tq);
        off_hi[mt] = *reinterpret_cast<const int2*>(off_s + (pix + 8) * kK + 2 * tq);
      }
#pragma unroll
      for (int kd = 0; kd < 3; ++kd)
#pragma unroll
        for (int kh = 0; kh < 3; ++kh)
#pragma unroll
          for (int kw = 0; kw < 3; ++kw) {
            if (tap_window(kd, kh, kw) != b) continue;
            const int k = (kd * 3 + kh) * 3 + kw, need = tap_need(kd, kh, kw);
            uint2 bf[kXNTiles];
#pragma unroll
            for (int nt = 0; nt < kXNTiles; ++nt)
              bf[nt] = *reinterpret_cast<const uint2*>(w_s + (k * kXCi + nt * 8 + gq) * kK + 2 * tq);
#pragma unroll
            for (int mt = 0; mt < kXMTiles; ++mt) {
              const uint2 a_lo = make_uint2(off_lo[mt].x == need ? gy_lo[mt].x : 0u,
                                            off_lo[mt].y == need ? gy_lo[mt].y : 0u);
              const uint2 a_hi = make_uint2(off_hi[mt].x == need ? gy_hi[mt].x : 0u,
                                            off_hi[mt].y == need ? gy_hi[mt].y : 0u);
#pragma unroll
              for (int nt = 0; nt < kXNTiles; ++nt) mma_tf32(acc[mt][nt], a_lo, a_hi, bf[nt]);
            }
          }
    }
    // END SOLUTION
  }

#pragma unroll
  for (int i = 0; i < kXMTiles; ++i) {
    const int mi = warp * kXMTiles + i, id = id0 + mi / kXTH, ih = ih0 + mi % kXTH;
#pragma unroll
    for (int j = 0; j < kXNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int iw = iw0 + gq + 8 * (e >> 1), ci = ci0 + j * 8 + 2 * tq + (e & 1);
        if (id >= g.in[0] || ih >= g.in[1] || iw >= g.in[2] || ci >= g.in_channels) continue;
        grad_x[(int64_t(n) * g.in_channels + ci) * g.in_spatial + (int64_t(id) * g.in[1] + ih) * g.in[2] + iw] =
            acc[i][j][e];
      }
  }
}

// ---- grad_weight: per tap, M = in_channels, N = out_channels, K = positions.
constexpr int kWCi = 16;                           // in_channels per block: one m16 tile
constexpr int kWCo = 32;                           // out_channels per block: 4 n8 tiles
constexpr int kUnits = kTaps * 2;                  // (tap, half of the block's out_channels): 54
constexpr int kUnitsPerWarp = (kUnits + kWarps - 1) / kWarps;  // 7 (warps 6 and 7: 6)
constexpr int kGFloats = kTaps * kWCo * kK;       // one stage of G: 6912
static_assert(kK * kWCo == kThreads, "G staging: one (position, co) pair per thread");
static_assert(kK * kWCi <= kThreads, "x staging: one value per thread");

/// grad_weight's tiling: rung 09's chunks of positions (so its chunk sums apply unchanged) and
/// tiles of kWCi in_channels x kWCo out_channels.
struct WGrid {
  tiled::WeightChunks wc;
  int ci_tiles, co_tiles;
  int64_t blocks() const { return int64_t(wc.chunks) * ci_tiles * co_tiles; }
};
WGrid w_grid(const Geometry& g) {
  return {tiled::weight_chunks(g), (g.in_channels + kWCi - 1) / kWCi, (g.out_channels + kWCo - 1) / kWCo};
}

/// Block b = (chunk*ci_tiles + ci_tile)*co_tiles + co_tile: in_channels ci_tile*16 + 0..15,
/// out_channels co_tile*32 + 0..31, the positions [chunk*chunk_len, + chunk_len) of the flat
/// (n, input position) list. Per step of 8 positions it stages, rounded to TF32,
///   x_s (16, 8):(8, 1)               x[ci][slot(p)]
///   g_s (27, 32, 8):(256, 8, 1)      G[tap][co][slot(p)], built from the 8 windows around p
/// and every warp adds x_s * g_s for its units u = warp + 8j (j < 7, u < 54): tap u / 2, out_channels
/// 16*(u % 2) + 0..15 (two n8 tiles). Fragments, lane = 4g + t:
///   a_lo, a_hi  uint2                  (ci g | g+8, positions t and t+4), the same for every unit
///   b           uint2                  (positions t and t+4, co g) of the unit's tap and n8 tile
///   acc         float (7, 2, 4)        d0..d3 = (ci g, co 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
/// Writes partials[chunk][ci][co][tap] (one grad_weight-sized slice per chunk) for the channels
/// that exist. Positions past the chunk are staged as zeros in both operands.
__global__ void __launch_bounds__(kThreads)
    tensor_core_grad_weight_partials(Geometry g, WGrid wg, const float* __restrict__ x,
                                     const int32_t* __restrict__ argmax, const float* __restrict__ g_y,
                                     float* __restrict__ partials) {
  __shared__ __align__(16) float x_s[kWCi * kK];  // (16, 8):(8, 1)
  __shared__ __align__(16) float g_s[kGFloats];   // (27, 32, 8):(256, 8, 1)

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, gq = lane / 4, tq = lane % 4;
  const int co_tile = int(blockIdx.x % unsigned(wg.co_tiles));
  const int64_t rest = blockIdx.x / unsigned(wg.co_tiles);
  const int ci0 = int(rest % wg.ci_tiles) * kWCi, co0 = co_tile * kWCo, chunk = int(rest / wg.ci_tiles);
  const int64_t begin = int64_t(chunk) * wg.wc.chunk_len;
  const int64_t end = begin + wg.wc.chunk_len < wg.wc.positions ? begin + wg.wc.chunk_len : wg.wc.positions;
  // Staging roles: position p = tid % 8 (slot k_slot(p)); G for out_channel tid / 8, x for in_channel tid / 8.
  const int stage_p = tid % kK, stage_row = tid / kK, stage_slot = k_slot(stage_p);

  float acc[kUnitsPerWarp][2][4];  // (7 units, 2 n8, 4)
#pragma unroll
  for (int j = 0; j < kUnitsPerWarp; ++j)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][nt][e] = 0.f;

  for (int64_t p0 = begin; p0 < end; p0 += kK) {
    const int64_t pos = p0 + stage_p;
    const bool valid = pos < end;
    const int n = valid ? int(pos / g.in_spatial) : 0;
    const int s = valid ? int(pos - int64_t(n) * g.in_spatial) : 0;
    __syncthreads();  // every warp is done with the previous step's x_s and g_s
    {  // G for (stage_p, co0 + stage_row): which tap each of the 8 windows feeds (rung 09's rule)
      const int co = co0 + stage_row;
      int win[8];
      tiled::windows_around(g, s, valid && co < g.out_channels, win);
      const int64_t plane = (int64_t(n) * g.out_channels + co) * g.out_spatial;
      int off[8];
      float gy[8];
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        off[b] = win[b] >= 0 ? __ldg(argmax + plane + win[b]) : -1;
        // BEGIN SOLUTION
        // STUB: if (p0 == begin && b == 0) ladder_todo("p74-11.3", "grad_weight staging: g_y rounded to TF32");
        // STUB: gy[b] = win[b] >= 0 ? __ldg(g_y + plane + win[b]) : 0.f;
        gy[b] = __uint_as_float(tf32_bits(win[b] >= 0 ? __ldg(g_y + plane + win[b]) : 0.f));  // to nearest
        // END SOLUTION
      }
      float* col = g_s + stage_row * kK + stage_slot;
#pragma unroll
      for (int k = 0; k < kTaps; ++k) {
        const int kd = k / 9, kh = (k / 3) % 3, kw = k % 3;
        const int b = tap_window(kd, kh, kw);
        col[k * kWCo * kK] = off[b] == tap_need(kd, kh, kw) ? gy[b] : 0.f;
      }
    }
    if (tid < kWCi * kK) {  // x for (stage_p, ci0 + stage_row): consecutive threads read consecutive positions
      const int ci = ci0 + stage_row;
      const float v =
          valid && ci < g.in_channels ? __ldg(x + (int64_t(n) * g.in_channels + ci) * g.in_spatial + s) : 0.f;
      // BEGIN SOLUTION
      // STUB: if (p0 == begin) ladder_todo("p74-11.4", "grad_weight staging: x rounded to TF32");
      // STUB: x_s[stage_row * kK + stage_slot] = v;
      x_s[stage_row * kK + stage_slot] = __uint_as_float(tf32_bits(v));  // rounded to nearest by its copier
      // END SOLUTION
    }
    __syncthreads();

    // One k step of 27 GEMMs: the A fragment once, then the warp's units.
    // BEGIN SOLUTION
    // STUB: if (p0 == begin) ladder_todo("p74-11.6", "grad_weight's step: the A fragment, then each unit's mma");
    // STUB: ladder_unused(x_s, g_s, acc);
    const uint2 a_lo = *reinterpret_cast<const uint2*>(x_s + gq * kK + 2 * tq);
    const uint2 a_hi = *reinterpret_cast<const uint2*>(x_s + (gq + 8) * kK + 2 * tq);
#pragma unroll
    for (int j = 0; j < kUnitsPerWarp; ++j) {
      const int u = warp + kWarps * j;
      if (u >= kUnits) continue;  // warp-uniform: warps 6 and 7 have 6 units
      const int k = u / 2, half = u % 2;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const uint2 bf =
            *reinterpret_cast<const uint2*>(g_s + (k * kWCo + half * 16 + nt * 8 + gq) * kK + 2 * tq);
        mma_tf32(acc[j][nt], a_lo, a_hi, bf);
      }
    }
    // END SOLUTION
  }

  float* dst = partials + int64_t(chunk) * g.weight_elems;
#pragma unroll
  for (int uj = 0; uj < kUnitsPerWarp; ++uj) {  // the warp's units, as in the loop above
    const int unit = warp + kWarps * uj;
    if (unit >= kUnits) continue;
    const int tap = unit / 2, co_half = unit % 2;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ci = ci0 + gq + 8 * (e >> 1), co = co0 + co_half * 16 + nt * 8 + 2 * tq + (e & 1);
        if (ci < g.in_channels && co < g.out_channels)
          dst[(int64_t(ci) * g.out_channels + co) * kTaps + tap] = acc[uj][nt][e];
      }
  }
}

/// "" for the KernelBench geometry family, else the sentence naming the parameter outside it.
std::string unsupported(const Problem74& p) { return kernelbench_family_mismatch(p, LADDER_RUNG_ID); }

size_t wx_bytes(const Geometry& g) { return backward_aligned(size_t(x_grid(g).weight_floats()) * sizeof(float)); }

/// g_y, the per-channel partials, the grad_weight partials (rung 09's layout), then wx.
size_t workspace(const Problem74& p) {
  const Geometry g = make_geometry(p);
  return g_y_bytes(g) + channel_partials_bytes(g) + tiled::weight_partials_bytes(g) + wx_bytes(g);
}

void run(const BackwardArgs& a) {
  const std::string why = unsupported(a.problem);
  if (!why.empty()) throw InvalidProblem(why);
  const Geometry g = make_geometry(a.problem);
  char* ws = static_cast<char*>(a.workspace);
  float* g_y = reinterpret_cast<float*>(ws);
  ws += g_y_bytes(g);
  float2* channel_partials = reinterpret_cast<float2*>(ws);
  ws += channel_partials_bytes(g);
  float* weight_partials = reinterpret_cast<float*>(ws);
  ws += tiled::weight_partials_bytes(g);
  float* wx = reinterpret_cast<float*>(ws);

  a.mark("reduce");
  launch_two_level_reduction(g, a, g_y, channel_partials);

  if (!tf32_mma_in(tensor_core_grad_x)) {  // no TF32 mma in this GPU's code: rung 09's FP32 kernels
    a.mark("weight");
    tiled::launch_tiled_grad_weight(g, a, g_y, weight_partials);
    a.mark("input");
    tiled::launch_tiled_grad_x(g, a, g_y);
    return;
  }

  a.mark("weight");
  const WGrid wg = w_grid(g);
  tensor_core_grad_weight_partials<<<grid_for(wg.blocks(), 1, "tensor_core_grad_weight_partials"), kThreads, 0,
                                     a.stream>>>(g, wg, a.in.x, a.argmax, g_y, weight_partials);
  CUDA_CHECK_LAUNCH("tensor_core_grad_weight_partials");
  tiled::weight_chunk_sums<<<grid_for(g.weight_elems, 256, "weight_chunk_sums"), 256, 0, a.stream>>>(
      g.weight_elems, wg.wc.chunks, weight_partials, a.grad_weight);
  CUDA_CHECK_LAUNCH("weight_chunk_sums");

  a.mark("input");
  const XGrid xg = x_grid(g);
  tf32_weight_layout_x<<<grid_for(xg.weight_floats(), 256, "tf32_weight_layout_x"), 256, 0, a.stream>>>(
      g, xg, a.in.weight, wx);
  CUDA_CHECK_LAUNCH("tf32_weight_layout_x");
  tensor_core_grad_x<<<grid_for(xg.blocks(g), 1, "tensor_core_grad_x"), kThreads, 0, a.stream>>>(
      g, xg, wx, a.argmax, g_y, a.grad_x);
  CUDA_CHECK_LAUNCH("tensor_core_grad_x");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung x;
    x.id = LADDER_RUNG_ID;
    x.name = LADDER_RUNG_NAME;
    x.idea = "rung 09's two convolution gradients as implicit GEMMs on mma.sync TF32, pool routing fused";
    x.backward_workspace = workspace;
    x.backward = run;
    x.unsupported = unsupported;
    x.deterministic = true;
    x.precision = Precision::Tf32;  // grad_x and grad_weight from TF32-rounded operands: the TF32 bound
    return x;
  }();
  return r;
}

}  // namespace ladder::p74
