// Stage 02: pooling with global atomics. The conv is stage 01's; only the pool changes:
//  - conv:     one thread per convT output element (lib/conv_transpose_gather.cuh);
//  - pool:     one thread per convT element does atomicAdd(&sums[plane], value): as many threads
//              as elements, neighbouring threads read neighbouring addresses (coalesced), but
//              every thread of a plane updates the same address (contention), and the order of
//              the additions, hence the rounding, changes from run to run;
//  - epilogue: unchanged from stage 01 (one thread per sample, two-pass log-sum-exp).
#include "lib/bias_logsumexp_per_thread.cuh"
#include "lib/conv_transpose_gather.cuh"
#include "lib/plane_sums.cuh"
#include "lib/register_stage.hpp"
#include "todo.cuh"
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
  // BEGIN SOLUTION
  // STUB: ladder_todo("02.1", "pool_atomic_per_element: add conv_out[idx] into its plane's sum with one atomicAdd");
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  atomicAdd(&sums[idx / plane_size], conv_out[idx]);  // result unused: compiles to RED
  // END SOLUTION
}

// ---- stage 02 kernels: end -----------------------------------------------------------------

size_t workspace_bytes(const Problem& p) { return conv_and_plane_sums_bytes(p); }

// The pool phase, alone (ladder --pool-only) or inside run(); its workspace is the plane sums.
void run_pool(const PoolArgs& a) {
  const Problem& p = a.problem;
  float* sums = static_cast<float*>(a.workspace);
  const int64_t planes = p.pooled_elems(), plane_size = p.out_h() * p.out_w();
  constexpr int kBlock = 256;

  a.marks.begin(Phase::Pool);
  // Atomics accumulate into whatever is there: zero the sums on every run, not once.
  CUDA_CHECK(cudaMemsetAsync(sums, 0, size_t(planes) * sizeof(float), a.stream));
  pool_atomic_per_element<<<blocks_for(p.out_elems(), kBlock, "pool_atomic_per_element"), kBlock,
                            0, a.stream>>>(a.conv_out, p.out_elems(), plane_size, sums);
  CUDA_CHECK_LAUNCH("pool_atomic_per_element");
  launch_divide_by_plane_size(p, sums, a.pooled, a.stream);
}

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  conv_then_pool(a, run_pool, plane_sums(p, a.workspace));

  a.marks.begin(Phase::Epilogue);
  launch_bias_logsumexp_per_thread(p, a.pooled, a.in.bias, a.y, a.stream);
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "thread per element, atomicAdd into its plane's sum";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.run_pool = run_pool;
  d.pool_workspace_bytes = plane_sums_bytes;
  d.changes = {Phase::Pool};  // the conv is stage 01's: "vs previous" compares the pool phase
}

}  // namespace ladder
