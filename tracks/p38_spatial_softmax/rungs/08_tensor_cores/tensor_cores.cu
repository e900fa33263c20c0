// Rung 08: the convolution on tensor cores. Rung 07 left the sub-pixel convolution on FP32 FMAs;
// PyTorch runs ConvTranspose3d in TF32 on tensor cores by default, and so does this rung.
// What changed from rung 07 (whose sub-pixel phases, compile-time taps and fused epilogue it keeps):
//  - implicit GEMM per phase class: for the outputs o = stride*c + r of one class r = (rd, rh, rw),
//    out[c, co] = sum over (ci, tap of r) of pooled[ci, c + delta(tap)] * w[ci, co, tap]: a GEMM with
//    M = cells, N = output channels, K = input channels x the class's taps. One mma.sync.m16n8k8
//    (TF32 in, FP32 accumulate) does 16 cells x 8 channels x 8 input channels. A warp holds the
//    accumulators of every class at once, so a chunk of 8 input channels staged once feeds all 27
//    taps of a 3x3x3 kernel;
//  - each A fragment (16 cells x 8 channels at one input offset) is loaded once and reused by every
//    (class, tap) pair that reads that offset: 8 offsets feed the 27 taps at stride 2;
//  - x and the weights are rounded to TF32 with cvt.rna (to nearest, as cuDNN rounds) as they are
//    staged; the weights once per run, into the layout the B fragments read;
//  - the tensor cores make the convolution cheaper than the output's extra trips to memory, so the
//    plan is rung 06's: a first pass only sums, a second computes again and writes the final value
//    once (the chapter has the arithmetic; -DP38_RUNG08_RECOMPUTE=0 builds rung 07's rescale instead).
// Other parameters, and code below sm_80 (no TF32 mma), take rung 06's gather, still fused.
#include <sstream>
#include <stdexcept>

#include "../../device/fused.cuh"
#include "../../device/subpixel_taps.cuh"  // Taps
#include "../../rung.hpp"
#include "mma_tf32.cuh"  // mma_tf32, tf32_bits, tf32_mma_in
#include "rung_id.hpp"   // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

#ifndef P38_RUNG08_RECOMPUTE
#define P38_RUNG08_RECOMPUTE 1  // 0: write exp, then rescale (rung 07's plan)
#endif

