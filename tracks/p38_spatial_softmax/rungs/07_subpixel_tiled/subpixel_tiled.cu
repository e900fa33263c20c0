// Rung 07: what the profile of rungs 05 and 06 points at, the convolution's arithmetic. Their
// gather spends most of its instructions on index arithmetic and on taps that do not exist: with
// stride 2, seven in eight of a 3x3x3 kernel's taps fail the divisibility test at any output.
// What changed from rung 05 (whose fused structure, shift and rescale it keeps):
//  - sub-pixel decomposition: write o = stride*c + r. For a fixed phase r, the taps k that reach
//    o are fixed (k = r + padding mod stride) and read input c + (r + padding - k)/stride, so a
//    thread that owns a whole cell of stride^3 outputs knows every tap at compile time: no
//    division, no test, no dead tap (stride, kernel_size and padding are template parameters);
//  - register tiling: each thread holds 2 cells along w for 4 output channels, 64 accumulators
//    for stride 2, and reuses each pooled value it loads for 4 channels and each weight it reads
//    (a shared-memory broadcast, float4) for 2 cells. (Measured on an H200 at the KernelBench
//    size, whole rung: 4 channels x 2 cells 3.62 ms, 8x2 4.02, 4x4 4.04, 8x1 4.13, 16x1 4.38;
//    fewer registers, more resident warps: P38_RUNG07_CO and P38_RUNG07_CELLS select others.)
//  - the offsets and bounds of a thread's inputs are computed once (they repeat in every input
//    channel), and the next channel's inputs are loaded while this channel's FMAs run;
//  - the rescale pass moves float4s (rescale4, device/fused.cuh).
// Parameters outside the instantiated set (dilation other than 1, axes that differ, other
// kernel/stride/padding) take rung 05's gather, still fused.
#include <sstream>
#include <stdexcept>

#include "../../device/fused.cuh"
#include "../../device/subpixel_taps.cuh"  // Taps
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "todo.cuh"     // ladder_todo: the handout's stubs

#ifndef P38_RUNG07_RECOMPUTE
#define P38_RUNG07_RECOMPUTE 0  // 1: recompute the convolution instead of rescaling (rung 06's trade)
#endif

