// Rung 04: the sub-pixel forward, for the KernelBench geometry family only (ConvTranspose3d
// kernel_size 3, stride 2, padding 1, dilation 1, output_padding 0 or 1, groups 1; MaxPool3d
// kernel_size 2, stride 2, padding 0, dilation 1, no ceil_mode; any batch, channels and sizes).
// What changed from rung 03: rung 03's gather tests all 27 taps at each of a window's 8 positions
// and finds 27 of the 216 alive, recomputing every index on the way. With stride 2 the pooling
// window q covers conv positions 2q and 2q+1 on each axis, and per axis
//   position 2q   (phase 0) reads tap k = 1 at input q,
//   position 2q+1 (phase 1) reads tap k = 0 at input q+1 and tap k = 2 at input q,
// so a window needs the 8 inputs {q, q+1}^3 of each input channel and exactly 3^3 = 27 (position,
// tap) multiply-adds per input/output channel pair, known at compile time. One thread owns one
// window (or kNw along w) for a register tile of kCo output channels: per input channel it loads
// its 8 inputs once and does 27*kCo FMAs with weights broadcast from shared memory, then applies
// the chain and the max in window order in registers. Only out, argmax and y_saved are written.
//
// Why every window is whole: per axis conv size = 2*in - 1 + output_padding and pooled size =
// floor(conv/2), so 2q+1 <= conv - 1 for every window. Input q always exists; q+1 is past the end
// only when output_padding is 1 and q = in - 1: that input reads as 0 (contributes nothing).
#include <stdexcept>
#include <string>

#include "../../device/forward_chain.cuh"
#include "../../device/forward_pool.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

#ifndef P74_RUNG04_CO
#define P74_RUNG04_CO 8  // output channels per thread: a multiple of 4 (float4 weight reads)
#endif
#ifndef P74_RUNG04_NW
#define P74_RUNG04_NW 2  // pooling windows per thread along w (the fastest measured, with CO 8)
#endif
#ifndef P74_RUNG04_MIN_BLOCKS
#define P74_RUNG04_MIN_BLOCKS 0  // > 0: blocks per SM asked of ptxas, capping registers at 65536/(128*that)
#endif

