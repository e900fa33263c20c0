// Device code every GPU rung of the track shares: AvgPool3d, the transposed convolution as a
// gather (one output element from the pooled input), torch.clamp, and workspace carving. The
// rungs differ in the softmax and in how these pieces are fused; this code stays as rung 01
// introduced it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/toolkit/cuda_check.hpp"
#include "geometry.hpp"

namespace ladder::p38 {

/// Blocks for `count` threads of `block`, or std::runtime_error naming the kernel past CUDA's
/// 2^31 - 1 blocks.
inline unsigned int grid_for(int64_t count, int block, const char* kernel) {
  const int64_t blocks = (count + block - 1) / block;
  if (blocks > 2147483647LL)
    throw std::runtime_error(std::string(kernel) + ": " + std::to_string(blocks) +
                             " blocks exceed CUDA's limit of 2^31 - 1");
  return unsigned(blocks < 1 ? 1 : blocks);
}

/// Bytes rounded up to 256, so that every carved buffer keeps the workspace's alignment.
inline size_t aligned_bytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// The pooled tensor's bytes: (batch, in_channels, pooled D*H*W) fp32.
inline size_t pooled_bytes(const Geometry& g) {
  return aligned_bytes(size_t(g.batch) * size_t(g.in_channels) * size_t(g.pooled_spatial) * sizeof(float));
}

/// torch.clamp on fp32: min(max(z, lo), hi), hi winning when lo > hi; NaN stays NaN (fminf and
/// fmaxf would drop it).
__device__ __forceinline__ float clamp_like_torch(float z, float lo, float hi) {
  z = z < lo ? lo : z;
  return z > hi ? hi : z;
}

/// AvgPool3d of one (sample, channel) plane `x_plane` at pooled index (od, oh, ow), PyTorch's
/// divisor: with count_include_pad the window clipped to the padded input, else to the input.
__device__ inline float avg_pool_at(const Geometry& g, const float* __restrict__ x_plane, int od, int oh, int ow) {
  const int o[3] = {od, oh, ow};
  int lo[3], hi[3], divisor = 1;
  for (int a = 0; a < 3; ++a) {
    const int start = o[a] * g.pool_stride[a] - g.pool_padding[a];
    const int end = min(start + g.pool_kernel[a], g.in[a] + g.pool_padding[a]);
    lo[a] = max(start, 0);
    hi[a] = min(end, g.in[a]);
    divisor *= g.count_include_pad ? end - start : hi[a] - lo[a];
  }
  float sum = 0.f;
  for (int d = lo[0]; d < hi[0]; ++d)
    for (int h = lo[1]; h < hi[1]; ++h)
      for (int w = lo[2]; w < hi[2]; ++w) sum += x_plane[(int64_t(d) * g.in[1] + h) * g.in[2] + w];
  return sum / float(divisor);
}

/// One thread per pooled element (grid-stride loop): pooled (batch, in_channels, pooled D*H*W)
/// from x (batch, in_channels, D, H, W).
static __global__ void avg_pool3d_kernel(Geometry g, const float* __restrict__ x, float* __restrict__ pooled) {
  const int64_t total = int64_t(g.batch) * g.in_channels * g.pooled_spatial;
  const int64_t in_plane = int64_t(g.in[0]) * g.in[1] * g.in[2];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = i / g.pooled_spatial;
    const int s = int(i - plane * g.pooled_spatial);
    const int ow = s % g.pooled[2], oh = (s / g.pooled[2]) % g.pooled[1], od = s / (g.pooled[2] * g.pooled[1]);
    pooled[i] = avg_pool_at(g, x + plane * in_plane, od, oh, ow);
  }
}

inline void launch_avg_pool3d(const Geometry& g, const float* x, float* pooled, cudaStream_t stream) {
  const int64_t total = int64_t(g.batch) * g.in_channels * g.pooled_spatial;
  const unsigned grid = grid_for(total < (int64_t(1) << 30) ? total : (int64_t(1) << 30), 256, "avg_pool3d_kernel");
  avg_pool3d_kernel<<<grid, 256, 0, stream>>>(g, x, pooled);
  CUDA_CHECK_LAUNCH("avg_pool3d_kernel");
}

