// ConvTranspose3d as a gather, every PyTorch parameter honoured: the value of one output element,
// the kernel that writes all of y (rungs 01 and 02), and the carving of their workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/toolkit/cuda_check.hpp"
#include "forward_chain.cuh"
#include "geometry.hpp"

namespace ladder::p74 {

/// ConvTranspose3d (bias included) at output (n, co, od, oh, ow), gather form: bias[co] plus,
/// for every input channel ci of co's group and every tap k whose input index
/// i = (o + padding - k*dilation)/stride is an exact division inside x on every axis,
/// x[n, ci, i] * weight[ci, co mod out_per_group, k]. This is the adjoint of Conv3d's index map
/// o = i*stride - padding + k*dilation. Sums in the order ci, kd, kh, kw; rungs 01-03 all use it,
/// so they compute bitwise the same y. x: (batch, in_channels, D, H, W); weight: (in_channels,
/// out_per_group, kD, kH, kW).
__device__ inline float conv_transpose_at(const Geometry& g, const float* __restrict__ x,
                                          const float* __restrict__ weight, const float* __restrict__ bias, int n,
                                          int co, int od, int oh, int ow) {
  const int group = co / g.out_per_group, co_local = co - group * g.out_per_group;
  float acc = bias[co];
  for (int cig = 0; cig < g.in_per_group; ++cig) {
    const int ci = group * g.in_per_group + cig;
    const float* in = x + (int64_t(n) * g.in_channels + ci) * g.in_spatial;
    const float* w = weight + (int64_t(ci) * g.out_per_group + co_local) * g.taps;
    for (int kd = 0; kd < g.kernel[0]; ++kd) {
      // A negative numerator means a negative input index: skipped before % and / (which
      // truncate toward zero) can be fooled by it.
      const int td = od + g.padding[0] - kd * g.dilation[0];
      if (td < 0 || td % g.stride[0] != 0 || td / g.stride[0] >= g.in[0]) continue;
      for (int kh = 0; kh < g.kernel[1]; ++kh) {
        const int th = oh + g.padding[1] - kh * g.dilation[1];
        if (th < 0 || th % g.stride[1] != 0 || th / g.stride[1] >= g.in[1]) continue;
        for (int kw = 0; kw < g.kernel[2]; ++kw) {
          const int tw = ow + g.padding[2] - kw * g.dilation[2];
          if (tw < 0 || tw % g.stride[2] != 0 || tw / g.stride[2] >= g.in[2]) continue;
          const int i = ((td / g.stride[0]) * g.in[1] + th / g.stride[1]) * g.in[2] + tw / g.stride[2];
          acc += in[i] * w[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
        }
      }
    }
  }
  return acc;
}

/// One thread per element of y (grid-stride loop): y (batch, out_channels, conv D, H, W) =
/// ConvTranspose3d(x) + bias.
static __global__ void conv_transpose_kernel(Geometry g, const float* __restrict__ x, const float* __restrict__ weight,
                                             const float* __restrict__ bias, float* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < g.conv_elems;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = i / g.conv_spatial;
    const int s = int(i - plane * g.conv_spatial);
    const int n = int(plane / g.out_channels), co = int(plane - int64_t(n) * g.out_channels);
    const int ow = s % g.conv[2], oh = (s / g.conv[2]) % g.conv[1], od = s / (g.conv[2] * g.conv[1]);
    y[i] = conv_transpose_at(g, x, weight, bias, n, co, od, oh, ow);
  }
}

/// Enqueues conv_transpose_kernel on `stream`: y = ConvTranspose3d(x) + bias, conv-sized.
inline void launch_conv_transpose(const Geometry& g, const float* x, const float* weight, const float* bias, float* y,
                                  cudaStream_t stream) {
  conv_transpose_kernel<<<capped_grid(g.conv_elems, 256, "conv_transpose_kernel"), 256, 0, stream>>>(g, x, weight,
                                                                                                   bias, y);
  CUDA_CHECK_LAUNCH("conv_transpose_kernel");
}

/// Bytes of one conv-sized fp32 buffer, rounded up to 256 so a second one carved after it keeps
/// the workspace's alignment.
inline size_t conv_buffer_bytes(const Geometry& g) { return (size_t(g.conv_elems) * sizeof(float) + 255) / 256 * 256; }

/// The workspace of the unfused rungs 01 and 02: y, then z, both (batch, out_channels, conv
/// D, H, W) fp32.
struct ConvBuffers {
  float* y;
  float* z;
  ConvBuffers(const Geometry& g, void* workspace)
      : y(static_cast<float*>(workspace)),
        z(reinterpret_cast<float*>(static_cast<char*>(workspace) + conv_buffer_bytes(g))) {}
  static size_t bytes(const Geometry& g) { return 2 * conv_buffer_bytes(g); }
};

}  // namespace ladder::p74
