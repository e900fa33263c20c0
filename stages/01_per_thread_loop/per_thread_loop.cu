// Stage 01: the first GPU port. Correct first, fast later:
//  - conv:     one thread per convT output element (conv_transpose_gather.cuh), output in HBM;
//  - pool:     one thread per (n, co) walks its whole plane, so only N*Cout threads run and
//              neighbouring threads read addresses a whole plane apart (uncoalesced);
//  - epilogue: one thread per sample: + bias, stable log-sum-exp over channels, x scale.
#include "01_per_thread_loop/conv_transpose_gather.cuh"
#include "logsumexp.hpp"

namespace ladder {
namespace {

// ---- stage 01 kernels: begin ---------------------------------------------------------------

/// pooled[i] = mean of plane i of conv_out, i = n*Cout + co; plane_size = Hout*Wout.
/// One thread per plane, sequential fp32 sum.
__global__ void pool_per_thread(const float* __restrict__ conv_out, int64_t planes,
                                int64_t plane_size, float* __restrict__ pooled) {
  const int64_t plane = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (plane >= planes) return;
  const float* src = conv_out + plane * plane_size;
  float sum = 0.0f;
  for (int64_t j = 0; j < plane_size; ++j) sum += src[j];
  pooled[plane] = sum / float(plane_size);
}

/// y[n] = scale * logsumexp_co(pooled[n, co] + bias[co]); one thread per sample, two passes:
/// the max first, so exp never overflows (torch.logsumexp's inf/NaN rules via lse_shift).
__global__ void bias_logsumexp_per_thread(const float* __restrict__ pooled,
                                          const float* __restrict__ bias, int64_t batch,
                                          int64_t channels, float scale, float* __restrict__ y) {
  const int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= batch) return;
  const float* z = pooled + n * channels;
  float max_z = -INFINITY;
  for (int64_t c = 0; c < channels; ++c) max_z = fmaxf(max_z, z[c] + bias[c]);
  const float shift = lse_shift(max_z);
  float sum = 0.0f;  // a NaN z makes this NaN even though fmaxf skipped it
  for (int64_t c = 0; c < channels; ++c) sum += expf(z[c] + bias[c] - shift);
  y[n] = scale * (logf(sum) + shift);
}

// ---- stage 01 kernels: end -----------------------------------------------------------------

size_t workspace_bytes(const Problem& p) { return size_t(p.out_elems()) * sizeof(float); }

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  float* conv_out = static_cast<float*>(a.workspace);
  constexpr int kBlock = 128;

  a.marks.begin(Phase::Conv);
  launch_conv_transpose2d_gather(p, a.in, conv_out, a.stream);

  a.marks.begin(Phase::Pool);
  const int64_t planes = p.pooled_elems();
  pool_per_thread<<<blocks_for(planes, kBlock, "pool_per_thread"), kBlock, 0, a.stream>>>(
      conv_out, planes, p.out_h() * p.out_w(), a.pooled);
  CUDA_CHECK_LAUNCH("pool_per_thread");

  a.marks.begin(Phase::Epilogue);
  bias_logsumexp_per_thread<<<blocks_for(p.batch, kBlock, "bias_logsumexp_per_thread"), kBlock, 0,
                              a.stream>>>(a.pooled, a.in.bias, p.batch, p.out_channels,
                                          float(p.scale), a.y);
  CUDA_CHECK_LAUNCH("bias_logsumexp_per_thread");
}

}  // namespace

const StageDescriptor& stage_01_descriptor() {
  static const StageDescriptor d{"01", "per_thread_loop",
                                 "naive GPU port: thread per output, thread per plane, thread per sample",
                                 nullptr, workspace_bytes, run};
  return d;
}

}  // namespace ladder
