// Stage 01: the first GPU port. Correct first, fast later:
//  - conv:     one thread per convT output element (lib/conv_transpose_gather.cuh), output in HBM;
//  - pool:     one thread per (n, co) walks its whole plane, so only N*Cout threads run and
//              neighbouring threads read addresses a whole plane apart (uncoalesced);
//  - epilogue: one thread per sample: + bias, stable log-sum-exp over channels, x scale.
#include "lib/bias_logsumexp_per_thread.cuh"
#include "lib/conv_transpose_gather.cuh"
#include "lib/register_stage.hpp"
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 01 kernels: begin ---------------------------------------------------------------

/// pooled[i] = mean of plane i of conv_out, i = n*Cout + co; plane_size = Hout*Wout.
/// One thread per plane, sequential fp32 sum.
__global__ void pool_per_thread(const float* __restrict__ conv_out, int64_t planes,
                                int64_t plane_size, float* __restrict__ pooled) {
  // BEGIN SOLUTION
  // STUB: ladder_todo("01.1", "pool_per_thread: thread `plane` writes its plane's mean to pooled[plane]");
  const int64_t plane = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (plane >= planes) return;
  const float* src = conv_out + plane * plane_size;
  float sum = 0.0f;
  for (int64_t j = 0; j < plane_size; ++j) sum += src[j];
  pooled[plane] = sum / float(plane_size);
  // END SOLUTION
}

// ---- stage 01 kernels: end -----------------------------------------------------------------

size_t workspace_bytes(const Problem& p) { return size_t(p.out_elems()) * sizeof(float); }

// The pool phase, alone (ladder --pool-only) or inside run(); needs no workspace.
void run_pool(const PoolArgs& a) {
  const Problem& p = a.problem;
  constexpr int kBlock = 128;
  a.marks.begin(Phase::Pool);
  const int64_t planes = p.pooled_elems();
  pool_per_thread<<<blocks_for(planes, kBlock, "pool_per_thread"), kBlock, 0, a.stream>>>(
      a.conv_out, planes, p.out_h() * p.out_w(), a.pooled);
  CUDA_CHECK_LAUNCH("pool_per_thread");
}

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  conv_then_pool(a, run_pool, nullptr);

  a.marks.begin(Phase::Epilogue);
  launch_bias_logsumexp_per_thread(p, a.pooled, a.in.bias, a.y, a.stream);
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "naive GPU port: thread per output, thread per plane, thread per sample";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.run_pool = run_pool;
  d.deterministic = true;  // every sum in one thread, in order
}

}  // namespace ladder
