// The backward rungs' shared pieces (rung 05 introduces them; 06-09 reuse them):
//  - routed_gradient: the chain rule through LeakyReLU, * multiplier, LeakyReLU for one pooled
//    element, giving its grad_multiplier term and g_y, the gradient of the ConvTranspose3d output
//    at the window's argmax (also the element's grad_bias term);
//  - the (plane, chunk) layout the per-channel reductions of rungs 06-09 read the pooled tensor in;
//  - per-axis index helpers between pooling windows, conv positions and inputs.
// The generic grad_weight and grad_x kernels are in backward_generic.cuh.
// g_y is pool-sized, (batch, out_channels, out_size()): each window routes its gradient to one
// conv position, so g_y needs no conv-sized buffer; the kernels find the position from the argmax.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "geometry.hpp"
#include "reduce.cuh"

namespace ladder::p74 {

/// Bytes rounded up to 256, so that every buffer carved from the workspace keeps its alignment.
inline size_t backward_aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Bytes of the pool-sized g_y buffer every backward rung puts first in its workspace.
inline size_t g_y_bytes(const Geometry& g) { return backward_aligned(size_t(g.out_elems) * sizeof(float)); }

/// One pooled element's backward, from its upstream gradient g, y saved at the argmax, its
/// channel's multiplier and the fp32 negative_slope:
///   a = lrelu(y), m = mult * a, g_m = lrelu'(m) * g; .x = g_m * a (its grad_multiplier term),
///   .y = g_y = lrelu'(y) * (g_m * mult) (its grad_bias term).
/// lrelu'(v) is 1 for v > 0 and slope otherwise (PyTorch's leaky_relu_backward tests self > 0).
/// Products only, no sums: no FMA contraction, so every rung and the CPU rung round alike.
__device__ __forceinline__ float2 routed_gradient(float g, float y, float mult, float slope) {
  const float a = y > 0.f ? y : slope * y;
  const float m = mult * a;
  const float g_m = m > 0.f ? g : slope * g;
  const float g_mult = g_m * mult;
  return make_float2(g_m * a, y > 0.f ? g_mult : slope * g_mult);
}

// ---- The pooled tensor as (plane, chunk) blocks: plane = n*out_channels + c, one channel each.
constexpr int kReduceBlock = 256;  ///< threads of every plane-chunk kernel: a power of two, a multiple of 32
constexpr int kReduceItems = 4;    ///< elements per thread, blockDim.x apart (coalesced)
constexpr int64_t kReduceChunk = int64_t(kReduceBlock) * kReduceItems;

/// Grid of a plane-chunk kernel: x = the chunks of one plane, y = planes (at most 65535 at once;
/// the kernels loop over the rest).
struct PlaneChunks {
  int64_t planes;
  unsigned chunks;
  dim3 grid;
};
inline PlaneChunks plane_chunks(const Geometry& g, const char* kernel) {
  PlaneChunks pc;
  pc.planes = int64_t(g.batch) * g.out_channels;
  pc.chunks = grid_for(g.out_spatial, int(kReduceChunk), kernel);
  pc.grid = dim3(pc.chunks, unsigned(pc.planes < 65535 ? pc.planes : 65535));
  return pc;
}

/// The calling thread's share of chunk blockIdx.x of `plane` (launched with kReduceBlock
/// threads): routed_gradient of its kReduceItems elements, g_y stored to the pool-sized g_y, the
/// (grad_multiplier, grad_bias) terms summed in element order.
__device__ inline float2 routed_chunk(const Geometry& g, int64_t plane, const float* __restrict__ grad_out,
                                      const float* __restrict__ y_saved, const float* __restrict__ multiplier,
                                      float* __restrict__ g_y) {
  const float mult = multiplier[plane % g.out_channels];
  const int64_t base = plane * g.out_spatial;
  const int64_t first = int64_t(blockIdx.x) * kReduceChunk + threadIdx.x;
  float2 sum = make_float2(0.f, 0.f);
#pragma unroll
  for (int it = 0; it < kReduceItems; ++it) {
    const int64_t q = first + int64_t(it) * kReduceBlock;
    if (q < g.out_spatial) {
      const float2 r = routed_gradient(grad_out[base + q], y_saved[base + q], mult, g.slope);
      g_y[base + q] = r.y;
      sum = plus(sum, r);
    }
  }
  return sum;
}

// ---- Index helpers, one axis at a time (axis a: 0 = D, 1 = H, 2 = W).

/// The conv position of kernel offset j of pooling window q along axis a: q*stride - padding +
/// j*dilation of the pool; false when it is padding (a padded position never wins the max, but
/// a rung must not read past the conv output even if handed a bad argmax). j must lie in
/// [0, pool kernel): callers skip offsets outside [0, pool_window) before decoding them.
__device__ __forceinline__ bool pool_position(const Geometry& g, int a, int q, int j, int& o) {
  o = q * g.pool_stride[a] - g.pool_padding[a] + j * g.pool_dilation[a];
  return o >= 0 && o < g.conv[a];
}

/// The input index i that reaches conv position o through tap k along axis a, o = i*stride -
/// padding + k*dilation; false when (o + padding - k*dilation) is not a non-negative multiple of
/// the stride or i falls outside x.
__device__ __forceinline__ bool tap_input(const Geometry& g, int a, int o, int k, int& i) {
  const int t = o + g.padding[a] - k * g.dilation[a];
  if (t < 0 || t % g.stride[a] != 0) return false;
  i = t / g.stride[a];
  return i < g.in[a];
}

/// The pooling window q whose kernel offset j sits on conv position o along axis a: q*stride -
/// padding + j*dilation = o; false when no window index in [0, out size) does.
__device__ __forceinline__ bool window_of(const Geometry& g, int a, int o, int j, int& q) {
  const int t = o - j * g.pool_dilation[a] + g.pool_padding[a];
  if (t < 0 || t % g.pool_stride[a] != 0) return false;
  q = t / g.pool_stride[a];
  return q < g.out[a];
}

}  // namespace ladder::p74