namespace ladder::p38 {
namespace {

#ifndef P38_RUNG07_CO
#define P38_RUNG07_CO 4
#endif
#ifndef P38_RUNG07_CELLS
#define P38_RUNG07_CELLS 2
#endif
constexpr int kCo = P38_RUNG07_CO;        // output channels per thread (a multiple of 4: float4 weights)
constexpr int kCells = P38_RUNG07_CELLS;  // cells per thread along w
constexpr int kTx = 32 / kCells;          // a block spans 32 cells along w...
constexpr int kTy = 128 / kTx;            // ...and 128 threads
static_assert(kCo % 4 == 0 && 32 % kCells == 0, "tile shape");
constexpr int kCiChunk = 16;           // input channels of weights staged at once

enum class Mode { WriteExp, SumOnly, WriteFinal };

/// Block (kTx, kTy): a tile of kTy cells along h by kTx*kCells along w, at one cell depth, for
/// one sample and kCo channels of one group. grid.x: spatial tiles; grid.y: (sample, channel tile).
template <int S, int K, int PAD, Mode M>
__global__ void __launch_bounds__(kTx* kTy) subpixel_conv(Geometry g, const float* __restrict__ pooled,
                                                           const float* __restrict__ weight,
                                                           const float* __restrict__ bias, float shift,
                                                           const float* __restrict__ factor, float* __restrict__ out,
                                                           float* __restrict__ partials) {
  using T = Taps<S, K, PAD>;
  constexpr int K3 = K * K * K, SP = T::span, WIN = kCells + SP - 1;
  __shared__ float4 w_s[kCiChunk][K3][kCo / 4];
  __shared__ float red[kTx * kTy / 32][kCo];

  const int cells_h = (g.out[1] + S - 1) / S, cells_w = (g.out[2] + S - 1) / S;
  const int tiles_h = (cells_h + kTy - 1) / kTy, tiles_w = (cells_w + kTx * kCells - 1) / (kTx * kCells);
  const int tw = blockIdx.x % tiles_w, th = (blockIdx.x / tiles_w) % tiles_h, cd = blockIdx.x / (tiles_w * tiles_h);
  const int co_tiles = (g.out_per_group + kCo - 1) / kCo;
  const int n = blockIdx.y / (g.groups * co_tiles), gt = blockIdx.y % (g.groups * co_tiles);
  const int group = gt / co_tiles, co0 = (gt % co_tiles) * kCo;  // co0: within the group
  const int ch = th * kTy + threadIdx.y, cw0 = (tw * kTx + threadIdx.x) * kCells;
  const int tid = threadIdx.y * kTx + threadIdx.x;

  // The inputs a thread reads sit at the same offsets in every input channel's plane: their
  // offsets and bounds are worked out once, not once per channel.
  int base[SP][SP];
  unsigned long long inside = 0;  // bit (a*SP + b)*WIN + c: input (a, b, c) lies in the pooled plane
#pragma unroll
  for (int a = 0; a < SP; ++a)
#pragma unroll
    for (int b = 0; b < SP; ++b) {
      const int id = cd + T::kLo + a, ih = ch + T::kLo + b;
      base[a][b] = (id * g.pooled[1] + ih) * g.pooled[2] + cw0 + T::kLo;
#pragma unroll
      for (int c = 0; c < WIN; ++c) {
        const int iw = cw0 + T::kLo + c;
        if (id >= 0 && id < g.pooled[0] && ih >= 0 && ih < g.pooled[1] && iw >= 0 && iw < g.pooled[2])
          inside |= 1ull << ((a * SP + b) * WIN + c);
      }
    }
  static_assert(SP * SP * WIN <= 64, "the bounds mask holds 64 inputs");
  auto load = [&](const float* __restrict__ in, float (&v)[SP][SP][WIN]) {
#pragma unroll
    for (int a = 0; a < SP; ++a)
#pragma unroll
      for (int b = 0; b < SP; ++b)
#pragma unroll
        for (int c = 0; c < WIN; ++c)
          v[a][b][c] = inside >> ((a * SP + b) * WIN + c) & 1ull ? __ldg(in + base[a][b] + c) : 0.f;
  };
  const float* in_group = pooled + (int64_t(n) * g.in_channels + group * g.in_per_group) * g.pooled_spatial;

  float acc[S][S][S * kCells][kCo] = {};
  for (int ci0 = 0; ci0 < g.in_per_group; ci0 += kCiChunk) {
    __syncthreads();  // the previous chunk's weights are no longer read
    float* ws = reinterpret_cast<float*>(w_s);
    for (int i = tid; i < kCiChunk * K3 * kCo; i += kTx * kTy) {
      const int co = i % kCo, k = (i / kCo) % K3, cil = i / (kCo * K3);
      const int ci = ci0 + cil, col = co0 + co;
      ws[i] = ci < g.in_per_group && col < g.out_per_group
                  ? weight[(int64_t(group * g.in_per_group + ci) * g.out_per_group + col) * K3 + k]
                  : 0.f;
    }
    __syncthreads();
    const int chunk = min(kCiChunk, g.in_per_group - ci0);
    float v[SP][SP][WIN], next[SP][SP][WIN];
    load(in_group + int64_t(ci0) * g.pooled_spatial, v);
    for (int cil = 0; cil < chunk; ++cil) {
      // Prefetch: the next channel's loads are in flight while this channel's FMAs run.
      if (cil + 1 < chunk) load(in_group + int64_t(ci0 + cil + 1) * g.pooled_spatial, next);
#pragma unroll
      for (int rd = 0; rd < S; ++rd)
#pragma unroll
        for (int kd = 0; kd < K; ++kd) {
          if (!T::meets(rd, kd)) continue;
          const int a = (rd + PAD - kd) / S - T::kLo;
#pragma unroll
          for (int rh = 0; rh < S; ++rh)
#pragma unroll
            for (int kh = 0; kh < K; ++kh) {
              if (!T::meets(rh, kh)) continue;
              const int b = (rh + PAD - kh) / S - T::kLo;
#pragma unroll
              for (int rw = 0; rw < S; ++rw)
#pragma unroll
                for (int kw = 0; kw < K; ++kw) {
                  if (!T::meets(rw, kw)) continue;
                  const int c = (rw + PAD - kw) / S - T::kLo;
                  const int k = (kd * K + kh) * K + kw;
                  float wv[kCo];
#pragma unroll
                  for (int q = 0; q < kCo / 4; ++q) {
                    const float4 w4 = w_s[cil][k][q];
                    wv[4 * q] = w4.x, wv[4 * q + 1] = w4.y, wv[4 * q + 2] = w4.z, wv[4 * q + 3] = w4.w;
                  }
#pragma unroll
                  for (int cc = 0; cc < kCells; ++cc)
#pragma unroll
                    for (int co = 0; co < kCo; ++co) acc[rd][rh][cc * S + rw][co] += v[a][b][cc + c] * wv[co];
                }
            }
        }
#pragma unroll
      for (int a = 0; a < SP; ++a)
#pragma unroll
        for (int b = 0; b < SP; ++b)
#pragma unroll
          for (int c = 0; c < WIN; ++c) v[a][b][c] = next[a][b][c];
    }
  }

  // Epilogue: bias, clamp, exp(z - shift); store and/or sum.
  float part[kCo] = {};
#pragma unroll
  for (int co = 0; co < kCo; ++co) {
    if (co0 + co >= g.out_per_group) continue;
    const int c = group * g.out_per_group + co0 + co;
    const int64_t row = int64_t(n) * g.out_channels + c;
    const float b = bias[c];
    const float f = M == Mode::WriteFinal ? factor[row] : 0.f;
#pragma unroll
    for (int rd = 0; rd < S; ++rd)
#pragma unroll
      for (int rh = 0; rh < S; ++rh)
#pragma unroll
        for (int p = 0; p < S * kCells; ++p) {
          const int od = S * cd + rd, oh = S * ch + rh, ow = S * cw0 + p;
          if (od >= g.out[0] || oh >= g.out[1] || ow >= g.out[2]) continue;
          const float e = expf(clamp_like_torch(acc[rd][rh][p][co] + b, g.clamp_lo, g.clamp_hi) - shift);
          float* dst = out + row * g.spatial + (int64_t(od) * g.out[1] + oh) * g.out[2] + ow;
          if (M == Mode::WriteExp) *dst = e;
          if (M == Mode::WriteFinal) *dst = e * f;
          part[co] += e;
        }
  }
  if (M == Mode::WriteFinal) return;
  const int lane = tid & 31, warp = tid >> 5;
#pragma unroll
  for (int co = 0; co < kCo; ++co) {
    const float s = warp_sum(part[co]);
    if (lane == 0) red[warp][co] = s;
  }
  __syncthreads();
  if (tid < kCo && co0 + tid < g.out_per_group) {
    float s = 0.f;
    for (int w = 0; w < kTx * kTy / 32; ++w) s += red[w][tid];
    const int64_t row = int64_t(n) * g.out_channels + group * g.out_per_group + co0 + tid;
    partials[row * gridDim.x + blockIdx.x] = s;
  }
}

__global__ void rescale1(Geometry g, const float* __restrict__ factor, float* __restrict__ out) {
  // BEGIN SOLUTION p38-05
  // STUB: ladder_todo("p38-07.1", "rescale1: rung 05's rescale");
  // STUB: (void)g, (void)factor, (void)out;
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    out[i] *= factor[i / g.spatial];
  // END SOLUTION
}

/// Spatial tiles (grid.x, also the partials per row) of the tiled path.
int64_t tiles(const Geometry& g, int S) {
  const int64_t cd = (g.out[0] + S - 1) / S, ch = (g.out[1] + S - 1) / S, cw = (g.out[2] + S - 1) / S;
  return cd * ((ch + kTy - 1) / kTy) * ((cw + kTx * kCells - 1) / (kTx * kCells));
}

using Kernel = void (*)(Geometry, const float*, const float*, const float*, float, const float*, float*, float*);
struct Path {
  int stride = 0;  // 0: the gather
  Kernel first = nullptr, second = nullptr;
};

template <int S, int K, int PAD>
Path tiled() {
  if (P38_RUNG07_RECOMPUTE)
    return {S, subpixel_conv<S, K, PAD, Mode::SumOnly>, subpixel_conv<S, K, PAD, Mode::WriteFinal>};
  return {S, subpixel_conv<S, K, PAD, Mode::WriteExp>, nullptr};
}

/// The instantiated (stride, kernel_size, padding), the same on every axis, dilation 1. (Kernel 4
/// at stride 2 needs 255 registers and spills: it takes the gather.)
Path choose(const Problem38& p) {
  const auto& c = p.conv;
  const bool cubic = c.kernel_size == Triple::cube(c.kernel_size.d) && c.stride == Triple::cube(c.stride.d) &&
                     c.padding == Triple::cube(c.padding.d) && c.dilation == Triple::cube(1);
  if (!cubic) return {};
  const int64_t s = c.stride.d, k = c.kernel_size.d, pad = c.padding.d;
  if (s == 2 && k == 3 && pad == 1) return tiled<2, 3, 1>();
  if (s == 2 && k == 3 && pad == 0) return tiled<2, 3, 0>();
  if (s == 1 && k == 3 && pad == 1) return tiled<1, 3, 1>();
  return {};
}

int64_t partials_per_row(const Problem38& p, const Geometry& g) {
  const Path path = choose(p);
  return path.stride ? tiles(g, path.stride) : parts_per_row(g);
}

size_t workspace(const Problem38& p) {
  const Geometry g = make_geometry(p);
  return pooled_bytes(g) + aligned_bytes(size_t(g.rows * partials_per_row(p, g)) * 4) +
         aligned_bytes(size_t(g.rows) * 4);
}

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  const Path path = choose(a.problem);
  const int64_t parts = partials_per_row(a.problem, g);
  char* ws = static_cast<char*>(a.workspace);
  float* pooled = reinterpret_cast<float*>(ws);
  float* partials = reinterpret_cast<float*>(ws + pooled_bytes(g));
  float* factor = reinterpret_cast<float*>(ws + pooled_bytes(g) + aligned_bytes(size_t(g.rows * parts) * 4));
  a.mark("fused");
  launch_avg_pool3d(g, a.in.x, pooled, a.stream);
  bool rescaled = true;
  if (path.stride) {
    const int64_t grid_y = int64_t(g.batch) * g.groups * ((g.out_per_group + kCo - 1) / kCo);
    if (grid_y > 65535) {
      std::ostringstream m;
      m << "rung 07: batch x groups x channel tiles = " << grid_y << " exceeds the grid's y limit of 65535";
      throw std::runtime_error(m.str());
    }
    const dim3 grid(grid_for(parts, 1, "subpixel_conv"), unsigned(grid_y)), block(kTx, kTy);
    path.first<<<grid, block, 0, a.stream>>>(g, pooled, a.in.weight, a.in.bias, g.clamp_hi, nullptr, a.out, partials);
    CUDA_CHECK_LAUNCH("subpixel_conv (first pass)");
    row_factor<<<capped_grid(g.rows), 256, 0, a.stream>>>(g, partials, parts, a.in.scale, factor);
    CUDA_CHECK_LAUNCH("row_factor");
    if (path.second) {
      path.second<<<grid, block, 0, a.stream>>>(g, pooled, a.in.weight, a.in.bias, g.clamp_hi, factor, a.out, partials);
      CUDA_CHECK_LAUNCH("subpixel_conv (second pass)");
      rescaled = false;
    }
  } else {
    // BEGIN SOLUTION p38-05
    // STUB: ladder_todo("p38-07.2", "rung 07's gather path: rung 05's epilogue launch");
    conv_exp_partials<true><<<capped_grid(g.rows * parts), kFusedBlock, 0, a.stream>>>(
        g, pooled, a.in.weight, a.in.bias, g.clamp_hi, a.out, partials);
    CUDA_CHECK_LAUNCH("conv_exp_partials<write>");
    // END SOLUTION
    row_factor<<<capped_grid(g.rows), 256, 0, a.stream>>>(g, partials, parts, a.in.scale, factor);
    CUDA_CHECK_LAUNCH("row_factor");
  }
  if (!rescaled) return;
  if (launch_rescale4(g, factor, a.out, a.stream)) return;  // device/fused.cuh: float4s when S % 4 == 0
  const int64_t total = g.rows * g.spatial;
  rescale1<<<grid_for(total < (int64_t(1) << 30) ? total : (int64_t(1) << 30), 256, "rescale1"), 256, 0, a.stream>>>(
      g, factor, a.out);
  CUDA_CHECK_LAUNCH("rescale1");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
#define P38_RUNG07_STR2(x) #x
#define P38_RUNG07_STR(x) P38_RUNG07_STR2(x)
  // The idea names the tile this build uses (P38_RUNG07_CO channels x P38_RUNG07_CELLS cells).
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME,
                      "sub-pixel phases with compile-time taps, register tiles of " P38_RUNG07_STR(P38_RUNG07_CO)
                      " channels x " P38_RUNG07_STR(P38_RUNG07_CELLS) " cells",
                      nullptr, workspace, run, shift_unsupported, true, P38_RUNG07_RECOMPUTE ? 2 : 1};
  return r;
}

}  // namespace ladder::p38
