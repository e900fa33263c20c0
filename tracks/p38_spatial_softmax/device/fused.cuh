// The fused rungs' shared pieces (rung 05 introduces them): the constant shift the clamp allows in
// place of the row's max, the convolution epilogue that clamps, exponentiates and sums per block,
// and the per-row factor scale[c] / sum.
//
// Why a constant may replace the max. softmax(z)_i = exp(z_i - c) / sum_j exp(z_j - c) for every
// constant c: the factor exp(-c) cancels. The max is subtracted only so that no exp overflows and
// the largest term is 1. After torch.clamp every z_j lies in [lo, hi] (all equal hi if lo > hi),
// so with c = hi: every term exp(z_j - hi) <= 1 (no overflow; the row's sum is at most S), and
// every term >= exp(-(hi - lo)), which is a normal fp32 (>= 2^-126, about 1.18e-38) when
// hi - lo <= 87, so no term underflows or loses precision to subnormals. Then the one-pass sum
// needs no max at all. For KernelBench's clamp [0, 1] even c = 0 would do (terms in [1, e]).
// The rounding of z_j - hi is at most u*|z_j - hi| <= 87u relative, counted by tolerance.hpp.
#pragma once

#include <cmath>
#include <sstream>
#include <string>

#include "geometry.hpp"
#include "pool_conv.cuh"
#include "warp.cuh"

namespace ladder::p38 {

constexpr double kMaxClampRangeForShift = 87.0;

/// "" when the clamp bounds let the fused rungs use the shift hi; else why not.
inline std::string shift_unsupported(const Problem38& p) {
  const Geometry g = make_geometry(p);
  const double lo = g.clamp_lo, hi = g.clamp_hi;
  if (!std::isfinite(hi) || (lo <= hi && !(hi - lo <= kMaxClampRangeForShift))) {
    std::ostringstream m;
    m << "the fused rungs replace the row max by clamp_max and need a finite clamp_max with clamp_max - clamp_min <= "
      << kMaxClampRangeForShift << " (got [" << lo << ", " << hi << "]); rung 04 handles any bounds";
    return m.str();
  }
  return "";
}

constexpr int kFusedBlock = 256;

/// Softmax row `row` is split into parts of kFusedBlock elements: partials[row * parts + part].
inline int64_t parts_per_row(const Geometry& g) { return (g.spatial + kFusedBlock - 1) / kFusedBlock; }

/// One thread per output element, one block per part of a row (block-stride loop over all
/// parts): e = exp(clamp(conv) - shift), stored to out if kWrite, summed over the block into
/// partials (fixed order: deterministic).
template <bool kWrite>
__global__ void __launch_bounds__(kFusedBlock) conv_exp_partials(Geometry g, const float* __restrict__ pooled,
                                                                 const float* __restrict__ weight,
                                                                 const float* __restrict__ bias, float shift,
                                                                 float* __restrict__ out,
                                                                 float* __restrict__ partials) {
  __shared__ float scratch[32];
  const int64_t parts = (g.spatial + kFusedBlock - 1) / kFusedBlock;
  for (int64_t b = blockIdx.x; b < g.rows * parts; b += gridDim.x) {
    const int64_t row = b / parts;
    const int64_t s = (b - row * parts) * kFusedBlock + threadIdx.x;
    float e = 0.f;
    if (s < g.spatial) {
      e = expf(clamped_conv_at(g, pooled, weight, bias, row, int(s)) - shift);
      if (kWrite) out[row * g.spatial + s] = e;
    }
    e = block_sum(e, scratch);
    if (threadIdx.x == 0) partials[b] = e;
  }
}

/// One block per row (block-stride loop): factor[row] = scale[row mod out_channels] / (sum of the
/// row's partials), summed in a fixed order.
static __global__ void row_factor(Geometry g, const float* __restrict__ partials, int64_t parts,
                           const float* __restrict__ scale, float* __restrict__ factor) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < parts; i += blockDim.x) s += partials[row * parts + i];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) factor[row] = scale[row % g.out_channels] / s;
  }
}

inline unsigned capped_grid(int64_t blocks) {
  return unsigned(blocks < (1 << 20) ? (blocks < 1 ? 1 : blocks) : (1 << 20));
}