namespace ladder::p38 {
namespace {

constexpr int kWarps = 16, kThreads = 32 * kWarps;
constexpr int kCellsW = 16;        // one m16 tile: 16 cells along w
constexpr int kRows = kWarps;      // cell rows per block: warp w owns row w
constexpr int kCoTile = 16;        // output channels per block: two n8 tiles
constexpr int kNTiles = kCoTile / 8;
constexpr int kCi = 8;             // input channels per step: the mma's k
constexpr int kSlots = 8;          // a (cell, tap) entry's 8 channels, in channel_slot order

enum class Mode { WriteExp, SumOnly, WriteFinal };

/// Where input channel cl (0..7) of a chunk sits among its 8 shared-memory slots: channels t and
/// t+4 side by side (order 0 4 1 5 2 6 3 7), so the pair (t, t+4) that a thread's a0/a2 (and b0/b1)
/// need is one 8-byte load at slot 2t.
__host__ __device__ constexpr int channel_slot(int cl) { return 2 * (cl % 4) + cl / 4; }
static_assert(channel_slot(0) == 0 && channel_slot(4) == 1 && channel_slot(1) == 2 && channel_slot(5) == 3 &&
                  channel_slot(2) == 4 && channel_slot(6) == 5 && channel_slot(3) == 6 && channel_slot(7) == 7,
              "the staging's two float4 stores write slots 0-7 as channels 0 4 1 5 2 6 3 7");

/// The weights, TF32-rounded, as the B fragments read them: wt[group][chunk][tap][co][slot], co
/// padded to a multiple of kCoTile and ci to a multiple of kCi with zeros.
/// weight: (in_channels, out_per_group, K^3) fp32. One thread per packed element.
__global__ void pack_weights(Geometry g, int co_pad, const float* __restrict__ weight, float* __restrict__ wt) {
  const int K3 = g.taps, chunks = (g.in_per_group + kCi - 1) / kCi;
  const int64_t total = int64_t(g.groups) * chunks * K3 * co_pad * kSlots;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int slot = int(i % kSlots), co = int(i / kSlots % co_pad), tap = int(i / (kSlots * co_pad) % K3);
    const int64_t gc = i / (int64_t(kSlots) * co_pad * K3);  // group * chunks + chunk
    const int ci = int(gc % chunks) * kCi + (slot % 2) * 4 + slot / 2;  // channel_slot's inverse
    const int group = int(gc / chunks);
    float v = 0.f;
    if (ci < g.in_per_group && co < g.out_per_group)
      v = weight[(int64_t(group * g.in_per_group + ci) * g.out_per_group + co) * K3 + tap];
    wt[i] = __uint_as_float(tf32_bits(v));
  }
}

/// Block (kThreads): kRows x kCellsW cells at one cell depth cd, for one sample and kCoTile channels
/// of one group; warp w owns cell row w: one m16 tile (16 cells along w) by kNTiles n8 tiles.
/// grid.x: spatial tiles (also the partials per row); grid.y: (sample, group, channel tile).
/// pooled (batch, in_channels, pooled D*H*W); wt from pack_weights; out and partials as rung 07's.
template <int S, int K, int PAD, Mode M>
__global__ void __launch_bounds__(kThreads, 1)
    mma_subpixel_conv(Geometry g, const float* __restrict__ pooled, const float* __restrict__ wt, int co_pad,
                      const float* __restrict__ bias, float shift, const float* __restrict__ factor,
                      float* __restrict__ out, float* __restrict__ partials) {
  using T = Taps<S, K, PAD>;
  constexpr int K3 = K * K * K, SP = T::span, PR = kRows + SP - 1, PC = kCellsW + SP - 1, C = S * S * S;
  // patch: (SP depths, PR rows, PC columns, kSlots channels) of the chunk's pooled input, TF32
  // w_s:   (K3 taps, kCoTile channels, kSlots input channels) of the chunk's weights, TF32
  __shared__ __align__(16) float patch[SP * PR * PC * kSlots];
  __shared__ __align__(16) float w_s[K3 * kCoTile * kSlots];
  __shared__ float red[kWarps][kCoTile];

  const int cells_h = (g.out[1] + S - 1) / S, cells_w = (g.out[2] + S - 1) / S;
  const int tiles_h = (cells_h + kRows - 1) / kRows, tiles_w = (cells_w + kCellsW - 1) / kCellsW;
  const int tw = blockIdx.x % tiles_w, th = (blockIdx.x / tiles_w) % tiles_h, cd = blockIdx.x / (tiles_w * tiles_h);
  const int co_tiles = co_pad / kCoTile, chunks = (g.in_per_group + kCi - 1) / kCi;
  const int n = blockIdx.y / (g.groups * co_tiles), gt = blockIdx.y % (g.groups * co_tiles);
  const int group = gt / co_tiles, co0 = (gt % co_tiles) * kCoTile;  // co0: within the group
  const int ch0 = th * kRows, cw0 = tw * kCellsW;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane / 4, tq = lane % 4;
  const float* in_group = pooled + (int64_t(n) * g.in_channels + group * g.in_per_group) * g.pooled_spatial;

  // acc[class][n8 tile][d0..d3]: class r = (rd*S + rh)*S + rw; d0/d1 cell gq, d2/d3 cell gq + 8;
  // d0/d2 channel 2tq, d1/d3 channel 2tq + 1 of the n8 tile.
  float acc[C][kNTiles][4] = {};
  // Staging: a thread takes one patch position at a time and loads its 8 channels at once (8 loads
  // in flight), then stores them rounded to TF32 as two float4s in channel_slot order.
  constexpr int kPos = SP * PR * PC;
  constexpr int kW4 = K3 * kCoTile * kSlots / 4, kWIters = (kW4 + kThreads - 1) / kThreads;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    __syncthreads();  // the previous chunk's tiles are no longer read
    for (int pos = tid; pos < kPos; pos += kThreads) {
      const int c = pos % PC, r = pos / PC % PR, a = pos / (PC * PR);
      const int id = cd + T::kLo + a, ih = ch0 + T::kLo + r, iw = cw0 + T::kLo + c;
      const bool inside = unsigned(id) < unsigned(g.pooled[0]) && unsigned(ih) < unsigned(g.pooled[1]) &&
                          unsigned(iw) < unsigned(g.pooled[2]);
      const float* src = in_group + int64_t(chunk) * kCi * g.pooled_spatial + (int64_t(id) * g.pooled[1] + ih) * g.pooled[2] + iw;
      float v[kCi];
#pragma unroll
      for (int cl = 0; cl < kCi; ++cl)
        v[cl] = inside && chunk * kCi + cl < g.in_per_group ? __ldg(src + cl * g.pooled_spatial) : 0.f;
      float4* dst = reinterpret_cast<float4*>(patch + pos * kSlots);
      auto t = [](float x) { return __uint_as_float(tf32_bits(x)); };
      dst[0] = make_float4(t(v[0]), t(v[4]), t(v[1]), t(v[5]));  // slots 0-3: channels 0 4 1 5
      dst[1] = make_float4(t(v[2]), t(v[6]), t(v[3]), t(v[7]));  // slots 4-7: channels 2 6 3 7
    }
    const float4* wsrc =
        reinterpret_cast<const float4*>(wt + ((int64_t(group) * chunks + chunk) * K3 * co_pad + co0) * kSlots);
    float4 wv[kWIters];  // float4s tid + k*kThreads of the chunk's (tap, co, slot) weights
#pragma unroll
    for (int k = 0; k < kWIters; ++k) {
      const int i = tid + k * kThreads, tap = i / (kCoTile * kSlots / 4), q = i % (kCoTile * kSlots / 4);
      if (i < kW4) wv[k] = __ldg(wsrc + int64_t(tap) * co_pad * kSlots / 4 + q);
    }
#pragma unroll
    for (int k = 0; k < kWIters; ++k)
      if (tid + k * kThreads < kW4) reinterpret_cast<float4*>(w_s)[tid + k * kThreads] = wv[k];
    __syncthreads();

#pragma unroll
    for (int a = 0; a < SP; ++a)
#pragma unroll
      for (int b = 0; b < SP; ++b)
#pragma unroll
        for (int c = 0; c < SP; ++c) {
          // A fragment at input offset (a, b, c): cells gq and gq + 8 of row `warp`, channels (tq, tq+4).
          const float* ap = patch + ((a * PR + warp + b) * PC + c + gq) * kSlots + 2 * tq;
          const float2 lo = *reinterpret_cast<const float2*>(ap);
          const float2 hi = *reinterpret_cast<const float2*>(ap + 8 * kSlots);
          const uint2 a_lo{__float_as_uint(lo.x), __float_as_uint(lo.y)};  // (a0, a2)
          const uint2 a_hi{__float_as_uint(hi.x), __float_as_uint(hi.y)};  // (a1, a3)
#pragma unroll
          for (int rd = 0; rd < S; ++rd)
#pragma unroll
            for (int kd = 0; kd < K; ++kd) {
              if (!T::meets(rd, kd) || (rd + PAD - kd) / S - T::kLo != a) continue;
#pragma unroll
              for (int rh = 0; rh < S; ++rh)
#pragma unroll
                for (int kh = 0; kh < K; ++kh) {
                  if (!T::meets(rh, kh) || (rh + PAD - kh) / S - T::kLo != b) continue;
#pragma unroll
                  for (int rw = 0; rw < S; ++rw)
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                      if (!T::meets(rw, kw) || (rw + PAD - kw) / S - T::kLo != c) continue;
                      const int tap = (kd * K + kh) * K + kw, cls = (rd * S + rh) * S + rw;
#pragma unroll
                      for (int j = 0; j < kNTiles; ++j) {
                        // B fragment: channels (tq, tq+4) of output channel 8j + gq, this tap.
                        const float2 bv =
                            *reinterpret_cast<const float2*>(w_s + (tap * kCoTile + 8 * j + gq) * kSlots + 2 * tq);
                        mma_tf32(acc[cls][j], a_lo, a_hi, uint2{__float_as_uint(bv.x), __float_as_uint(bv.y)});
                      }
                    }
                }
            }
        }
  }

  // Epilogue: bias, clamp, exp(z - shift); store (WriteExp: e, WriteFinal: e * factor) and/or sum.
  // A thread's outputs lie at fixed offsets from its first one: the bounds and offsets are worked
  // out once per axis, not once per output (the exp and the stores are what remain).
  const int ch = ch0 + warp, W = g.out[2];
  const int64_t HW = int64_t(g.out[1]) * W;
  const int64_t first = (int64_t(S * cd) * g.out[1] + S * ch) * W + S * (cw0 + gq);  // (od, oh, ow) of class 0, half 0
  bool d_ok[S], h_ok[S], w_ok[2][S];
