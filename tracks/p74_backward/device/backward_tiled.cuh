// Rung 09's tiled gradients for the KernelBench geometry family (rung 09 introduces them; rung 11
// takes them below sm_80, where it has no TF32 mma): grad_x as a gather over the 8 pooling windows
// around each input position, grad_weight as per-chunk partials of 27 register accumulators per
// (ci, co) with the routed gradient G staged in shared memory, then a fixed-order sum of the
// chunks (deterministic). Both FP32 FMA. rungs/09_tiled_grads/tiled_grads.cu explains the
// geometry they rely on; the kernels are unchanged from that rung.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../rung.hpp"
#include "backward.cuh"
#include "common/toolkit/cuda_check.hpp"
#include "geometry.hpp"

namespace ladder::p74::tiled {  // the names rung 09 gave them, kept apart from the including rung's

constexpr int kTaps = 27;  // 3x3x3

/// The 8 pooling windows {i-1, i}^3 around input position s (flat within one plane of x): win[b],
/// b = (bd*2 + bh)*2 + bw with bit 0 for window i-1 and 1 for window i along that axis, is the
/// window's flat index within one plane of the pool output, or -1 outside it (or if !active).
static __device__ __forceinline__ void windows_around(const Geometry& g, int s, bool active, int (&win)[8]) {
  const int id = s / (g.in[1] * g.in[2]), ih = (s / g.in[2]) % g.in[1], iw = s % g.in[2];
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    const int qd = id - 1 + (b >> 2), qh = ih - 1 + ((b >> 1) & 1), qw = iw - 1 + (b & 1);
    const bool inside = qd >= 0 && qd < g.out[0] && qh >= 0 && qh < g.out[1] && qw >= 0 && qw < g.out[2];
    win[b] = active && inside ? (qd * g.out[1] + qh) * g.out[2] + qw : -1;
  }
}

// ---- grad_x: a gather over the 8 windows, in_channels in registers.
constexpr int kXBlock = 128;          // input positions per block
constexpr int kCiTile = 16;           // in_channels accumulated per thread (a multiple of 4)
constexpr int kCoStage = 8;           // out_channels whose weights are staged at once
constexpr int kWPitch = kCiTile + 4;  // 80-byte rows: float4 reads of 8 different taps hit 8 bank groups

