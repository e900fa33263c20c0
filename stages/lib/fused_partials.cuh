// What the fused conv+pool stages share (06-09): the grid that splits each (n, channel tile)
// plane into parts, the workspace of per-block partial sums, and the finish kernel that turns
// the partials into pooled and y. No floating-point atomics and no last-block handshake: every
// partial is written once by one block, and a second, small kernel adds them in a fixed order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "logsumexp.hpp"
#include "stage.hpp"
#include "lib/warp_reduce.cuh"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

/// How a fused conv+pool kernel's grid covers the problem. Each (n, co tile) pair owns one
/// plane's `units` work units (pixels or pixel tiles), split evenly into `parts` contiguous
/// ranges, one block each; co_per_tile output channels of one group per block. Blocks are
/// numbered co tile fastest, then part, then n, so blocks that read the same input run at the
/// same time and share it through L2. Every field fits in 32 bits (make_fused_grid checks).
struct FusedGrid {
  int units;               ///< work units per plane
  int units_per_part;      ///< units / parts: part b gets this many units, plus one
  int units_rem;           ///< if b < units % parts = units_rem (no 64-bit division on the GPU)
  int parts;               ///< blocks per (n, co tile) = partial sums per (n, co)
  int co_per_tile;         ///< output channels per block
  int co_tiles_per_group;  ///< ceil((Cout/g) / co_per_tile)
  int co_tiles;            ///< groups * co_tiles_per_group
  unsigned blocks;         ///< batch * co_tiles * parts
};

/// The grid for `units` work units per plane, co_per_tile channels per block and `parts`
/// blocks per (n, co tile) (clamped to [1, units]). Throws std::runtime_error naming `kernel`
/// when the grid exceeds CUDA's limit of 2^31 - 1 blocks.
inline FusedGrid make_fused_grid(const Problem& pr, int64_t units, int64_t co_per_tile, int64_t parts,
                          const char* kernel) {
  constexpr int64_t kLimit = 2147483647;
  FusedGrid g{};
  g.units = int(units);  // < 2^31: validate() bounds out_h * out_w
  parts = std::clamp<int64_t>(parts, 1, std::max<int64_t>(units, 1));
  g.parts = int(parts);
  g.units_per_part = int(units / parts);
  g.units_rem = int(units % parts);
  g.co_per_tile = int(co_per_tile);
  g.co_tiles_per_group = int((pr.out_per_group() + co_per_tile - 1) / co_per_tile);
  const int64_t co_tiles = pr.groups * g.co_tiles_per_group;  // <= out_channels < 2^31
  g.co_tiles = int(co_tiles);
  if (pr.batch > kLimit / co_tiles || parts > kLimit / (pr.batch * co_tiles))
    throw std::runtime_error(std::string("launch configuration of ") + kernel + ": batch " +
                             std::to_string(pr.batch) + " x " + std::to_string(co_tiles) + " channel tiles x " +
                             std::to_string(parts) + " parts per plane exceed CUDA's grid limit of 2^31 - 1 blocks");
  g.blocks = unsigned(pr.batch * co_tiles * parts);
  return g;
}

/// Which (n, part, co tile) block `blockIdx.x` is, for a grid made by make_fused_grid.
struct BlockCoords {
  int64_t n;
  int part;     ///< 0 .. parts-1
  int group;    ///< convolution group of the co tile
  int co_base;  ///< first output channel of the tile, within the group
};
__device__ inline BlockCoords block_coords(const FusedGrid& g) {
  const unsigned bid = blockIdx.x;
  const unsigned ct = bid % unsigned(g.co_tiles);
  const unsigned rest = bid / unsigned(g.co_tiles);
  BlockCoords c;
  c.part = int(rest % unsigned(g.parts));
  c.n = int64_t(rest / unsigned(g.parts));
  c.group = int(ct) / g.co_tiles_per_group;
  c.co_base = (int(ct) % g.co_tiles_per_group) * g.co_per_tile;
  return c;
}

/// The first work unit of part `part`; part b covers [part_begin(b), part_begin(b + 1)).
/// An even split: sizes differ by at most one.
__device__ inline int part_begin(const FusedGrid& g, int part) {
  return part * g.units_per_part + min(part, g.units_rem);
}

