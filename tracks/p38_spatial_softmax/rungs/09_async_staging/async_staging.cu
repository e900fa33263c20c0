// Rung 09: the staging overlaps the mma. Rung 08's profile: the convolution kernel issues about
// one instruction in two cycles with four warps per scheduler, waiting on its loads. Each chunk of 8
// input channels is loaded, then stored, then computed, with two barriers between: nothing hides
// the loads' latency but the other block on the SM.
// What changed from rung 08 (whose tiles, fragments and plan it keeps):
//  - cp.async double buffer: chunk k+1's copies (global -> shared, no registers) are issued before
//    chunk k's mma run, into the other of two buffers; a thread waits only for its own chunk k copies
//    (cp.async.wait_group 1), then one barrier makes everyone's visible;
//  - out-of-bounds inputs are zero-filled by the copy itself (source size 0);
//  - cp.async cannot round, so the pooled values are rounded to TF32 (cvt.rna) where the A
//    fragment is loaded; the weights come rounded from pack_weights, as in rung 08;
//  - the two buffers take 2 x 33,280 bytes of dynamic shared memory at stride 2 (a block: 8 warps).
#include <sstream>
#include <stdexcept>

#include "../../device/fused.cuh"
#include "../../device/subpixel_taps.cuh"  // Taps
#include "../../rung.hpp"
#include "mma_tf32.cuh"  // mma_tf32, tf32_bits, tf32_mma_in
#include "stages/lib/cp_async.cuh"  // cp_async_f32, cp_async_16, commit, wait (stage 09)
#include "rung_id.hpp"   // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

#ifndef P38_RUNG09_RECOMPUTE
#define P38_RUNG09_RECOMPUTE 0  // 1: sum, then recompute and write once (rung 06's plan)
#endif

