// The generic grad_weight and grad_x kernels of rungs 05-08: every ConvTranspose3d and
// MaxPool3d parameter (groups, dilation, pool padding, ceil_mode), one thread per output
// element, each summing its terms in a fixed order (deterministic). Both read the pool-sized g_y
// and the argmax, and find the conv position each window routed its gradient to.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../rung.hpp"
#include "backward.cuh"
#include "common/toolkit/cuda_check.hpp"
#include "geometry.hpp"

namespace ladder::p74 {

/// One thread per weight element w = (ci, co', k), weight (in_channels, out_channels/groups,
/// taps): grad_weight[w] = sum over n and the windows q of channel co = group*out_per_group + co'
/// whose argmax o is reached by tap k from an input i (per axis o = i*stride - padding +
/// k*dilation) of x[n, ci, i] * g_y[n, co, q]. Sums in (n, q) order: deterministic. Each
/// thread walks all batch * out_spatial windows of its channel: with only weight_elems threads
/// (13,824 at the KernelBench size) this kernel is latency-bound; rung 09 tiles it.
static __global__ void grad_weight_generic(Geometry g, const float* __restrict__ x, const int32_t* __restrict__ argmax,
                                           const float* __restrict__ g_y, float* __restrict__ grad_weight) {
  const int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (w >= g.weight_elems) return;
  const int k = int(w % g.taps);
  const int64_t pair = w / g.taps;  // ci * out_per_group + co'
  const int ci = int(pair / g.out_per_group);
  const int co = (ci / g.in_per_group) * g.out_per_group + int(pair % g.out_per_group);
  const int kd = k / (g.kernel[1] * g.kernel[2]), kh = (k / g.kernel[2]) % g.kernel[1], kw = k % g.kernel[2];
  const int pool_hw = g.pool_kernel[1] * g.pool_kernel[2];
  float acc = 0.f;
  for (int n = 0; n < g.batch; ++n) {
    const float* xs = x + (int64_t(n) * g.in_channels + ci) * g.in_spatial;
    const int64_t plane = (int64_t(n) * g.out_channels + co) * g.out_spatial;
    int64_t q = plane;  // flat window index, (qd, qh, qw) in row-major order
    for (int qd = 0; qd < g.out[0]; ++qd)
      for (int qh = 0; qh < g.out[1]; ++qh)
        for (int qw = 0; qw < g.out[2]; ++qw, ++q) {
          const int off = argmax[q];  // (jd*kH + jh)*kW + jw
          if (off < 0 || off >= g.pool_window) continue;  // not a window offset: routes nothing
          const int jd = off / pool_hw, jh = (off - jd * pool_hw) / g.pool_kernel[2];
          const int jw = off - (jd * g.pool_kernel[1] + jh) * g.pool_kernel[2];
          int od, oh, ow, id, ih, iw;
          if (pool_position(g, 0, qd, jd, od) && tap_input(g, 0, od, kd, id) && pool_position(g, 1, qh, jh, oh) &&
              tap_input(g, 1, oh, kh, ih) && pool_position(g, 2, qw, jw, ow) && tap_input(g, 2, ow, kw, iw))
            acc += xs[(int64_t(id) * g.in[1] + ih) * g.in[2] + iw] * g_y[q];
        }
  }
  grad_weight[w] = acc;
}

/// One thread per x element (n, ci, i): grad_x = sum over co' in ci's group and taps k whose conv
/// position o (per axis o = i*stride - padding + k*dilation) lies in the conv output, and over
/// the windows q containing o (per axis q*stride - padding + j*dilation = o, j < pool kernel)
/// whose argmax offset is o's offset j, of weight[ci, co', k] * g_y[n, co, q]. Sums in (co', k, j)
/// order: deterministic.
static __global__ void grad_x_generic(Geometry g, const float* __restrict__ weight, const int32_t* __restrict__ argmax,
                                      const float* __restrict__ g_y, float* __restrict__ grad_x) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= g.x_elems) return;
  const int s = int(e % g.in_spatial);
  const int64_t nc = e / g.in_spatial;
  const int ci = int(nc % g.in_channels), n = int(nc / g.in_channels);
  const int id = s / (g.in[1] * g.in[2]), ih = (s / g.in[2]) % g.in[1], iw = s % g.in[2];
  const int group = ci / g.in_per_group;
  float acc = 0.f;
  for (int cop = 0; cop < g.out_per_group; ++cop) {
    const float* w = weight + (int64_t(ci) * g.out_per_group + cop) * g.taps;
    const int64_t plane = (int64_t(n) * g.out_channels + group * g.out_per_group + cop) * g.out_spatial;
    for (int kd = 0; kd < g.kernel[0]; ++kd) {
      const int od = id * g.stride[0] - g.padding[0] + kd * g.dilation[0];
      if (od < 0 || od >= g.conv[0]) continue;
      for (int kh = 0; kh < g.kernel[1]; ++kh) {
        const int oh = ih * g.stride[1] - g.padding[1] + kh * g.dilation[1];
        if (oh < 0 || oh >= g.conv[1]) continue;
        for (int kw = 0; kw < g.kernel[2]; ++kw) {
          const int ow = iw * g.stride[2] - g.padding[2] + kw * g.dilation[2];
          if (ow < 0 || ow >= g.conv[2]) continue;
          const float wv = w[(kd * g.kernel[1] + kh) * g.kernel[2] + kw];
          for (int jd = 0, qd; jd < g.pool_kernel[0]; ++jd) {
            if (!window_of(g, 0, od, jd, qd)) continue;
            for (int jh = 0, qh; jh < g.pool_kernel[1]; ++jh) {
              if (!window_of(g, 1, oh, jh, qh)) continue;
              for (int jw = 0, qw; jw < g.pool_kernel[2]; ++jw) {
                if (!window_of(g, 2, ow, jw, qw)) continue;
                const int64_t q = plane + (int64_t(qd) * g.out[1] + qh) * g.out[2] + qw;
                if (argmax[q] == (jd * g.pool_kernel[1] + jh) * g.pool_kernel[2] + jw) acc += wv * g_y[q];
              }
            }
          }
        }
      }
    }
  }
  grad_x[e] = acc;
}