/// ConvTranspose3d at output (n, co, od, oh, ow), gather form: bias plus, for every input channel
/// of co's group and every tap k with i = (o + padding - k*dilation)/stride an exact division
/// inside the pooled input (per axis), pooled[n, ci, i] * weight[ci, co mod out_per_group, k].
/// Source of the formula: the adjoint of Conv3d's index map, as in PyTorch's ConvTranspose3d page.
__device__ inline float conv_transpose_at(const Geometry& g, const float* __restrict__ pooled,
                                          const float* __restrict__ weight, const float* __restrict__ bias,
                                          int n, int co, int od, int oh, int ow) {
  const int group = co / g.out_per_group, co_local = co - group * g.out_per_group;
  float acc = bias[co];
  for (int cig = 0; cig < g.in_per_group; ++cig) {
    const int ci = group * g.in_per_group + cig;
    const float* in = pooled + (int64_t(n) * g.in_channels + ci) * g.pooled_spatial;
    const float* w = weight + (int64_t(ci) * g.out_per_group + co_local) * g.taps;
    for (int kd = 0; kd < g.kernel[0]; ++kd) {
      const int td = od + g.padding[0] - kd * g.dilation[0];
      if (td < 0 || td % g.stride[0] != 0 || td / g.stride[0] >= g.pooled[0]) continue;
      for (int kh = 0; kh < g.kernel[1]; ++kh) {
        const int th = oh + g.padding[1] - kh * g.dilation[1];
        if (th < 0 || th % g.stride[1] != 0 || th / g.stride[1] >= g.pooled[1]) continue;
        for (int kw = 0; kw < g.kernel[2]; ++kw) {
          const int tw = ow + g.padding[2] - kw * g.dilation[2];
          if (tw < 0 || tw % g.stride[2] != 0 || tw / g.stride[2] >= g.pooled[2]) continue;
          const int i = ((td / g.stride[0]) * g.pooled[1] + th / g.stride[1]) * g.pooled[2] + tw / g.stride[2];
          acc += in[i] * w[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
        }
      }
    }
  }
  return acc;
}

/// The clamped convolution at flat output index i of row `row` (= n*out_channels + co), position
/// s within the row.
__device__ inline float clamped_conv_at(const Geometry& g, const float* __restrict__ pooled,
                                        const float* __restrict__ weight, const float* __restrict__ bias,
                                        int64_t row, int s) {
  const int n = int(row / g.out_channels), co = int(row % g.out_channels);
  const int ow = s % g.out[2], oh = (s / g.out[2]) % g.out[1], od = s / (g.out[2] * g.out[1]);
  return clamp_like_torch(conv_transpose_at(g, pooled, weight, bias, n, co, od, oh, ow), g.clamp_lo, g.clamp_hi);
}

/// One thread per output element (grid-stride loop): z = clamp(ConvTranspose3d(pooled)) into
/// `z` (batch, out_channels, S). The softmax rungs then work on z in place.
static __global__ void conv_clamp_kernel(Geometry g, const float* __restrict__ pooled, const float* __restrict__ weight,
                                  const float* __restrict__ bias, float* __restrict__ z) {
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / g.spatial;
    z[i] = clamped_conv_at(g, pooled, weight, bias, row, int(i - row * g.spatial));
  }
}

/// The unfused front of rungs 01-04: pool into `pooled` (pooled_bytes(g) of workspace), then the
/// clamped convolution into `z`.
inline void launch_pool_conv_clamp(const Geometry& g, const float* x, const float* weight, const float* bias,
                                   float* pooled, float* z, cudaStream_t stream) {
  launch_avg_pool3d(g, x, pooled, stream);
  const int64_t total = g.rows * g.spatial;
  const unsigned grid = grid_for(total < (int64_t(1) << 30) ? total : (int64_t(1) << 30), 256, "conv_clamp_kernel");
  conv_clamp_kernel<<<grid, 256, 0, stream>>>(g, pooled, weight, bias, z);
  CUDA_CHECK_LAUNCH("conv_clamp_kernel");
}

}  // namespace ladder::p38
