// Stage 03: block-level tree reduction in shared memory (Harris, "Optimizing Parallel Reduction
// in CUDA"). The conv is stage 01's; only the pool changes:
//  - conv:     one thread per convT output element (lib/conv_transpose_gather.cuh);
//  - pool:     each block reduces one chunk of one plane: every thread loads kLoadsPerThread
//              elements and adds them as it loads (first add during load), the block halves
//              its partial sums level by level in shared memory (sequential addressing, a
//              barrier between levels), and thread 0 adds the block's sum into the plane's sum
//              with one atomicAdd: one atomic per 2048 elements instead of one per element;
//  - epilogue: unchanged from stage 01 (one thread per sample, two-pass log-sum-exp).
#include <stdexcept>
#include <string>

#include "lib/bias_logsumexp_per_thread.cuh"
#include "lib/conv_transpose_gather.cuh"
#include "lib/plane_sums.cuh"
#include "lib/register_stage.hpp"
#include "todo.cuh"
#include "logsumexp.hpp"

namespace ladder {
namespace {

// ---- stage 03 kernels: begin ---------------------------------------------------------------

constexpr int kBlock = 256;          // threads per block: a power of two, for the tree
constexpr int kLoadsPerThread = 8;   // elements each thread loads and adds before the tree
constexpr int kChunk = kBlock * kLoadsPerThread;  // elements one block reduces: 2048 (8 KiB)
static_assert((kBlock & (kBlock - 1)) == 0, "the tree halves the block: kBlock must be 2^k");

// The tree's addressing, a compile-time switch for the chapter's exercises (Harris's kernels
// #1-#3, each with the first add during load kept):
//   1  interleaved, divergent: at stride s thread t works when t % 2s == 0 (half of each warp
//      idles from the first level on);
//   2  interleaved, strided index: thread t works on index 2*s*t (no divergence, but the
//      stride makes threads of one warp hit the same shared-memory bank);
//   3  sequential (the default): thread t < s adds sh[t + s].
// Build a variant: cmake -DLADDER_TREE_ADDRESSING=1 (or 2); the ladder reports the default.
#ifndef LADDER_TREE_ADDRESSING
#define LADDER_TREE_ADDRESSING 3
#endif
static_assert(LADDER_TREE_ADDRESSING >= 1 && LADDER_TREE_ADDRESSING <= 3,
              "LADDER_TREE_ADDRESSING is 1 (interleaved), 2 (strided index) or 3 (sequential)");

/// sums[plane] += sum of conv_out[plane, chunk*kChunk .. +kChunk) for every (plane, chunk).
/// conv_out is (N, Cout, Hout, Wout) NCHW; plane = n*Cout + co has plane_size = Hout*Wout
/// elements (< 2^31) and starts at plane*plane_size (64-bit). Grid: planes*chunks_per_plane
/// blocks flattened into x (block b reduces chunk b % chunks_per_plane of plane
/// b / chunks_per_plane), kBlock threads each; sums (one fp32 per plane) is zeroed before.
/// Changed from stage 02: a block first reduces its chunk on chip, then makes one atomicAdd.
///  - First add during load: thread t adds elements t, t+kBlock, ... (kLoadsPerThread of
///    them, coalesced across the warp, all loads issued before the adds), so no thread idles
///    at the first tree level and each block amortizes its tree over 8 KiB of reads.
///  - Sequential addressing: at level s thread t < s adds sh[t + s]; the active threads are
///    contiguous (whole warps retire, no divergence inside a warp) and a warp reads 32
///    consecutive words (no shared-memory bank conflicts).
///  - A __syncthreads() between levels: level s reads what level 2s wrote.
///  - Shared memory holds one float per thread (sized by the block, never by the problem).
__global__ void pool_shared_tree(const float* __restrict__ conv_out, int plane_size,
                                 unsigned chunks_per_plane, float* __restrict__ sums) {
  const unsigned tid = threadIdx.x;
  const unsigned plane = blockIdx.x / chunks_per_plane;
  const unsigned chunk = blockIdx.x - plane * chunks_per_plane;
  const float* src = conv_out + int64_t(plane) * plane_size;

  // BEGIN SOLUTION
  // STUB: ladder_todo("03.1", "pool_shared_tree: the loads, a tree in shared memory, one atomicAdd");
  // STUB: ladder_unused(tid, src, chunk, plane_size, sums);
  __shared__ float sh[kBlock];

  // First add during load: all kLoadsPerThread loads are issued before the first add, so
  // they are in flight together. Indices inside a plane fit in 32 bits; unsigned, because the
  // last chunk's begin + kChunk may pass 2^31 - 1 when plane_size is close to it.
  const unsigned begin = chunk * unsigned(kChunk) + tid;
  const float* mine = src + begin;  // element k of this thread is mine[k * kBlock]
  float loaded[kLoadsPerThread];
#pragma unroll
  for (int k = 0; k < kLoadsPerThread; ++k)
    loaded[k] = begin + unsigned(k * kBlock) < unsigned(plane_size) ? mine[k * kBlock] : 0.0f;
  float v = 0.0f;
#pragma unroll
  for (int k = 0; k < kLoadsPerThread; ++k) v += loaded[k];
  sh[tid] = v;
  __syncthreads();

  // Tree: log2(kBlock) levels, each halving the active threads; a barrier between levels.
#if LADDER_TREE_ADDRESSING == 1
  for (unsigned s = 1; s < kBlock; s <<= 1) {
    if (tid % (2 * s) == 0) sh[tid] += sh[tid + s];  // divergent: active lanes are spread out
    __syncthreads();
  }
#elif LADDER_TREE_ADDRESSING == 2
  for (unsigned s = 1; s < kBlock; s <<= 1) {
    const unsigned index = 2 * s * tid;  // bank conflicts: a warp's indices are 2s words apart
    if (index < kBlock) sh[index] += sh[index + s];
    __syncthreads();
  }
#else
  for (unsigned s = kBlock / 2; s > 0; s >>= 1) {
    if (tid < s) sh[tid] += sh[tid + s];
    __syncthreads();
  }
#endif
  if (tid == 0) atomicAdd(&sums[plane], sh[0]);  // one atomic per block
  // END SOLUTION
}

// ---- stage 03 kernels: end -----------------------------------------------------------------

size_t workspace_bytes(const Problem& p) { return conv_and_plane_sums_bytes(p); }

// The pool phase, alone (ladder --pool-only) or inside run(); its workspace is the plane sums.
void run_pool(const PoolArgs& a) {
  const Problem& p = a.problem;
  float* sums = static_cast<float*>(a.workspace);
  const int64_t planes = p.pooled_elems(), plane_size = p.out_h() * p.out_w();

  a.marks.begin(Phase::Pool);
  // At the KernelBench size: 2048 planes x 130 chunks = 266240 blocks, ~250 waves of the
  // 1056 blocks (8 per SM) an H100/H200 holds at once: plenty to hide the tail of the grid.
  const int64_t chunks_per_plane = (plane_size + kChunk - 1) / kChunk;
  const int64_t blocks = planes * chunks_per_plane;
  if (blocks > 2147483647LL)
    throw std::runtime_error("launch configuration of pool_shared_tree: " + std::to_string(planes) +
                             " planes x " + std::to_string(chunks_per_plane) +
                             " chunks exceed CUDA's grid limit of 2^31 - 1 blocks");
  CUDA_CHECK(cudaMemsetAsync(sums, 0, size_t(planes) * sizeof(float), a.stream));  // every run
  pool_shared_tree<<<unsigned(blocks), kBlock, 0, a.stream>>>(a.conv_out, int(plane_size),
                                                             unsigned(chunks_per_plane), sums);
  CUDA_CHECK_LAUNCH("pool_shared_tree");
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
  d.idea = "block tree reduction in shared memory, one atomicAdd per block";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.run_pool = run_pool;
  d.pool_workspace_bytes = plane_sums_bytes;
  d.changes = {Phase::Pool};  // the conv is stage 01's: "vs previous" compares the pool phase
}

}  // namespace ladder
