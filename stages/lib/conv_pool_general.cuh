// The general path of the tiled fused stages (07-09): a direct gather for every ConvTranspose2d
// parameter set their stride-1 tiles do not cover (stride > 1, dilation_w > 1, kernel_w > 5,
// a halo too tall for the shared-memory budget). Correct, not tuned; it writes the same partial
// sums as the tiled kernels, so the same finish kernel follows (lib/fused_partials.cuh).
#pragma once

#include <algorithm>
#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/fused_partials.cuh"
#include "stage.hpp"
#include "lib/warp_reduce.cuh"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

constexpr int kGeneralThreads = 256;
constexpr int kGeneralWarps = kGeneralThreads / 32;
constexpr int kGeneralCo = 8;                 // output channels per block
constexpr int64_t kGeneralTargetBlocks = 4096;  // about 15 waves of 2 blocks on 132 SMs

/// Every ConvTranspose2d parameter set (any stride, padding, output_padding, dilation, groups,
/// kernel size). x (N, Cin, H, W), weight (Cin, Cout/g, kH, kW), partials (N, g.parts, Cout),
/// fp32. Block: (n, a contiguous range of the plane's output pixels, kGeneralCo channels of
/// one group), as block_coords numbers it. Thread: one output pixel at a time (block-stride
/// over the range), all kGeneralCo channels, by the gather form: tap (kh, kw) contributes
/// x[ih, iw] with ih = (oh + ph - kh*dh) / sh when exact and 0 <= ih < H (same for iw). Each x
/// value loaded (through the read-only cache) feeds kGeneralCo FMAs; the weights are the same
/// address for the whole warp (a broadcast). Outputs are summed per channel in registers, then
/// reduced by shuffles and one shared slot per warp in a fixed order into the block's partials.
__global__ void __launch_bounds__(kGeneralThreads)
    conv_pool_general(ConvParams p, const float* __restrict__ x, const float* __restrict__ weight,
                      float* __restrict__ partials, FusedGrid g) {
  __shared__ float warp_sums[kGeneralWarps][kGeneralCo];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const BlockCoords bc = block_coords(g);
  const int co_count = min(kGeneralCo, p.out_per_group - bc.co_base);
  const int pix_begin = part_begin(g, bc.part), pix_end = part_begin(g, bc.part + 1);
  const int taps = p.kernel_h * p.kernel_w;
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const int ci_group = bc.group * p.in_per_group;
  const float* x_g = x + (bc.n * p.in_channels + ci_group) * in_plane;
  const float* w_g = weight + (int64_t(ci_group) * p.out_per_group + bc.co_base) * taps;
  const int64_t w_ci_stride = int64_t(p.out_per_group) * taps;

  float pool[kGeneralCo];
#pragma unroll
  for (int c = 0; c < kGeneralCo; ++c) pool[c] = 0.0f;
  // Pixel indices fit in 31 bits (validate() bounds the plane); unsigned so i + 256 cannot wrap.
  const unsigned count = unsigned(pix_end - pix_begin);
  for (unsigned i = tid; i < count; i += kGeneralThreads) {
    const int pix = pix_begin + int(i);
    const int oh = pix / p.out_w, ow = pix - oh * p.out_w;
    float acc[kGeneralCo];
#pragma unroll
    for (int c = 0; c < kGeneralCo; ++c) acc[c] = 0.0f;
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
        const float* x_tap = x_g + (ih * p.in_w + iw);
        const float* w_tap = w_g + (kh * p.kernel_w + kw);
        for (int ci = 0; ci < p.in_per_group; ++ci) {
          const float xv = __ldg(x_tap + ci * in_plane);
          const float* w_ci = w_tap + ci * w_ci_stride;
#pragma unroll
          for (int c = 0; c < kGeneralCo; ++c)  // channels past co_count repeat the last one;
            acc[c] = fmaf(xv, __ldg(w_ci + min(c, co_count - 1) * taps), acc[c]);  // never written
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kGeneralCo; ++c) pool[c] += acc[c];
  }

#pragma unroll
  for (int c = 0; c < kGeneralCo; ++c) {
    pool[c] = warp_allreduce_sum(pool[c]);
    if (lane == 0) warp_sums[warp][c] = pool[c];
  }
  __syncthreads();
  if (tid < co_count) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kGeneralWarps; ++w) s += warp_sums[w][tid];
    *partial_slot(partials, g, bc.n, bc.part, p.out_channels, bc.group * p.out_per_group + bc.co_base + tid) = s;
  }
}

/// The general path's grid: whole planes of pixels split into parts so that the grid has about
/// kGeneralTargetBlocks blocks, with at least a pixel per thread where the plane allows.
/// Throws std::runtime_error if the grid is too large.
inline FusedGrid general_grid(const Problem& pr) {
  const int64_t units = pr.out_h() * pr.out_w();
  const int64_t co_tiles = pr.groups * ((pr.out_per_group() + kGeneralCo - 1) / kGeneralCo);
  const int64_t wanted = (kGeneralTargetBlocks + pr.batch * co_tiles - 1) / (pr.batch * co_tiles);
  const int64_t max_parts = std::max<int64_t>(1, (units + kGeneralThreads - 1) / kGeneralThreads);
  return make_fused_grid(pr, units, kGeneralCo, std::min(wanted, max_parts), "conv_pool_general");
}

/// Launches conv_pool_general over grid `g` (from general_grid) on `stream`, writing the
/// partial sums (N, g.parts, Cout) to `partials`. Throws CudaError if the launch fails.
inline void launch_conv_pool_general(const Problem& pr, const DeviceInputs& in, const FusedGrid& g, float* partials,
                              cudaStream_t stream) {
  conv_pool_general<<<g.blocks, kGeneralThreads, 0, stream>>>(conv_params(pr), in.x, in.weight, partials, g);
  CUDA_CHECK_LAUNCH("conv_pool_general");
}

/// The Fused and Epilogue phases of every tiled stage's host half (07-11, 14-16): on a general
/// plan (`q.fast` false) conv_pool_general over `q.g`, else `fast(partials)`, the stage's own
/// launches; then the finish over the (N, q.g.parts, Cout) partials at the start of a.workspace.
/// Throws CudaError if a launch fails.
template <class Plan, class Fast>
void run_fused_plan(const GpuStageArgs& a, const Plan& q, Fast&& fast) {
  float* partials = static_cast<float*>(a.workspace);
  a.marks.begin(Phase::Fused);
  if (!q.fast) launch_conv_pool_general(a.problem, a.in, q.g, partials, a.stream);
  else fast(partials);
  a.marks.begin(Phase::Epilogue);
  launch_finish_pooled_logsumexp(a.problem, partials, q.g.parts, a.in, a.pooled, a.y, a.stream);
}

/// Lets `kernel` use `bytes` of dynamic shared memory: above 48 KB a kernel must opt in. A host
/// call, made once per problem outside the timed region. Throws CudaError if the device cannot.
template <class Kernel>
void opt_in_shared_memory(Kernel kernel, size_t bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace
}  // namespace ladder