/// Workspace of the fused stages: partials (N, parts, Cout) fp32, contiguous. Every entry is
/// written exactly once per run by the block that owns it, so the workspace may hold anything
/// before a run (no memset) and O(N * parts * Cout) is all it needs.
inline size_t partials_bytes(const Problem& p, int parts) {
  return size_t(p.batch) * size_t(parts) * size_t(p.out_channels) * sizeof(float);
}

/// partials_bytes rounded up to 256 bytes: where a stage's workspace puts what follows the
/// partials (the tensor-core stages' laid-out weights, which 16-byte copies read).
inline size_t aligned_partials_bytes(const Problem& p, int parts) {
  return (partials_bytes(p, parts) + 255) / 256 * 256;
}

/// Where block (n, part) writes channel co (absolute, 0 .. Cout-1) of its partial sums.
__device__ inline float* partial_slot(float* partials, const FusedGrid& g, int64_t n, int part,
                                      int out_channels, int co) {
  return partials + (n * g.parts + part) * int64_t(out_channels) + co;
}

constexpr int kFinishThreads = 256;
constexpr int kFinishWarps = kFinishThreads / 32;

/// The finish of every fused stage; one block of kFinishThreads per sample n = blockIdx.x:
///   pooled[n,co] = conv_bias[co] + (sum over parts of partials[n, part, co]) * inv_plane
///   y[n]         = scale * logsumexp_co(pooled[n,co] + bias[co])      (torch.logsumexp rules)
/// partials (N, parts, Cout); conv_bias, bias (Cout); pooled (N, Cout); y (N); inv_plane is
/// 1 / (Hout * Wout). Lane l of every warp takes channel base + l; warp w sums parts w, w + 8,
/// ... in order, and warp 0 adds the 8 slices in warp order: a fixed order, so the same bits
/// come out on every run. The mean is formed in fp64 (one rounding to fp32 at the end); conv
/// bias is added once, after the mean (the mean of cb + conv is cb + the mean of conv). Warp 0
/// folds pooled + bias into online (max, sum) pairs and merges them with shuffles.
__global__ void __launch_bounds__(kFinishThreads)
    finish_pooled_logsumexp(const float* __restrict__ partials, int parts, int out_channels,
                            const float* __restrict__ conv_bias, const float* __restrict__ bias,
                            double inv_plane, float scale, float* __restrict__ pooled, float* __restrict__ y) {
  __shared__ float slice[kFinishWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = blockIdx.x;
  const float* part = partials + n * parts * int64_t(out_channels);
  float m = -INFINITY, l = 0.0f;
  for (int base = 0; base < out_channels; base += 32) {
    const int co = base + lane;
    float s = 0.0f;
    if (co < out_channels) {
#pragma unroll 4
      for (int b = warp; b < parts; b += kFinishWarps) s += part[int64_t(b) * out_channels + co];
    }
    slice[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && co < out_channels) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < kFinishWarps; ++w) total += slice[w][lane];
      const float v = conv_bias[co] + float(double(total) * inv_plane);
      pooled[n * out_channels + co] = v;
      lse_push(m, l, v + bias[co]);
    }
    __syncthreads();  // slice is rewritten by the next 32 channels
  }
  if (warp == 0) {
    warp_allreduce_lse(m, l);
    if (lane == 0) y[n] = scale * lse_finish(m, l);
  }
}

/// Launches finish_pooled_logsumexp for the problem on `stream`, reading `parts` partial sums
/// per (n, co) from `partials`. Throws std::runtime_error if the batch exceeds the grid limit,
/// CudaError if the launch fails.
inline void launch_finish_pooled_logsumexp(const Problem& p, const float* partials, int parts, const DeviceInputs& in,
                                    float* pooled, float* y, cudaStream_t stream) {
  if (p.batch > 2147483647)
    throw std::runtime_error("launch configuration of finish_pooled_logsumexp: batch " + std::to_string(p.batch) +
                             " exceeds CUDA's grid limit of 2^31 - 1 blocks");
  const double inv_plane = 1.0 / (double(p.out_h()) * double(p.out_w()));
  finish_pooled_logsumexp<<<unsigned(p.batch), kFinishThreads, 0, stream>>>(
      partials, parts, int(p.out_channels), in.conv_bias, in.bias, inv_plane, float(p.scale), pooled, y);
  CUDA_CHECK_LAUNCH("finish_pooled_logsumexp");
}

}  // namespace
}  // namespace ladder