namespace ladder::p74 {
namespace {

constexpr int kCo = P74_RUNG04_CO;
constexpr int kNw = P74_RUNG04_NW;
constexpr int kBlock = 128;
constexpr int kCiChunk = 16;  // input channels whose weights are staged in shared memory at once
constexpr int kTaps = 27;
#if P74_RUNG04_MIN_BLOCKS > 0
#define P74_RUNG04_BOUNDS __launch_bounds__(kBlock, P74_RUNG04_MIN_BLOCKS)
#else
#define P74_RUNG04_BOUNDS __launch_bounds__(kBlock)
#endif
static_assert(kCo % 4 == 0 && kNw >= 1 && kNw <= 7, "tile shape (the bounds mask holds 4*(kNw+1) <= 32 bits)");

// The three (phase, tap, input shift) pairs of one axis, indexed e = 0, 1, 2: conv position
// 2q + phase reads input q + shift through tap k (see the header comment).
__host__ __device__ constexpr int pair_phase(int e) { return e == 0 ? 0 : 1; }
__host__ __device__ constexpr int pair_tap(int e) { return e == 0 ? 1 : e == 1 ? 0 : 2; }
__host__ __device__ constexpr int pair_shift(int e) { return e == 1 ? 1 : 0; }

/// 1-D grid; each block of kBlock threads serves one (sample n, tile of CO output channels) plane
/// and kBlock consecutive threads of it; thread t owns pooled windows (qd, qh, qw0 .. qw0+NW-1),
/// t in row-major order over (qd, qh, qw0/NW). Writes out, argmax (window offset
/// (rd*2 + rh)*2 + rw, int32) and y_saved, all (batch, out_channels, pooled D, H, W), for the
/// windows and channels that exist (channel and w tails are computed on zeros and not written).
/// x (batch, in_channels, D, H, W); weight (in_channels, out_channels, 3, 3, 3).
///
/// Registers and occupancy: the tile needs NW*8*CO accumulators (128 at CO = 8, NW = 2), two sets
/// of 4*(NW+1) inputs (this channel's and the next one's, prefetched while the FMAs run) and CO
/// weights at a time. Per input channel a thread issues 27*CO/4 broadcast float4 shared loads
/// and 4*(NW+1) global loads for 27*CO*NW FMAs: a second window per thread halves the shared
/// loads per FMA. On an H200 (CUDA 13.0; results/p74/experiments/rung04_tiles_h200.txt) CO = 8,
/// NW = 2 took 241 registers, 2 blocks of 4 warps per SM, and 0.389 ms against 0.517 ms for
/// NW = 1 (135 registers, 3 blocks): fewer warps with more independent FMA chains each won.
template <int CO, int NW>
__global__ void P74_RUNG04_BOUNDS subpixel_forward_kernel(
    Geometry g, const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    const float* __restrict__ multiplier, float* __restrict__ out, int32_t* __restrict__ argmax,
    float* __restrict__ y_saved) {
  constexpr int NI = NW + 1;  // inputs per thread along w: qw0 .. qw0 + NW
  __shared__ float4 w_s[kCiChunk][kTaps][CO / 4];

  const int co_tiles = (g.out_channels + CO - 1) / CO;
  const int cols = (g.out[2] + NW - 1) / NW;
  const int per_plane = g.out[0] * g.out[1] * cols;
  const int blocks_per_plane = (per_plane + kBlock - 1) / kBlock;
  const int plane = int(blockIdx.x) / blocks_per_plane;  // n * co_tiles + tile
  const int64_t t = int64_t(int(blockIdx.x) - plane * blocks_per_plane) * kBlock + threadIdx.x;
  const int n = plane / co_tiles, co0 = (plane - n * co_tiles) * CO;
  // Threads past the plane's end still stage weights (they reach every __syncthreads) and
  // compute window 0, which exists; they write nothing.
  const bool active = t < per_plane;
  const int tt = active ? int(t) : 0;
  const int qw0 = (tt % cols) * NW, qh = (tt / cols) % g.out[1], qd = tt / (cols * g.out[1]);

  // The thread's inputs sit at the same offsets in every channel's plane: offsets and bounds once.
  int base[2][2];
  unsigned inside = 0;  // bit (a*2 + b)*NI + c: input (qd + a, qh + b, qw0 + c) exists
#pragma unroll
  for (int a = 0; a < 2; ++a)
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int id = qd + a, ih = qh + b;
      const bool row = id < g.in[0] && ih < g.in[1];
      base[a][b] = row ? (id * g.in[1] + ih) * g.in[2] + qw0 : 0;
#pragma unroll
      for (int c = 0; c < NI; ++c)
        if (row && qw0 + c < g.in[2]) inside |= 1u << ((a * 2 + b) * NI + c);
    }
  auto load = [&](const float* __restrict__ in, float (&v)[2][2][NI]) {
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
      for (int b = 0; b < 2; ++b)
#pragma unroll
        for (int c = 0; c < NI; ++c)
          v[a][b][c] = (inside >> ((a * 2 + b) * NI + c)) & 1u ? __ldg(in + base[a][b] + c) : 0.f;
  };

  float acc[NW][8][CO];
#pragma unroll
  for (int co = 0; co < CO; ++co) {
    const float b0 = co0 + co < g.out_channels ? bias[co0 + co] : 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w)
#pragma unroll
      for (int p = 0; p < 8; ++p) acc[w][p][co] = b0;
  }