#pragma unroll
  for (int r = 0; r < S; ++r) {
    d_ok[r] = S * cd + r < g.out[0], h_ok[r] = S * ch + r < g.out[1];
#pragma unroll
    for (int half = 0; half < 2; ++half) w_ok[half][r] = S * (cw0 + gq + 8 * half) + r < W;
  }
  float part[kNTiles][2] = {};
#pragma unroll
  for (int j = 0; j < kNTiles; ++j)
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int col = co0 + 8 * j + 2 * tq + q;
      if (col >= g.out_per_group) continue;
      const int c = group * g.out_per_group + col;
      const int64_t row = int64_t(n) * g.out_channels + c;
      const float bc = bias[c], f = M == Mode::WriteFinal ? factor[row] : 0.f;
      float* base = out + row * g.spatial + first;
#pragma unroll
      for (int rd = 0; rd < S; ++rd)
#pragma unroll
        for (int rh = 0; rh < S; ++rh) {
          if (!d_ok[rd] || !h_ok[rh]) continue;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            float e[S];
#pragma unroll
            for (int rw = 0; rw < S; ++rw) {
              const float z = acc[(rd * S + rh) * S + rw][j][2 * half + q] + bc;
              e[rw] = w_ok[half][rw] ? expf(clamp_like_torch(z, g.clamp_lo, g.clamp_hi) - shift) : 0.f;
              part[j][q] += e[rw];
            }
            if constexpr (M == Mode::SumOnly) continue;
            const float scale = M == Mode::WriteFinal ? f : 1.f;
            float* dst = base + rd * HW + rh * W + 8 * S * half;
            if (S == 2 && W % 2 == 0 && w_ok[half][0]) {  // ow even and W even: both phases, one 8-byte store
              *reinterpret_cast<float2*>(dst) = make_float2(e[0] * scale, e[S - 1] * scale);
            } else {
#pragma unroll
              for (int rw = 0; rw < S; ++rw)
                if (w_ok[half][rw]) dst[rw] = e[rw] * scale;
            }
          }
        }
    }
  if constexpr (M != Mode::WriteFinal) {
    // Sum over the 8 lanes that share tq (the cells), then over the warps in a fixed order.
#pragma unroll
    for (int j = 0; j < kNTiles; ++j)
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        float s = part[j][q];
        for (int offset = 4; offset < 32; offset <<= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
        if (gq == 0) red[warp][8 * j + 2 * tq + q] = s;
      }
    __syncthreads();
    if (tid < kCoTile && co0 + tid < g.out_per_group) {
      float s = 0.f;
      for (int w = 0; w < kWarps; ++w) s += red[w][tid];
      const int64_t row = int64_t(n) * g.out_channels + group * g.out_per_group + co0 + tid;
      partials[row * gridDim.x + blockIdx.x] = s;
    }
  }
}

