// The warp-per-sample epilogue that stage 04 introduces and every later stage with a separate
// epilogue launch keeps: + bias, log-sum-exp over the channels with one warp, x scale.
#pragma once

#include "cuda_check.hpp"
#include "logsumexp.hpp"
#include "stage.hpp"
#include "lib/warp_reduce.cuh"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

/// y[n] = scale * logsumexp_co(pooled[n, co] + bias[co]) for pooled (N, Cout), bias (Cout),
/// y (N): one warp per sample (blockDim a multiple of 32, grid covering batch*32 threads).
/// Lane l folds channels l, l+32, ... into an online (max, sum of exp(z - max)) pair in one pass
/// (lse_push), and the 32 pairs are merged in five butterfly steps with __shfl_xor_sync
/// (warp_allreduce_lse: a warp reduction like the pool's sum, with lse_merge as the combine).
/// Lanes without a channel (Cout < 32) hold the empty pair (-inf, 0), which merges as a no-op.
/// Every step keeps torch.logsumexp's max shift, so nothing overflows; inf and NaN follow its
/// rules.
__global__ void bias_logsumexp_warp(const float* __restrict__ pooled, const float* __restrict__ bias,
                                    int64_t batch, int channels, float scale, float* __restrict__ y) {
  const int64_t n = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = int(threadIdx.x % 32);
  if (n >= batch) return;  // n is the same for the whole warp: full warps leave together
  const float* z = pooled + n * channels;
  float max_z = -INFINITY, sum_exp = 0.0f;
  for (int c = lane; c < channels; c += 32) lse_push(max_z, sum_exp, z[c] + bias[c]);
  warp_allreduce_lse(max_z, sum_exp);
  if (lane == 0) y[n] = scale * lse_finish(max_z, sum_exp);
}

/// Launches bias_logsumexp_warp for the problem on `stream` (4 samples per 128-thread block).
/// Throws std::runtime_error if the grid is too large, CudaError if the launch fails.
void launch_bias_logsumexp_warp(const Problem& p, const float* pooled, const float* bias, float* y,
                                cudaStream_t stream) {
  constexpr int kBlock = 128;  // 4 warps: 4 samples per block
  bias_logsumexp_warp<<<blocks_for(p.batch * 32, kBlock, "bias_logsumexp_warp"), kBlock, 0, stream>>>(
      pooled, bias, p.batch, int(p.out_channels), float(p.scale), y);
  CUDA_CHECK_LAUNCH("bias_logsumexp_warp");
}

}  // namespace
}  // namespace ladder
