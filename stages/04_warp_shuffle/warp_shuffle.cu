// Stage 04: warp shuffles, for both reductions. The conv is stage 01's; the loads are stage
// 03's; the reductions change:
//  - conv:     one thread per convT output element (lib/conv_transpose_gather.cuh);
//  - pool:     each block reduces one chunk of one plane as in stage 03 (first add during
//              load), but the block's 256 partial sums are combined in registers: each warp
//              sums its 32 values with __shfl_down_sync (no shared memory, no barrier), one
//              shared slot per warp carries the 8 warp sums to warp 0, which shuffles again,
//              and thread 0 makes one atomicAdd into the plane's sum;
//  - epilogue: one warp per sample (lib/bias_logsumexp_warp.cuh): the same butterfly with a
//              different combine, the online log-sum-exp pair (max, sum of exp).
#include <stdexcept>
#include <string>

#include "lib/bias_logsumexp_warp.cuh"
#include "lib/conv_transpose_gather.cuh"
#include "lib/plane_sums.cuh"
#include "lib/register_stage.hpp"
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 04 kernels: begin ---------------------------------------------------------------

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kBlock = 256;          // threads per block: 8 warps
constexpr int kLoadsPerThread = 8;   // elements each thread loads and adds before the reduction
constexpr int kChunk = kBlock * kLoadsPerThread;  // elements one block reduces: 2048 (8 KiB)
static_assert(kBlock % kWarp == 0 && kBlock / kWarp <= kWarp, "one warp reduces the warp sums");

/// The sum of v over the 32 lanes of a warp, in lane 0 (the other lanes hold partial sums).
/// Five shuffle steps (offsets 16, 8, 4, 2, 1): lane i adds lane i + offset's value, read
/// straight from its register. All in registers: no shared memory and no barrier.
__device__ __forceinline__ float warp_sum(float v) {
  // BEGIN SOLUTION 04
  // STUB: ladder_todo("04.1", "warp_sum: the warp's sum of v in lane 0, with __shfl_down_sync");
  // STUB: ladder_unused(kFullMask);
  // STUB: return v;
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
  // END SOLUTION
}

/// sums[plane] += sum of conv_out[plane, chunk*kChunk .. +kChunk) for every (plane, chunk).
/// conv_out is (N, Cout, Hout, Wout) NCHW; plane = n*Cout + co has plane_size = Hout*Wout
/// elements (< 2^31) and starts at plane*plane_size (64-bit). Grid: planes*chunks_per_plane
/// blocks flattened into x (block b reduces chunk b % chunks_per_plane of plane
/// b / chunks_per_plane), kBlock threads each; sums (one fp32 per plane) is zeroed before.
/// Changed from stage 03: only the block's reduction. The shared-memory tree took
/// log2(kBlock) = 8 levels with a barrier after each; here each warp reduces in registers with
/// five shuffles, and one barrier hands the 8 warp sums to warp 0.
__global__ void pool_warp_shuffle(const float* __restrict__ conv_out, int plane_size,
                                  unsigned chunks_per_plane, float* __restrict__ sums) {
  const int tid = int(threadIdx.x);
  const unsigned plane = blockIdx.x / chunks_per_plane;
  const unsigned chunk = blockIdx.x - plane * chunks_per_plane;
  const float* src = conv_out + int64_t(plane) * plane_size;

  // First add during load, as in stage 03.
  // BEGIN SOLUTION 03
  // STUB: ladder_todo("04.2", "the loads, as in stage 03: kLoadsPerThread elements, kBlock apart, into acc");
  // STUB: float acc = 0.0f;
  // STUB: ladder_unused(tid, src, chunk, plane_size);
  const unsigned begin = chunk * unsigned(kChunk) + unsigned(tid);
  const float* mine = src + begin;  // element k of this thread is mine[k * kBlock]
  float loaded[kLoadsPerThread];
#pragma unroll
  for (int k = 0; k < kLoadsPerThread; ++k)
    loaded[k] = begin + unsigned(k * kBlock) < unsigned(plane_size) ? mine[k * kBlock] : 0.0f;
  float acc = 0.0f;
#pragma unroll
  for (int k = 0; k < kLoadsPerThread; ++k) acc += loaded[k];
  // END SOLUTION

  // Block reduce: shuffles inside each warp, one shared slot per warp, shuffles in warp 0.
  // BEGIN SOLUTION 04
  // STUB: ladder_todo("04.3", "the block's sum: warp_sum in each warp, then over the warps; one atomicAdd");
  // STUB: ladder_unused(warp_sum(acc), plane, sums);
  __shared__ float warp_sums[kBlock / kWarp];
  const int lane = int(threadIdx.x % kWarp), warp = int(threadIdx.x / kWarp);
  acc = warp_sum(acc);
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < kBlock / kWarp ? warp_sums[lane] : 0.0f;  // every lane joins the full-mask shuffle
    acc = warp_sum(acc);
    if (lane == 0) atomicAdd(&sums[plane], acc);  // one atomic per block
  }
  // END SOLUTION
}

// ---- stage 04 kernels: end -----------------------------------------------------------------

size_t workspace_bytes(const Problem& p) { return conv_and_plane_sums_bytes(p); }

// The pool phase, alone (ladder --pool-only) or inside run(); its workspace is the plane sums.
void run_pool(const PoolArgs& a) {
  const Problem& p = a.problem;
  float* sums = static_cast<float*>(a.workspace);
  const int64_t planes = p.pooled_elems(), plane_size = p.out_h() * p.out_w();

  a.marks.begin(Phase::Pool);
  const int64_t chunks_per_plane = (plane_size + kChunk - 1) / kChunk;  // as in stage 03
  const int64_t blocks = planes * chunks_per_plane;
  if (blocks > 2147483647LL)
    throw std::runtime_error("launch configuration of pool_warp_shuffle: " + std::to_string(planes) +
                             " planes x " + std::to_string(chunks_per_plane) +
                             " chunks exceed CUDA's grid limit of 2^31 - 1 blocks");
  CUDA_CHECK(cudaMemsetAsync(sums, 0, size_t(planes) * sizeof(float), a.stream));  // every run
  pool_warp_shuffle<<<unsigned(blocks), kBlock, 0, a.stream>>>(a.conv_out, int(plane_size),
                                                              unsigned(chunks_per_plane), sums);
  CUDA_CHECK_LAUNCH("pool_warp_shuffle");
  launch_divide_by_plane_size(p, sums, a.pooled, a.stream);
}

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  conv_then_pool(a, run_pool, plane_sums(p, a.workspace));

  a.marks.begin(Phase::Epilogue);
  launch_bias_logsumexp_warp(p, a.pooled, a.in.bias, a.y, a.stream);
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "warp shuffles for the pool's block sum and the log-sum-exp epilogue";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.run_pool = run_pool;
  d.pool_workspace_bytes = plane_sums_bytes;
  d.changes = {Phase::Pool};  // the conv is stage 01's: "vs previous" compares the pool phase
}

}  // namespace ladder
