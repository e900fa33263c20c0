// Stage 01's epilogue, which stages 02 and 03 keep unchanged (stage 04 replaces it).
#pragma once

#include "cuda_check.hpp"
#include "logsumexp.hpp"
#include "stage.hpp"
#include "todo.cuh"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

/// y[n] = scale * logsumexp_co(pooled[n, co] + bias[co]); pooled (N, Cout), bias (Cout), y (N).
/// One thread per sample, two passes: the max first, so exp never overflows (torch.logsumexp's
/// inf/NaN rules via lse_shift).
__global__ void bias_logsumexp_per_thread(const float* __restrict__ pooled,
                                          const float* __restrict__ bias, int64_t batch,
                                          int64_t channels, float scale, float* __restrict__ y) {
  // BEGIN SOLUTION 01
  // STUB: ladder_todo("01.2", "bias_logsumexp_per_thread: y[n], the max subtracted first");
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= batch) return;
  const float* z = pooled + n * channels;
  float max_z = -INFINITY;
  for (int64_t c = 0; c < channels; ++c) max_z = fmaxf(max_z, z[c] + bias[c]);
  const float shift = lse_shift(max_z);
  float sum = 0.0f;  // a NaN z makes this NaN even though fmaxf skipped it
  for (int64_t c = 0; c < channels; ++c) sum += expf(z[c] + bias[c] - shift);
  y[n] = scale * (logf(sum) + shift);
  // END SOLUTION
}

/// Launches bias_logsumexp_per_thread over the batch on `stream`; throws CudaError on failure.
void launch_bias_logsumexp_per_thread(const Problem& p, const float* pooled, const float* bias,
                                      float* y, cudaStream_t stream) {
  constexpr int kBlock = 128;
  bias_logsumexp_per_thread<<<blocks_for(p.batch, kBlock, "bias_logsumexp_per_thread"), kBlock, 0,
                              stream>>>(pooled, bias, p.batch, p.out_channels, float(p.scale), y);
  CUDA_CHECK_LAUNCH("bias_logsumexp_per_thread");
}

}  // namespace
}  // namespace ladder