using Kernel = void (*)(Geometry, const float*, const float*, int, const float*, float, const float*, float*, float*);
struct Path {
  int stride = 0;  // 0: rung 06's gather
  Kernel first = nullptr, second = nullptr;  // second == nullptr: the rescale follows
};

template <int S, int K, int PAD>
Path tiled(const Geometry& g) {
  const bool rescale = !P38_RUNG08_RECOMPUTE && g.spatial % 4 == 0;  // rescale4 moves float4s
  if (rescale) return {S, mma_subpixel_conv<S, K, PAD, Mode::WriteExp>, nullptr};
  return {S, mma_subpixel_conv<S, K, PAD, Mode::SumOnly>, mma_subpixel_conv<S, K, PAD, Mode::WriteFinal>};
}

/// Rung 07's instantiated set (stride, kernel_size, padding the same on every axis, dilation 1),
/// when this device runs the kernel's TF32 mma; else the gather.
Path choose(const Problem38& p) {
  const auto& c = p.conv;
  const bool cubic = c.kernel_size == Triple::cube(c.kernel_size.d) && c.stride == Triple::cube(c.stride.d) &&
                     c.padding == Triple::cube(c.padding.d) && c.dilation == Triple::cube(1);
  if (!cubic) return {};
  const Geometry g = make_geometry(p);
  const int64_t s = c.stride.d, k = c.kernel_size.d, pad = c.padding.d;
  Path path;
  if (s == 2 && k == 3 && pad == 1) path = tiled<2, 3, 1>(g);
  if (s == 2 && k == 3 && pad == 0) path = tiled<2, 3, 0>(g);
  if (s == 1 && k == 3 && pad == 1) path = tiled<1, 3, 1>(g);
  if (path.stride && !tf32_mma_in(path.first)) return {};
  return path;
}