/// Workspace of the fused rungs: pooled, partials (rows * parts), factor (rows).
struct FusedWorkspace {
  float* pooled;
  float* partials;
  float* factor;
  static size_t bytes(const Geometry& g) {
    return pooled_bytes(g) + aligned_bytes(size_t(g.rows * parts_per_row(g)) * 4) + aligned_bytes(size_t(g.rows) * 4);
  }
  FusedWorkspace(const Geometry& g, void* ws) {
    char* p = static_cast<char*>(ws);
    pooled = reinterpret_cast<float*>(p);
    partials = reinterpret_cast<float*>(p + pooled_bytes(g));
    factor = reinterpret_cast<float*>(p + pooled_bytes(g) + aligned_bytes(size_t(g.rows * parts_per_row(g)) * 4));
  }
};

inline void launch_row_factor(const Geometry& g, const FusedWorkspace& w, const float* scale, cudaStream_t stream) {
  row_factor<<<capped_grid(g.rows), 256, 0, stream>>>(g, w.partials, parts_per_row(g), scale, w.factor);
  CUDA_CHECK_LAUNCH("row_factor");
}

/// One thread per output element: out = exp(clamp(conv) - shift) * factor[row].
static __global__ void conv_exp_scaled(Geometry g, const float* __restrict__ pooled,
                                       const float* __restrict__ weight, const float* __restrict__ bias, float shift,
                                       const float* __restrict__ factor, float* __restrict__ out) {
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / g.spatial;
    out[i] = expf(clamped_conv_at(g, pooled, weight, bias, row, int(i - row * g.spatial)) - shift) * factor[row];
  }
}

/// Rung 06's plan after the pool: conv_exp_partials sums each row's exp(clamp(conv) - hi) without
/// writing, row_factor turns the sums into factors, and conv_exp_scaled computes the convolution
/// again and writes out = exp(clamp(conv) - hi) * factor once. `in` gives weight, bias and scale;
/// w.pooled must hold the pool's output. Throws CudaError on a failed launch.
template <typename DeviceInputs>
void launch_gather_recompute(const Geometry& g, const FusedWorkspace& w, const DeviceInputs& in, float* out,
                             cudaStream_t stream) {
  conv_exp_partials<false><<<capped_grid(g.rows * parts_per_row(g)), kFusedBlock, 0, stream>>>(
      g, w.pooled, in.weight, in.bias, g.clamp_hi, nullptr, w.partials);
  CUDA_CHECK_LAUNCH("conv_exp_partials<sum only>");
  launch_row_factor(g, w, in.scale, stream);
  const int64_t total = g.rows * g.spatial;
  conv_exp_scaled<<<grid_for(total < (int64_t(1) << 30) ? total : (int64_t(1) << 30), 256, "conv_exp_scaled"), 256, 0,
                    stream>>>(g, w.pooled, in.weight, in.bias, g.clamp_hi, w.factor, out);
  CUDA_CHECK_LAUNCH("conv_exp_scaled");
}

/// out[i] *= factor[row of i], four at a time (S % 4 == 0, so four never straddle rows).
static __global__ void rescale4(Geometry g, const float* __restrict__ factor, float4* __restrict__ out) {
  const int64_t total4 = g.rows * g.spatial / 4;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total4; i += int64_t(gridDim.x) * blockDim.x) {
    const float f = factor[4 * i / g.spatial];
    float4 v = out[i];
    v.x *= f, v.y *= f, v.z *= f, v.w *= f;
    out[i] = v;
  }
}
/// Launches rescale4 over out and returns true when S % 4 == 0 (float4s never straddle rows);
/// returns false, launching nothing, otherwise. Throws CudaError on a failed launch.
inline bool launch_rescale4(const Geometry& g, const float* factor, float* out, cudaStream_t stream) {
  if (g.spatial % 4 != 0) return false;
  const int64_t t4 = g.rows * g.spatial / 4;
  rescale4<<<grid_for(t4 < (int64_t(1) << 28) ? t4 : (int64_t(1) << 28), 256, "rescale4"), 256, 0, stream>>>(
      g, factor, reinterpret_cast<float4*>(out));
  CUDA_CHECK_LAUNCH("rescale4");
  return true;
}

}  // namespace ladder::p38