  const float* xn = x + int64_t(n) * g.in_channels * g.in_spatial;
  for (int ci0 = 0; ci0 < g.in_channels; ci0 += kCiChunk) {
    const int chunk = min(kCiChunk, g.in_channels - ci0);
    __syncthreads();  // the previous chunk's weights are no longer read
    // Stage weight[ci0 + cil, co0 + co, k] as w_s[cil][k][co]; reads run along k (coalesced).
    float* ws = reinterpret_cast<float*>(w_s);
    for (int i = threadIdx.x; i < chunk * kTaps * CO; i += kBlock) {
      const int k = i % kTaps, co = (i / kTaps) % CO, cil = i / (kTaps * CO);
      const int c = co0 + co;
      ws[(cil * kTaps + k) * CO + co] =
          c < g.out_channels ? weight[(int64_t(ci0 + cil) * g.out_channels + c) * kTaps + k] : 0.f;
    }
    __syncthreads();
    float v[2][2][NI], next[2][2][NI];
    load(xn + int64_t(ci0) * g.in_spatial, v);
    for (int cil = 0; cil < chunk; ++cil) {
      if (cil + 1 < chunk) load(xn + int64_t(ci0 + cil + 1) * g.in_spatial, next);
#pragma unroll
      for (int ed = 0; ed < 3; ++ed)
#pragma unroll
        for (int eh = 0; eh < 3; ++eh)
#pragma unroll
          for (int ew = 0; ew < 3; ++ew) {
            const int k = (pair_tap(ed) * 3 + pair_tap(eh)) * 3 + pair_tap(ew);
            const int p = (pair_phase(ed) * 2 + pair_phase(eh)) * 2 + pair_phase(ew);
            float wv[CO];
#pragma unroll
            for (int q = 0; q < CO / 4; ++q) {
              const float4 w4 = w_s[cil][k][q];
              wv[4 * q] = w4.x, wv[4 * q + 1] = w4.y, wv[4 * q + 2] = w4.z, wv[4 * q + 3] = w4.w;
            }
#pragma unroll
            for (int w = 0; w < NW; ++w) {
              const float xv = v[pair_shift(ed)][pair_shift(eh)][w + pair_shift(ew)];
#pragma unroll
              for (int co = 0; co < CO; ++co) acc[w][p][co] += xv * wv[co];
            }
          }
      if (cil + 1 < chunk) {
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
          for (int b = 0; b < 2; ++b)
#pragma unroll
            for (int c = 0; c < NI; ++c) v[a][b][c] = next[a][b][c];
      }
    }
  }

  if (!active) return;
  // Epilogue: the chain and the max in window order; position p = (rd*2 + rh)*2 + rw is window
  // offset p (pool kernel 2, window start 2q, dilation 1) and always inside the conv output.
#pragma unroll
  for (int co = 0; co < CO; ++co) {
    const int c = co0 + co;
    if (c >= g.out_channels) break;
    const float mult = multiplier[c];
    const int64_t plane_out = (int64_t(n) * g.out_channels + c) * g.out_spatial;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const int qw = qw0 + w;
      if (qw >= g.out[2]) break;
      WindowMax m;
      float y_at = 0.f;
#pragma unroll
      for (int p = 0; p < 8; ++p)
        if (m.take(chain(acc[w][p][co], mult, g.slope), p)) y_at = acc[w][p][co];
      const int64_t e = plane_out + (int64_t(qd) * g.out[1] + qh) * g.out[2] + qw;
      out[e] = m.best;
      argmax[e] = m.offset;
      y_saved[e] = y_at;
    }
  }
}

/// "" for the KernelBench geometry family, else the sentence naming the parameter outside it.
std::string unsupported(const Problem74& p) { return kernelbench_family_mismatch(p, LADDER_RUNG_ID); }

size_t workspace(const Problem74&) { return 0; }

void forward(const ForwardArgs& a) {
  const std::string why = unsupported(a.problem);
  if (!why.empty()) throw InvalidProblem(why);
  const Geometry g = make_geometry(a.problem);
  const int64_t co_tiles = (g.out_channels + kCo - 1) / kCo, cols = (g.out[2] + kNw - 1) / kNw;
  const int64_t blocks_per_plane = (int64_t(g.out[0]) * g.out[1] * cols + kBlock - 1) / kBlock;
  const unsigned grid = grid_for(int64_t(g.batch) * co_tiles * blocks_per_plane, 1, "subpixel_forward_kernel");
  a.mark("fused");
  subpixel_forward_kernel<kCo, kNw><<<grid, kBlock, 0, a.stream>>>(g, a.in.x, a.in.weight, a.in.bias,
                                                                   a.in.multiplier, a.out, a.argmax, a.y_saved);
  CUDA_CHECK_LAUNCH("subpixel_forward_kernel");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung r;
    r.id = LADDER_RUNG_ID;
    r.name = LADDER_RUNG_NAME;
    r.idea = "stride-2 sub-pixel taps at compile time, register tile of output channels, weights in shared memory";
    r.forward_workspace = workspace;
    r.forward = forward;
    r.unsupported = unsupported;
    r.deterministic = true;
    return r;
  }();
  return r;
}

}  // namespace ladder::p74