int64_t co_pad(const Geometry& g) { return (g.out_per_group + kCoTile - 1) / kCoTile * kCoTile; }

/// Spatial tiles of the tiled path: grid.x, and the partials per row.
int64_t tiles(const Geometry& g, int S) {
  const int64_t cd = (g.out[0] + S - 1) / S, ch = (g.out[1] + S - 1) / S, cw = (g.out[2] + S - 1) / S;
  return cd * ((ch + kRows - 1) / kRows) * ((cw + kCellsW - 1) / kCellsW);
}

/// pooled | partials (rows x tiles) | factor (rows) | packed weights; the gather uses rung 06's.
size_t packed_bytes(const Geometry& g) {
  const int64_t chunks = (g.in_per_group + kCi - 1) / kCi;
  return aligned_bytes(size_t(g.groups * chunks * g.taps * co_pad(g) * kSlots) * 4);
}
size_t workspace(const Problem38& p) {
  const Geometry g = make_geometry(p);
  const Path path = choose(p);
  if (!path.stride) return FusedWorkspace::bytes(g);
  return pooled_bytes(g) + aligned_bytes(size_t(g.rows * tiles(g, path.stride)) * 4) +
         aligned_bytes(size_t(g.rows) * 4) + packed_bytes(g);
}

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  const Path path = choose(a.problem);
  a.mark("fused");
  if (!path.stride) {
    const FusedWorkspace w(g, a.workspace);
    launch_avg_pool3d(g, a.in.x, w.pooled, a.stream);
    launch_gather_recompute(g, w, a.in, a.out, a.stream);
    return;
  }
  const int64_t parts = tiles(g, path.stride);
  char* ws = static_cast<char*>(a.workspace);
  float* pooled = reinterpret_cast<float*>(ws);
  float* partials = reinterpret_cast<float*>(ws + pooled_bytes(g));
  float* factor = reinterpret_cast<float*>(ws + pooled_bytes(g) + aligned_bytes(size_t(g.rows * parts) * 4));
  float* wt = reinterpret_cast<float*>(ws + pooled_bytes(g) + aligned_bytes(size_t(g.rows * parts) * 4) +
                                       aligned_bytes(size_t(g.rows) * 4));
  const int cp = int(co_pad(g));
  const int64_t packed = int64_t(packed_bytes(g) / 4);
  pack_weights<<<grid_for(packed < (int64_t(1) << 30) ? packed : (int64_t(1) << 30), 256, "pack_weights"), 256, 0,
                 a.stream>>>(g, cp, a.in.weight, wt);
  CUDA_CHECK_LAUNCH("pack_weights");
  launch_avg_pool3d(g, a.in.x, pooled, a.stream);
  const int64_t grid_y = int64_t(g.batch) * g.groups * (cp / kCoTile);
  if (grid_y > 65535) {
    std::ostringstream m;
    m << "rung 08: batch x groups x channel tiles = " << grid_y << " exceeds the grid's y limit of 65535";
    throw std::runtime_error(m.str());
  }
  const dim3 grid(grid_for(parts, 1, "mma_subpixel_conv"), unsigned(grid_y));
  path.first<<<grid, kThreads, 0, a.stream>>>(g, pooled, wt, cp, a.in.bias, g.clamp_hi, nullptr, a.out, partials);
  CUDA_CHECK_LAUNCH("mma_subpixel_conv (first pass)");
  row_factor<<<capped_grid(g.rows), 256, 0, a.stream>>>(g, partials, parts, a.in.scale, factor);
  CUDA_CHECK_LAUNCH("row_factor");
  if (path.second) {
    path.second<<<grid, kThreads, 0, a.stream>>>(g, pooled, wt, cp, a.in.bias, g.clamp_hi, factor, a.out, partials);
    CUDA_CHECK_LAUNCH("mma_subpixel_conv (second pass)");
  } else {
    launch_rescale4(g, factor, a.out, a.stream);  // tiled() chose the rescale only where S % 4 == 0
  }
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME,
                      "implicit GEMM per phase class on TF32 mma.sync; sum, then recompute and write once",
                      nullptr, workspace, run, shift_unsupported, true, P38_RUNG08_RECOMPUTE ? 2 : 1, Precision::Tf32};
  return r;
}

}  // namespace ladder::p38
