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
//  - the pooled input and the weights are rounded to TF32 with cvt.rna (to nearest, as cuDNN
//    rounds): the pooled values as they are staged, the weights once per run, into the layout the
//    B fragments read;
//  - the plan stays rung 07's: write exp(z - hi), sum, rescale. (Measured on an H100 at the
//    KernelBench size, whole rung: 8 warps a block with the rescale 2.08 ms, with rung 06's
//    recompute 2.28; 16 warps 2.20 and 2.56. -DP38_RUNG08_RECOMPUTE=1 and -DP38_RUNG08_WARPS=16
//    build the others; outputs whose S is not a multiple of 4 take the recompute, as rescale4
//    moves float4s.)
// Other parameters, and code below sm_80 (no TF32 mma), take rung 06's gather, still fused.
#include <sstream>
#include <stdexcept>

#include "../../device/fused.cuh"
#include "../../device/subpixel_taps.cuh"  // Taps
#include "../../rung.hpp"
#include "mma_tf32.cuh"  // mma_tf32, tf32_bits, tf32_mma_in
#include "rung_id.hpp"   // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "todo.cuh"      // ladder_todo: the handout's stubs

#ifndef P38_RUNG08_RECOMPUTE
#define P38_RUNG08_RECOMPUTE 0  // 1: sum, then recompute and write once (rung 06's plan)
#endif