/// Blocks b = (n*ci_tiles + tile)*spatial_blocks + sb; thread: input position s = sb*kXBlock +
/// threadIdx.x of sample n, in_channels tile*kCiTile .. + kCiTile. grad_x[n, ci, s] = sum over co
/// (ascending) and the 8 windows (b order) that feed a tap k of weight[ci, co, k] * g_y[n, co,
/// window]: deterministic. Weights staged per kCoStage channels as w_s[co][k][ci].
static __global__ void __launch_bounds__(kXBlock)
    grad_x_tiled(Geometry g, const float* __restrict__ weight, const int32_t* __restrict__ argmax,
                 const float* __restrict__ g_y, float* __restrict__ grad_x, int spatial_blocks, int ci_tiles) {
  __shared__ __align__(16) float w_s[kCoStage * kTaps * kWPitch];
  const int64_t nt = blockIdx.x / spatial_blocks;
  const int s = int(blockIdx.x % spatial_blocks) * kXBlock + int(threadIdx.x);
  const int ci0 = int(nt % ci_tiles) * kCiTile, n = int(nt / ci_tiles);
  const bool active = s < g.in_spatial;
  int win[8];
  windows_around(g, active ? s : 0, active, win);
  float acc[kCiTile];
#pragma unroll
  for (int i = 0; i < kCiTile; ++i) acc[i] = 0.f;

  for (int co0 = 0; co0 < g.out_channels; co0 += kCoStage) {
    const int staged = min(kCoStage, g.out_channels - co0);
    __syncthreads();  // every thread is done with the previous stage
    // Consecutive threads read consecutive (co, k) of one ci: coalesced; zeros past the tails.
    for (int t = threadIdx.x; t < kCiTile * kCoStage * kTaps; t += kXBlock) {
      const int k = t % kTaps, co = (t / kTaps) % kCoStage, ci = t / (kTaps * kCoStage);
      float v = 0.f;
      if (co < staged && ci0 + ci < g.in_channels)
        v = weight[(int64_t(ci0 + ci) * g.out_channels + co0 + co) * kTaps + k];
      w_s[(co * kTaps + k) * kWPitch + ci] = v;
    }
    __syncthreads();
    for (int c = 0; c < staged; ++c) {
      const int64_t plane = (int64_t(n) * g.out_channels + co0 + c) * g.out_spatial;
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        if (win[b] < 0) continue;
        const int off = argmax[plane + win[b]];  // (jd*2 + jh)*2 + jw
        if (off < 0 || off > 7) continue;        // not a window offset: nothing to route
        const int jd = off >> 2, jh = (off >> 1) & 1, jw = off & 1;
        const bool bd = b & 4, bh = b & 2, bw = b & 1;  // window i (true) or i-1 (false) per axis
        if ((!bd && jd == 0) || (!bh && jh == 0) || (!bw && jw == 0)) continue;  // position 2i-2: not ours
        const int k = ((bd ? 1 + jd : 0) * 3 + (bh ? 1 + jh : 0)) * 3 + (bw ? 1 + jw : 0);
        const float gy = g_y[plane + win[b]];
        const float4* wr = reinterpret_cast<const float4*>(w_s + (c * kTaps + k) * kWPitch);
#pragma unroll
        for (int v = 0; v < kCiTile / 4; ++v) {
          const float4 w4 = wr[v];
          acc[4 * v + 0] += w4.x * gy;
          acc[4 * v + 1] += w4.y * gy;
          acc[4 * v + 2] += w4.z * gy;
          acc[4 * v + 3] += w4.w * gy;
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kCiTile; ++i)
    if (ci0 + i < g.in_channels) grad_x[(int64_t(n) * g.in_channels + ci0 + i) * g.in_spatial + s] = acc[i];
}

// ---- grad_weight: per-chunk partials of 27 register accumulators per (ci, co), then a sum.
constexpr int kPairCi = 16, kPairCo = 16;    // a block's (ci, co) pairs: one per thread
constexpr int kWBlock = kPairCi * kPairCo;   // 256 threads
constexpr int kTile = 16;                    // positions staged at once
constexpr int kGPitch = 28;                  // 27 taps + a zero: 7 float4 per position
constexpr int kGCoPitch = kTile * kGPitch + 4;  // 452 floats: the two co a warp reads sit on different banks
constexpr int64_t kMaxWeightChunks = 256;    // partial sums per weight element, at most
static_assert(kTile * kPairCo == kWBlock && kTile * kPairCi == kWBlock, "one staged value per thread");

/// How rung 09 splits the batch*in_spatial input positions for grad_weight: `chunks` chunks of
/// chunk_len positions (a multiple of kTile; the last may be shorter), each block one chunk
/// and one (ci, co) tile. Depends on the problem only, so the summation order is fixed.
struct WeightChunks {
  int64_t positions, chunk_len;
  int chunks, ci_tiles, co_tiles;
  int64_t blocks() const { return int64_t(chunks) * ci_tiles * co_tiles; }
};
inline WeightChunks weight_chunks(const Geometry& g) {
  WeightChunks w;
  w.positions = int64_t(g.batch) * g.in_spatial;
  const int64_t tiles = (w.positions + kTile - 1) / kTile;
  w.chunk_len = (tiles + kMaxWeightChunks - 1) / kMaxWeightChunks * kTile;
  w.chunks = int((w.positions + w.chunk_len - 1) / w.chunk_len);
  w.ci_tiles = (g.in_channels + kPairCi - 1) / kPairCi;
  w.co_tiles = (g.out_channels + kPairCo - 1) / kPairCo;
  return w;
}

/// Block b = (chunk*ci_tiles + ci_tile)*co_tiles + co_tile, kWBlock threads, thread t owning
/// pair (ci0 + t % kPairCi, co0 + t / kPairCi): for each tile of kTile positions of its chunk,
/// stages x_s[p][ci] and G (g_s[co][p][k], the routed gradient by tap, built from the 8 windows
/// around p), then acc[k] += x_s[p][ci] * g_s[co][p][k]. Writes the 27 sums to
/// partials[chunk][ci][co][k] (one grad_weight-sized slice per chunk). G is dense: most of its
/// entries are exact zeros, which add nothing for finite x.
static __global__ void __launch_bounds__(kWBlock)
    grad_weight_partials(Geometry g, const float* __restrict__ x, const int32_t* __restrict__ argmax,
                         const float* __restrict__ g_y, WeightChunks wc, float* __restrict__ partials) {
  __shared__ __align__(16) float g_s[kPairCo * kGCoPitch];
  __shared__ float x_s[kTile][kPairCi + 1];  // + 1: the staging writes (p varies fastest) spread over banks
  const int co_tile = int(blockIdx.x % wc.co_tiles);
  const int64_t rest = blockIdx.x / wc.co_tiles;
  const int ci0 = int(rest % wc.ci_tiles) * kPairCi, co0 = co_tile * kPairCo, chunk = int(rest / wc.ci_tiles);
  const int t = threadIdx.x;
  const int stage_p = t % kTile, stage_row = t / kTile;  // staging: position p, and co (for G) or ci (for x)
  const int64_t begin = int64_t(chunk) * wc.chunk_len;
  const int64_t end = begin + wc.chunk_len < wc.positions ? begin + wc.chunk_len : wc.positions;

  float acc[kTaps];
#pragma unroll
  for (int k = 0; k < kTaps; ++k) acc[k] = 0.f;

  for (int64_t p0 = begin; p0 < end; p0 += kTile) {
    const int64_t pos = p0 + stage_p;
    const bool valid = pos < end;
    const int n = valid ? int(pos / g.in_spatial) : 0;
    const int s = valid ? int(pos - int64_t(n) * g.in_spatial) : 0;
    __syncthreads();  // every thread is done with the previous tile
    {  // G for (stage_p, co0 + stage_row): which tap each of the 8 windows feeds
      const int co = co0 + stage_row;
      int win[8];
      windows_around(g, s, valid && co < g.out_channels, win);
      const int64_t plane = (int64_t(n) * g.out_channels + co) * g.out_spatial;
      int off[8];
      float gy[8];
#pragma unroll
      for (int b = 0; b < 8; ++b) {
        off[b] = win[b] >= 0 ? argmax[plane + win[b]] : -1;
        gy[b] = win[b] >= 0 ? g_y[plane + win[b]] : 0.f;
      }
      float* row = g_s + stage_row * kGCoPitch + stage_p * kGPitch;
#pragma unroll
      for (int k = 0; k < kTaps; ++k) {
        const int kd = k / 9, kh = (k / 3) % 3, kw = k % 3;
        const int b = ((kd != 0) * 2 + (kh != 0)) * 2 + (kw != 0);     // tap 0: window i-1, else window i
        const int need = ((kd != 1) * 2 + (kh != 1)) * 2 + (kw != 1);  // tap 1: offset 0, else offset 1
        row[k] = off[b] == need ? gy[b] : 0.f;
      }
      row[kTaps] = 0.f;
    }
    {  // x for (stage_p, ci0 + stage_row): consecutive threads read consecutive positions
      const int ci = ci0 + stage_row;
      x_s[stage_p][stage_row] =
          valid && ci < g.in_channels ? x[(int64_t(n) * g.in_channels + ci) * g.in_spatial + s] : 0.f;
    }
    __syncthreads();
    const int my_ci = t % kPairCi, my_co = t / kPairCi;
#pragma unroll 4
    for (int p = 0; p < kTile; ++p) {
      const float xv = x_s[p][my_ci];
      const float4* gr = reinterpret_cast<const float4*>(g_s + my_co * kGCoPitch + p * kGPitch);
#pragma unroll
      for (int v = 0; v < kGPitch / 4; ++v) {
        const float4 q = gr[v];
        acc[4 * v] += xv * q.x;
        acc[4 * v + 1] += xv * q.y;
        acc[4 * v + 2] += xv * q.z;
        if (4 * v + 3 < kTaps) acc[4 * v + 3] += xv * q.w;
      }
    }
  }
  const int ci = ci0 + t % kPairCi, co = co0 + t / kPairCi;
  if (ci >= g.in_channels || co >= g.out_channels) return;
  float* dst = partials + int64_t(chunk) * g.weight_elems + (int64_t(ci) * g.out_channels + co) * kTaps;
#pragma unroll
  for (int k = 0; k < kTaps; ++k) dst[k] = acc[k];
}

/// One thread per weight element: grad_weight[w] = sum over chunks, in chunk order, of
/// partials[chunk][w]. Consecutive threads read consecutive addresses.
static __global__ void weight_chunk_sums(int64_t weight_elems, int chunks, const float* __restrict__ partials,
                                  float* __restrict__ grad_weight) {
  const int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= weight_elems) return;
  float sum = 0.f;
  for (int c = 0; c < chunks; ++c) sum += partials[int64_t(c) * weight_elems + w];
  grad_weight[w] = sum;
}

inline size_t weight_partials_bytes(const Geometry& g) {
  return backward_aligned(size_t(weight_chunks(g).chunks) * size_t(g.weight_elems) * sizeof(float));
}

/// Rung 09's grad_weight: the partials into `partials` (weight_partials_bytes(g) of scratch),
/// then their in-order sum into a.grad_weight. g_y: the pool-sized routed gradient. Throws
/// CudaError on a failed launch.
inline void launch_tiled_grad_weight(const Geometry& g, const BackwardArgs& a, const float* g_y, float* partials) {
  const WeightChunks wc = weight_chunks(g);
  grad_weight_partials<<<grid_for(wc.blocks(), 1, "grad_weight_partials"), kWBlock, 0, a.stream>>>(
      g, a.in.x, a.argmax, g_y, wc, partials);
  CUDA_CHECK_LAUNCH("grad_weight_partials");
  weight_chunk_sums<<<grid_for(g.weight_elems, 256, "weight_chunk_sums"), 256, 0, a.stream>>>(
      g.weight_elems, wc.chunks, partials, a.grad_weight);
  CUDA_CHECK_LAUNCH("weight_chunk_sums");
}

/// Rung 09's grad_x into a.grad_x, from g_y (pool-sized) and the argmax. Throws CudaError.
inline void launch_tiled_grad_x(const Geometry& g, const BackwardArgs& a, const float* g_y) {
  const int spatial_blocks = int((g.in_spatial + kXBlock - 1) / kXBlock);
  const int ci_tiles = (g.in_channels + kCiTile - 1) / kCiTile;
  const int64_t x_blocks = int64_t(g.batch) * ci_tiles * spatial_blocks;
  grad_x_tiled<<<grid_for(x_blocks, 1, "grad_x_tiled"), kXBlock, 0, a.stream>>>(g, a.in.weight, a.argmax, g_y,
                                                                                 a.grad_x, spatial_blocks, ci_tiles);
  CUDA_CHECK_LAUNCH("grad_x_tiled");
}

}  // namespace ladder::p74::tiled
