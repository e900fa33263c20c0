// Stage 02: pooling with global atomics. The conv is stage 01's; only the pool changes:
//  - conv:     one thread per convT output element (01_per_thread_loop/conv_transpose_gather.cuh);
//  - pool:     one thread per convT element does atomicAdd(&sums[plane], value): as many threads
//              as elements, neighbouring threads read neighbouring addresses (coalesced), but
//              every thread of a plane updates the same address (contention), and the order of
//              the additions, hence the rounding, changes from run to run;
//  - epilogue: unchanged from stage 01 (one thread per sample, two-pass log-sum-exp).
#include "01_per_thread_loop/conv_transpose_gather.cuh"
#include "logsumexp.hpp"

namespace ladder {
namespace {

// ---- stage 02 kernels: begin ---------------------------------------------------------------

/// sums[idx / plane_size] += conv_out[idx] for every convT element idx (64-bit: the output can
/// exceed 2^31 elements). conv_out is (N, Cout, Hout, Wout) NCHW, plane_size = Hout*Wout, and
/// sums has one fp32 slot per (n, co) plane, zeroed before the launch.
/// Changed from stage 01: one thread per element instead of one thread per plane. The reads are
/// now coalesced and there are millions of threads, but all plane_size threads of a plane add
/// into one address: the L2 serializes those atomics.
__global__ void pool_atomic_per_element(const float* __restrict__ conv_out, int64_t total,
                                        int64_t plane_size, float* __restrict__ sums) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  atomicAdd(&sums[idx / plane_size], conv_out[idx]);  // result unused: compiles to RED
}

/// pooled[i] = sums[i] / plane_size for the `planes` = N*Cout plane sums; one thread per plane.
__global__ void divide_by_plane_size(const float* __restrict__ sums, int64_t planes,
                                     int64_t plane_size, float* __restrict__ pooled) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= planes) return;
  pooled[i] = sums[i] / float(plane_size);
}

/// y[n] = scale * logsumexp_co(pooled[n, co] + bias[co]); one thread per sample, two passes:
/// the max first, so exp never overflows (torch.logsumexp's inf/NaN rules via lse_shift).
/// Unchanged from stage 01.
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

// ---- stage 02 kernels: end -----------------------------------------------------------------

// Workspace: the convT output, then (256-byte aligned) one fp32 sum per (n, co) plane.
size_t sums_offset(const Problem& p) { return (size_t(p.out_elems()) * sizeof(float) + 255) / 256 * 256; }
size_t workspace_bytes(const Problem& p) { return sums_offset(p) + size_t(p.pooled_elems()) * sizeof(float); }

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  float* conv_out = static_cast<float*>(a.workspace);
  float* sums = reinterpret_cast<float*>(static_cast<unsigned char*>(a.workspace) + sums_offset(p));
  const int64_t planes = p.pooled_elems(), plane_size = p.out_h() * p.out_w();
  constexpr int kBlock = 256;

  a.marks.begin(Phase::Conv);
  launch_conv_transpose2d_gather(p, a.in, conv_out, a.stream);

  a.marks.begin(Phase::Pool);
  // Atomics accumulate into whatever is there: zero the sums on every run, not once.
  CUDA_CHECK(cudaMemsetAsync(sums, 0, size_t(planes) * sizeof(float), a.stream));
  pool_atomic_per_element<<<blocks_for(p.out_elems(), kBlock, "pool_atomic_per_element"), kBlock,
                            0, a.stream>>>(conv_out, p.out_elems(), plane_size, sums);
  CUDA_CHECK_LAUNCH("pool_atomic_per_element");
  divide_by_plane_size<<<blocks_for(planes, kBlock, "divide_by_plane_size"), kBlock, 0, a.stream>>>(
      sums, planes, plane_size, a.pooled);
  CUDA_CHECK_LAUNCH("divide_by_plane_size");

  a.marks.begin(Phase::Epilogue);
  bias_logsumexp_per_thread<<<blocks_for(p.batch, kBlock, "bias_logsumexp_per_thread"), kBlock, 0,
                              a.stream>>>(a.pooled, a.in.bias, p.batch, p.out_channels,
                                          float(p.scale), a.y);
  CUDA_CHECK_LAUNCH("bias_logsumexp_per_thread");
}

}  // namespace

const StageDescriptor& stage_02_descriptor() {
  static const StageDescriptor d{"02", "atomics",
                                 "thread per element, atomicAdd into its plane's sum",
                                 nullptr, workspace_bytes, run};
  return d;
}

}  // namespace ladder
