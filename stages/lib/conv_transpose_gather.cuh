// The naive ConvTranspose2d kernel that stages 01-05 share (they differ only in how they reduce),
// and its per-output gather loop, which stage 06 also calls.
#pragma once

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "stage.hpp"
#include "todo.cuh"

namespace ladder {
// Internal linkage: every stage that includes this header compiles its own copy of the kernel,
// so the stage programs link alone and each stage's SASS is complete.
namespace {

/// The gather form of one convT output without its bias:
///   acc + sum_{ci in group(co), kh, kw} x[n,ci,ih,iw] * w[ci, co mod Cout/g, kh, kw]
/// with ih = (oh + padding_h - kh*dilation_h) / stride_h when that division is exact and
/// 0 <= ih < in_h (same for iw) (docs/problem.md, "The gather form"); the terms are added to
/// `acc` in this order, one fmaf each. x (N,Cin,H,W) and w (Cin,Cout/g,kH,kW) NCHW fp32. Shared
/// by the naive conv kernel below (stages 01-05) and the fused gather of stage 06.
__device__ __forceinline__ float gather_output(const ConvParams& p, const float* __restrict__ x,
                                               const float* __restrict__ weight, int64_t n, int co,
                                               int oh, int ow, float acc) {
  // BEGIN SOLUTION 01
  // STUB: ladder_todo("01.3", "gather_output: add x * weight over the channels and taps that reach (oh, ow)");
  // STUB: return acc;
  const int group = co / p.out_per_group, co_in_group = co % p.out_per_group;
  for (int ci = group * p.in_per_group; ci < (group + 1) * p.in_per_group; ++ci) {
    const float* x_plane = x + (n * p.in_channels + ci) * p.in_h * p.in_w;
    const float* w_taps = weight + (int64_t(ci) * p.out_per_group + co_in_group) * p.kernel_h * p.kernel_w;
    for (int kh = 0; kh < p.kernel_h; ++kh) {
      const int ih_num = oh + p.padding_h - kh * p.dilation_h;
      if (ih_num < 0 || ih_num % p.stride_h != 0) continue;
      const int ih = ih_num / p.stride_h;
      if (ih >= p.in_h) continue;
      for (int kw = 0; kw < p.kernel_w; ++kw) {
        const int iw_num = ow + p.padding_w - kw * p.dilation_w;
        if (iw_num < 0 || iw_num % p.stride_w != 0) continue;
        const int iw = iw_num / p.stride_w;
        if (iw >= p.in_w) continue;
        acc = fmaf(x_plane[ih * p.in_w + iw], w_taps[kh * p.kernel_w + kw], acc);
      }
    }
  }
  return acc;
  // END SOLUTION
}

/// out[n,co,oh,ow] = gather_output(n, co, oh, ow) started from cb[co]: one thread per output
/// element; x (N,Cin,H,W), w (Cin,Cout/g,kH,kW), out (N,Cout,Hout,Wout), all NCHW fp32.
/// Indices are 64-bit because the output can exceed 2^31 elements.
__global__ void conv_transpose2d_gather(ConvParams p, const float* __restrict__ x,
                                        const float* __restrict__ weight,
                                        const float* __restrict__ conv_bias, float* __restrict__ out) {
  const int64_t plane_size = int64_t(p.out_h) * p.out_w;
  const int64_t total = p.batch * p.out_channels * plane_size;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const int64_t plane = idx / plane_size;  // n * Cout + co
  const int within = int(idx - plane * plane_size);
  const int ow = within % p.out_w, oh = within / p.out_w;
  const int co = int(plane % p.out_channels);
  const int64_t n = plane / p.out_channels;
  out[idx] = gather_output(p, x, weight, n, co, oh, ow, conv_bias[co]);
}

/// Launches conv_transpose2d_gather over the whole output (256 threads a block) on `stream`.
/// Throws std::runtime_error if the grid is too large, CudaError if the launch fails.
inline void launch_conv_transpose2d_gather(const Problem& problem, const DeviceInputs& in,
                                    float* out, cudaStream_t stream) {
  constexpr int kBlock = 256;
  const unsigned blocks = blocks_for(problem.out_elems(), kBlock, "conv_transpose2d_gather");
  conv_transpose2d_gather<<<blocks, kBlock, 0, stream>>>(conv_params(problem), in.x, in.weight,
                                                         in.conv_bias, out);
  CUDA_CHECK_LAUNCH("conv_transpose2d_gather");
}

/// The first two phases of the stages that write the convT output (01-04): this naive gather
/// into the start of the stage's workspace (Phase::Conv), then the stage's own pool phase on it
/// (run_pool marks Phase::Pool). pool_workspace: that pool phase's scratch (its plane sums), or
/// nullptr. Throws as the launches do.
inline void conv_then_pool(const GpuStageArgs& a, void (*run_pool)(const PoolArgs&), void* pool_workspace) {
  float* conv_out = static_cast<float*>(a.workspace);
  a.marks.begin(Phase::Conv);
  launch_conv_transpose2d_gather(a.problem, a.in, conv_out, a.stream);
  run_pool({a.problem, conv_out, a.pooled, pool_workspace, a.stream, a.marks});
}

}  // namespace
}  // namespace ladder
