// The whole forward in one kernel, every PyTorch parameter honoured: rung 03's idea, which rung
// 10 also takes where its tensor cores do not apply (code below sm_80). One thread per pooled
// element walks its window, computes y at each in-range position by the gather of
// forward_conv.cuh (so y is bitwise rung 02's), applies the chain, keeps the running max with its
// argmax and y there, and writes only out, argmax and y_saved.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/toolkit/cuda_check.hpp"
#include "forward_chain.cuh"
#include "forward_conv.cuh"
#include "forward_pool.cuh"
#include "geometry.hpp"

namespace ladder::p74 {

/// One thread per pooled element e = (n, c, qd, qh, qw) (grid-stride loop): out[e] = max over the
/// window of lrelu(multiplier[c] * lrelu(y)), argmax[e] its window offset, y_saved[e] y there;
/// all three (batch, out_channels, pooled D, H, W). Neighbouring threads share (n, c), so their
/// weight reads coincide and their writes are contiguous.
static __global__ void fused_forward_kernel(Geometry g, const float* __restrict__ x, const float* __restrict__ weight,
                                            const float* __restrict__ bias, const float* __restrict__ multiplier,
                                            float* __restrict__ out, int32_t* __restrict__ argmax,
                                            float* __restrict__ y_saved) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < g.out_elems;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane = e / g.out_spatial;
    const int s = int(e - plane * g.out_spatial);
    const int n = int(plane / g.out_channels), c = int(plane - int64_t(n) * g.out_channels);
    const int qw = s % g.out[2], qh = (s / g.out[2]) % g.out[1], qd = s / (g.out[2] * g.out[1]);
    const float mult = multiplier[c];
    const PoolWindow win(g, qd, qh, qw);
    WindowMax m;
    float y_at = 0.f;
    win.for_each(g, [&](int off, int od, int oh, int ow) {
      const float y = conv_transpose_at(g, x, weight, bias, n, c, od, oh, ow);
      if (m.take(chain(y, mult, g.slope), off)) y_at = y;
    });
    store_window(g, win, m, y_at, e, out, argmax, y_saved);
  }
}

/// Enqueues fused_forward_kernel on `stream`: out, argmax, y_saved (pool-sized) from x, the
/// weights, bias and multiplier. No workspace.
inline void launch_fused_forward(const Geometry& g, const float* x, const float* weight, const float* bias,
                                 const float* multiplier, float* out, int32_t* argmax, float* y_saved,
                                 cudaStream_t stream) {
  fused_forward_kernel<<<capped_grid(g.out_elems, 128, "fused_forward_kernel"), 128, 0, stream>>>(
      g, x, weight, bias, multiplier, out, argmax, y_saved);
  CUDA_CHECK_LAUNCH("fused_forward_kernel");
}

}  // namespace ladder::p74