namespace ladder::p38 {
namespace {

#ifndef P38_RUNG09_WARPS
#define P38_RUNG09_WARPS 8  // warps per block: 8 (two blocks an SM) or 16 (one)
#endif
constexpr int kWarps = P38_RUNG09_WARPS, kThreads = 32 * kWarps;
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
}
static_assert(kNTiles == 2 && kSlots * kCoTile == 128, "pack_weights' float4 holds the B fragments of two n8 tiles");

/// Block (kThreads): kRows x kCellsW cells at one cell depth cd, for one sample and kCoTile channels
/// of one group; warp w owns cell row w: one m16 tile (16 cells along w) by kNTiles n8 tiles.
/// grid.x: spatial tiles (also the partials per row); grid.y: (sample, group, channel tile).
/// pooled (batch, in_channels, pooled D*H*W); wt from pack_weights; out and partials as rung 07's.
template <int S, int K, int PAD, Mode M>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    async_subpixel_conv(Geometry g, const float* __restrict__ pooled, const float* __restrict__ wt, int co_pad,
                      const float* __restrict__ bias, float shift, const float* __restrict__ factor,
                      float* __restrict__ out, float* __restrict__ partials) {
  using T = Taps<S, K, PAD>;
  constexpr int K3 = K * K * K, SP = T::span, PR = kRows + SP - 1, NX = 8 + SP - 1, C = S * S * S;
  // patch: (SP depths, PR rows, NX column pairs, 4 tq, 4) of the chunk's pooled input, fp32: entry
  //        (a, r, x, tq) = (col x ch tq, col x+8 ch tq, col x ch tq+4, col x+8 ch tq+4), the A
  //        fragment (a0, a1, a2, a3) of lane (x - c, tq) at column offset c, in one 16-byte load
  // w_s:   (K3 taps, 32 lanes, 4) of the chunk's weights, TF32, pack_weights' order
  // Two buffers of each (dynamic shared memory, smem_bytes<S, K, PAD>()): buffer k % 2 holds chunk k.
  // The patch holds the pooled values as loaded (fp32); they are rounded to TF32 at the fragment.
  constexpr int kPatchFloats = SP * PR * NX * 16, kWFloats = K3 * kCoTile * kSlots;
  extern __shared__ __align__(16) float smem[];
  auto patch_buf = [&](int buf) { return smem + buf * kPatchFloats; };
  auto w_buf = [&](int buf) { return smem + 2 * kPatchFloats + buf * kWFloats; };

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
  // Staging: a thread owns up to kPosIters entries (a, r, x) and copies their 16 values (8 channels
  // of columns x and x + 8). A column's offset is the same in every chunk: worked out once (-1:
  // outside the input).
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
  // Issues chunk `chunk`'s copies into buffer `buf` and commits them as one group. Entry (pos, q)
  // of the patch is (col x ch q, col x+8 ch q, col x ch q+4, col x+8 ch q+4), as in rung 08.
  auto issue = [&](int chunk, int buf) {
    const float* chunk_in = in_group + int64_t(chunk) * kCi * g.pooled_spatial;
#pragma unroll
    for (int k = 0; k < kPosIters; ++k) {
      const int pos = tid + k * kThreads;
      if (pos >= kPos) break;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int cl = 0; cl < kCi; ++cl) {
          const bool valid = src[k][h] >= 0 && chunk * kCi + cl < g.in_per_group;
          cp_async_f32(patch_buf(buf) + pos * 16 + (cl % 4) * 4 + (cl / 4) * 2 + h,
                       valid ? chunk_in + cl * g.pooled_spatial + src[k][h] : in_group, valid);
        }
    }
    const float* wsrc = wt + ((int64_t(group) * chunks + chunk) * K3 * co_pad + co0) * kSlots;
#pragma unroll
    for (int k = 0; k < kWIters; ++k) {
      const int i = tid + k * kThreads, tap = i / (kCoTile * kSlots / 4), q = i % (kCoTile * kSlots / 4);
      if (i < kW4) cp_async_16(w_buf(buf) + 4 * i, wsrc + int64_t(tap) * co_pad * kSlots + 4 * q);
    }
    cp_async_commit();
  };
  issue(0, 0);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int buf = chunk & 1;
    if (chunk + 1 < chunks) {
      issue(chunk + 1, buf ^ 1);  // in flight while this chunk's mma run
      cp_async_wait<1>();         // this thread's copies of `chunk` have landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // everyone's copies of `chunk` are visible
    const float* patch = patch_buf(buf);
    const float* w_s = w_buf(buf);

#pragma unroll
    for (int a = 0; a < SP; ++a)
#pragma unroll
      for (int b = 0; b < SP; ++b)
#pragma unroll
        for (int c = 0; c < SP; ++c) {
          // A fragment at input offset (a, b, c): (a0, a1, a2, a3) = cells gq, gq + 8 of row `warp`,
          // channels tq and tq + 4.
          const float4 av = *reinterpret_cast<const float4*>(patch + ((a * PR + warp + b) * NX + c + gq) * 16 + tq * 4);
          // rounded here: cp.async copied the fp32 values as they are
          const uint2 a_lo{tf32_bits(av.x), tf32_bits(av.z)}, a_hi{tf32_bits(av.y), tf32_bits(av.w)};
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
    __syncthreads();  // the next issue refills the buffer this chunk read
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
    float(*red)[kCoTile] = reinterpret_cast<float(*)[kCoTile]>(smem);
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
  size_t smem = 0;                           // dynamic shared memory of either kernel: two buffers
};

/// The kernel's two buffers of the patch and of the weights, in bytes.
template <int S, int K, int PAD>
constexpr size_t smem_bytes() {
  constexpr int SP = Taps<S, K, PAD>::span;
  return 2 * (size_t(SP) * (kRows + SP - 1) * (8 + SP - 1) * 16 + size_t(K) * K * K * kCoTile * kSlots) * 4;
}

template <int S, int K, int PAD>
Path tiled(const Geometry& g) {
  const bool rescale = !P38_RUNG09_RECOMPUTE && g.spatial % 4 == 0;  // rescale4 moves float4s
  if (rescale) return {S, async_subpixel_conv<S, K, PAD, Mode::WriteExp>, nullptr, smem_bytes<S, K, PAD>()};
  return {S, async_subpixel_conv<S, K, PAD, Mode::SumOnly>, async_subpixel_conv<S, K, PAD, Mode::WriteFinal>,
          smem_bytes<S, K, PAD>()};
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
    m << "rung 09: batch x groups x channel tiles = " << grid_y << " exceeds the grid's y limit of 65535";
    throw std::runtime_error(m.str());
  }
  const dim3 grid(grid_for(parts, 1, "async_subpixel_conv"), unsigned(grid_y));
  for (Kernel k : {path.first, path.second})
    if (k) CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(path.smem)));
  path.first<<<grid, kThreads, path.smem, a.stream>>>(g, pooled, wt, cp, a.in.bias, g.clamp_hi, nullptr, a.out, partials);
  CUDA_CHECK_LAUNCH("async_subpixel_conv (first pass)");
  row_factor<<<capped_grid(g.rows), 256, 0, a.stream>>>(g, partials, parts, a.in.scale, factor);
  CUDA_CHECK_LAUNCH("row_factor");
  if (path.second) {
    path.second<<<grid, kThreads, path.smem, a.stream>>>(g, pooled, wt, cp, a.in.bias, g.clamp_hi, factor, a.out, partials);
    CUDA_CHECK_LAUNCH("async_subpixel_conv (second pass)");
  } else {
    launch_rescale4(g, factor, a.out, a.stream);  // tiled() chose the rescale only where S % 4 == 0
  }
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME,
                      "rung 08's mma with a cp.async double buffer: chunk k+1's copies in flight during chunk k's mma",
                      nullptr, workspace, run, shift_unsupported, true, P38_RUNG09_RECOMPUTE ? 2 : 1, Precision::Tf32};
  return r;
}

}  // namespace ladder::p38
