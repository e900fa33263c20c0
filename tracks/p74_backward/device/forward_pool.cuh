// MaxPool3d with the argmax the backward needs, every PyTorch parameter honoured (kernel_size,
// stride, padding, dilation, ceil_mode through the output size): the window walk, the max with
// PyTorch's tie and NaN rules, and the kernel of the unfused rungs 01 and 02.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/toolkit/cuda_check.hpp"
#include "forward_chain.cuh"
#include "geometry.hpp"

namespace ladder::p74 {

/// The running max of one window with its argmax, offered the window's in-range values in window
/// order. The rule is PyTorch's (`val > max || isnan(val)`, CPU and CUDA kernels): strict >, so
/// the first of equal maxima wins; every NaN wins, so the last NaN is the argmax. PyTorch starts
/// from -inf and the first in-range index, so the first value offered is always taken, even -inf.
struct WindowMax {
  float best = -INFINITY;
  int offset = -1;  ///< window offset (jd*kH + jh)*kW + jw of the max; -1 until a value is offered
  /// Offers z at window offset `off`; true when z becomes the max (the caller keeps its payload).
  __device__ __forceinline__ bool take(float z, int off) {
    if (offset >= 0 && !(z > best) && !isnan(z)) return false;
    best = z;
    offset = off;
    return true;
  }
};

/// The window of pooled position (qd, qh, qw): per axis, conv positions start + j*dilation for
/// j < kernel_size, start = q*stride - padding; positions outside [0, conv size) are padding.
struct PoolWindow {
  int start[3];
  __device__ PoolWindow(const Geometry& g, int qd, int qh, int qw) {
    const int q[3] = {qd, qh, qw};
    for (int a = 0; a < 3; ++a) start[a] = q[a] * g.pool_stride[a] - g.pool_padding[a];
  }

  /// Calls f(offset, od, oh, ow) for each in-range position, in window order (jd outer, jw inner).
  template <class F>
  __device__ void for_each(const Geometry& g, F&& f) const {
    for (int jd = 0; jd < g.pool_kernel[0]; ++jd) {
      const int od = start[0] + jd * g.pool_dilation[0];
      if (od < 0 || od >= g.conv[0]) continue;
      for (int jh = 0; jh < g.pool_kernel[1]; ++jh) {
        const int oh = start[1] + jh * g.pool_dilation[1];
        if (oh < 0 || oh >= g.conv[1]) continue;
        for (int jw = 0; jw < g.pool_kernel[2]; ++jw) {
          const int ow = start[2] + jw * g.pool_dilation[2];
          if (ow < 0 || ow >= g.conv[2]) continue;
          f((jd * g.pool_kernel[1] + jh) * g.pool_kernel[2] + jw, od, oh, ow);
        }
      }
    }
  }

  /// Defensive (Problem74::validate rejects windows of padding alone, so this never runs there):
  /// the argmax PyTorch reports for a window with no in-range position: its initial index, the
  /// first position whose coordinates are all >= 0 (its `while (start < 0) start += dilation`).
  /// Such windows exist only with pool dilation > 1 (e.g. conv size 2, kernel_size 2, padding 1,
  /// dilation 3: positions -1 and 2); that position then lies past the end, so it is padding.
  __device__ int first_nonnegative_offset(const Geometry& g) const {
    int j[3];
    for (int a = 0; a < 3; ++a) j[a] = start[a] < 0 ? (-start[a] + g.pool_dilation[a] - 1) / g.pool_dilation[a] : 0;
    return (j[0] * g.pool_kernel[1] + j[1]) * g.pool_kernel[2] + j[2];
  }
};

/// Writes pooled element e: out = the max, argmax = its window offset, y_saved = y there. A window
/// with no in-range position writes PyTorch's -inf and initial offset, and y_saved 0 (no y exists
/// there; the backward routes nothing to padding).
__device__ __forceinline__ void store_window(const Geometry& g, const PoolWindow& win, const WindowMax& m, float y_at,
                                             int64_t e, float* __restrict__ out, int32_t* __restrict__ argmax,
                                             float* __restrict__ y_saved) {
  const bool empty = m.offset < 0;
  out[e] = m.best;
  argmax[e] = empty ? win.first_nonnegative_offset(g) : m.offset;
  y_saved[e] = empty ? 0.f : y_at;
}

/// One thread per pooled element (grid-stride loop): out, argmax, y_saved (batch, out_channels,
/// pooled D, H, W) from z (the pool's input) and y (the conv output, read once, at the argmax),
/// both (batch, out_channels, conv D, H, W).
static __global__ void max_pool_kernel(Geometry g, const float* __restrict__ z, const float* __restrict__ y,
                                       float* __restrict__ out, int32_t* __restrict__ argmax,
                                       float* __restrict__ y_saved) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < g.out_elems;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = e / g.out_spatial;
    const int s = int(e - plane * g.out_spatial);
    const int qw = s % g.out[2], qh = (s / g.out[2]) % g.out[1], qd = s / (g.out[2] * g.out[1]);
    const float* zp = z + plane * g.conv_spatial;
    const PoolWindow win(g, qd, qh, qw);
    WindowMax m;
    int at = 0;
    win.for_each(g, [&](int off, int od, int oh, int ow) {
      const int c = (od * g.conv[1] + oh) * g.conv[2] + ow;
      if (m.take(zp[c], off)) at = c;
    });
    store_window(g, win, m, y[plane * g.conv_spatial + at], e, out, argmax, y_saved);
  }
}

/// Enqueues max_pool_kernel on `stream`: out, argmax, y_saved (pool-sized) from z and y (conv-sized).
inline void launch_max_pool(const Geometry& g, const float* z, const float* y, float* out, int32_t* argmax,
                            float* y_saved, cudaStream_t stream) {
  max_pool_kernel<<<capped_grid(g.out_elems, 256, "max_pool_kernel"), 256, 0, stream>>>(g, z, y, out, argmax,
                                                                                       y_saved);
  CUDA_CHECK_LAUNCH("max_pool_kernel");
}

}  // namespace ladder::p74