namespace ladder::p38 {
namespace {

#ifndef P38_RUNG08_WARPS
#define P38_RUNG08_WARPS 8  // warps per block: 8 (two blocks an SM) or 16 (one)
#endif
constexpr int kWarps = P38_RUNG08_WARPS, kThreads = 32 * kWarps;
constexpr int kBlocksPerSm = 16 / kWarps;  // 16 warps an SM at 128 registers a thread
constexpr int kCellsW = 16;        // one m16 tile: 16 cells along w
constexpr int kRows = kWarps;      // cell rows per block: warp w owns row w
constexpr int kCoTile = 16;        // output channels per block: two n8 tiles
constexpr int kNTiles = kCoTile / 8;
constexpr int kCi = 8;             // input channels per step: the mma's k
constexpr int kSlots = 8;          // input channels of a chunk, as pack_weights orders them

enum class Mode { WriteExp, SumOnly, WriteFinal };

/// The weights, TF32-rounded, as the B fragments read them: per (group, chunk of 8 input channels,
/// tap, tile of kCoTile channels) 128 floats (gq 8, tq 4, e 4), where lane 4*gq + tq finds its B
/// fragments of both n8 tiles in one float4: e = (ci tq, co gq), (ci tq+4, co gq), (ci tq, co 8+gq),
/// (ci tq+4, co 8+gq), that is (b0, b1) of tile 0 then of tile 1. Zero past in_per_group and
/// out_per_group (co padded to co_pad, a multiple of kCoTile). weight: (in_channels, out_per_group,
/// K^3) fp32. One thread per packed element.
__global__ void pack_weights(Geometry g, int co_pad, const float* __restrict__ weight, float* __restrict__ wt) {
  // BEGIN SOLUTION
  // STUB: ladder_todo("p38-08.1", "pack_weights: wt[i], a weight in the B fragments' order, rounded to TF32");
  // STUB: ladder_unused(g, co_pad, weight, wt);
  const int K3 = g.taps, chunks = (g.in_per_group + kCi - 1) / kCi;
  const int64_t total = int64_t(g.groups) * chunks * K3 * co_pad * kSlots;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int e = int(i % 4), tq = int(i / 4 % 4), gq = int(i / 16 % 8);
    const int64_t tile_index = i / (kCoTile * kSlots);  // ((group * chunks + chunk) * K3 + tap) * tiles + tile
    const int tiles = co_pad / kCoTile, tile = int(tile_index % tiles), tap = int(tile_index / tiles % K3);
    const int64_t gc = tile_index / (int64_t(tiles) * K3);  // group * chunks + chunk
    const int ci = int(gc % chunks) * kCi + tq + 4 * (e % 2), co = tile * kCoTile + gq + 8 * (e / 2);
    const int group = int(gc / chunks);
    float v = 0.f;
    if (ci < g.in_per_group && co < g.out_per_group)
      v = weight[(int64_t(group * g.in_per_group + ci) * g.out_per_group + co) * K3 + tap];
    wt[i] = __uint_as_float(tf32_bits(v));
  }
  // END SOLUTION
}
static_assert(kNTiles == 2 && kSlots * kCoTile == 128, "pack_weights' float4 holds the B fragments of two n8 tiles");

/// Block (kThreads): kRows x kCellsW cells at one cell depth cd, for one sample and kCoTile channels
/// of one group; warp w owns cell row w: one m16 tile (16 cells along w) by kNTiles n8 tiles.
/// grid.x: spatial tiles (also the partials per row); grid.y: (sample, group, channel tile).
/// pooled (batch, in_channels, pooled D*H*W); wt from pack_weights; out and partials as rung 07's.
template <int S, int K, int PAD, Mode M>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    mma_subpixel_conv(Geometry g, const float* __restrict__ pooled, const float* __restrict__ wt, int co_pad,
                      const float* __restrict__ bias, float shift, const float* __restrict__ factor,
                      float* __restrict__ out, float* __restrict__ partials) {
  using T = Taps<S, K, PAD>;
  constexpr int K3 = K * K * K, SP = T::span, PR = kRows + SP - 1, NX = 8 + SP - 1, C = S * S * S;
  // patch: (SP depths, PR rows, NX column pairs, 4 tq, 4) of the chunk's pooled input, TF32: entry
  //        (a, r, x, tq) = (col x ch tq, col x+8 ch tq, col x ch tq+4, col x+8 ch tq+4), the A
  //        fragment (a0, a1, a2, a3) of lane (x - c, tq) at column offset c, in one 16-byte load
  // w_s:   (K3 taps, 32 lanes, 4) of the chunk's weights, TF32, pack_weights' order
  __shared__ __align__(16) float patch[SP * PR * NX * 16];
  __shared__ __align__(16) float w_s[K3 * kCoTile * kSlots];

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
  // Staging: a thread owns up to kPosIters entries (a, r, x) and loads their 16 values at once
  // (8 channels of columns x and x + 8, all in flight), then stores them rounded to TF32 as four
  // float4s. A column's offset is the same in every chunk: worked out once (-1: outside the input).
  constexpr int kPos = SP * PR * NX, kPosIters = (kPos + kThreads - 1) / kThreads;
  constexpr int kW4 = K3 * kCoTile * kSlots / 4, kWIters = (kW4 + kThreads - 1) / kThreads;
  int src[kPosIters][2];
#pragma unroll
  for (int k = 0; k < kPosIters; ++k) {
    const int pos = tid + k * kThreads, x = pos % NX, r = pos / NX % PR, a = pos / (NX * PR);
    const int id = cd + T::kLo + a, ih = ch0 + T::kLo + r;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int iw = cw0 + T::kLo + x + 8 * h;
      const bool inside = unsigned(id) < unsigned(g.pooled[0]) && unsigned(ih) < unsigned(g.pooled[1]) &&
                          unsigned(iw) < unsigned(g.pooled[2]);
      src[k][h] = inside ? (id * g.pooled[1] + ih) * g.pooled[2] + iw : -1;  // a plane fits in an int (make_geometry)
    }
  }
  for (int chunk = 0; chunk < chunks; ++chunk) {
    __syncthreads();  // the previous chunk's tiles are no longer read
    const float* chunk_in = in_group + int64_t(chunk) * kCi * g.pooled_spatial;
#pragma unroll
    for (int k = 0; k < kPosIters; ++k) {
      const int pos = tid + k * kThreads;
      if (pos >= kPos) break;
      float v[2][kCi];  // (column x | x + 8, channel)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int cl = 0; cl < kCi; ++cl)
          v[h][cl] = src[k][h] >= 0 && chunk * kCi + cl < g.in_per_group
                         ? __ldg(chunk_in + cl * g.pooled_spatial + src[k][h])
                         : 0.f;
      float4* dst = reinterpret_cast<float4*>(patch + pos * 16);
      // BEGIN SOLUTION
      // STUB: if (chunk == 0 && k == 0) ladder_todo("p38-08.2", "staging: t(x) rounds x to TF32 (cvt.rna)");
      // STUB: auto t = [](float x) { return x; };
      auto t = [](float x) { return __uint_as_float(tf32_bits(x)); };
      // END SOLUTION
#pragma unroll
      for (int q = 0; q < 4; ++q) dst[q] = make_float4(t(v[0][q]), t(v[1][q]), t(v[0][q + 4]), t(v[1][q + 4]));
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

    // BEGIN SOLUTION
    // STUB: if (chunk == 0) ladder_todo("p38-08.3", "the chunk's mma: each offset's A fragment, then its taps");
    // STUB: ladder_unused(patch, w_s, warp, lane, gq, tq, acc);
#pragma unroll
    for (int a = 0; a < SP; ++a)
#pragma unroll
      for (int b = 0; b < SP; ++b)
#pragma unroll
        for (int c = 0; c < SP; ++c) {
          // A fragment at input offset (a, b, c): (a0, a1, a2, a3) = cells gq, gq + 8 of row `warp`,
          // channels tq and tq + 4.
          const uint4 af = *reinterpret_cast<const uint4*>(patch + ((a * PR + warp + b) * NX + c + gq) * 16 + tq * 4);
          const uint2 a_lo{af.x, af.z}, a_hi{af.y, af.w};  // mma_tf32 passes (lo.x, hi.x, lo.y, hi.y)
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
                      // B fragments of both n8 tiles: (ci tq, tq+4) of channels gq and 8 + gq, this tap.
                      const float4 bv = *reinterpret_cast<const float4*>(w_s + tap * kCoTile * kSlots + lane * 4);
                      mma_tf32(acc[cls][0], a_lo, a_hi, uint2{__float_as_uint(bv.x), __float_as_uint(bv.y)});
                      mma_tf32(acc[cls][1], a_lo, a_hi, uint2{__float_as_uint(bv.z), __float_as_uint(bv.w)});
                    }
                }
            }
        }
    // END SOLUTION
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
    // Sum over the 8 lanes that share tq (the cells), then over the warps in a fixed order, in
    // red (kWarps, kCoTile), which reuses the patch once every warp is past its last mma.
    static_assert(kWarps * kCoTile <= SP * PR * NX * 16, "red fits in the patch");
    float(*red)[kCoTile] = reinterpret_cast<float(*)[kCoTile]>(patch);
    __syncthreads();
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
                      "implicit GEMM per phase class on TF32 mma.sync (rounded with cvt.rna), rung 07's plan",
                      nullptr, workspace, run, shift_unsupported, true, P38_RUNG08_RECOMPUTE ? 2 : 1, Precision::Tf32};
  return r;
}

}  // namespace ladder::p38