constexpr int kGenericBlock = 256;

/// grad_weight by grad_weight_generic from the pool-sized g_y. Throws CudaError on a failed launch.
inline void launch_grad_weight_generic(const Geometry& g, const BackwardArgs& a, const float* g_y) {
  grad_weight_generic<<<grid_for(g.weight_elems, kGenericBlock, "grad_weight_generic"), kGenericBlock, 0, a.stream>>>(
      g, a.in.x, a.argmax, g_y, a.grad_weight);
  CUDA_CHECK_LAUNCH("grad_weight_generic");
}

/// grad_x by grad_x_generic from the pool-sized g_y. Throws CudaError on a failed launch.
inline void launch_grad_x_generic(const Geometry& g, const BackwardArgs& a, const float* g_y) {
  grad_x_generic<<<grid_for(g.x_elems, kGenericBlock, "grad_x_generic"), kGenericBlock, 0, a.stream>>>(
      g, a.in.weight, a.argmax, g_y, a.grad_x);
  CUDA_CHECK_LAUNCH("grad_x_generic");
}

/// The phases rungs 05-08 share after their per-channel reduction: "weight" then "input", both
/// generic, from the pool-sized g_y. Throws CudaError on a failed launch.
inline void generic_weight_and_input(const Geometry& g, const BackwardArgs& a, const float* g_y) {
  a.mark("weight");
  launch_grad_weight_generic(g, a, g_y);
  a.mark("input");
  launch_grad_x_generic(g, a, g_y);
}

/// Zeroes grad_multiplier and grad_bias before rungs 05-07 accumulate into them with atomics.
/// Throws CudaError.
inline void zero_channel_grads(const Geometry& g, const BackwardArgs& a) {
  CUDA_CHECK(cudaMemsetAsync(a.grad_multiplier, 0, size_t(g.out_channels) * sizeof(float), a.stream));
  CUDA_CHECK(cudaMemsetAsync(a.grad_bias, 0, size_t(g.out_channels) * sizeof(float), a.stream));
}

}  // namespace ladder::p74
