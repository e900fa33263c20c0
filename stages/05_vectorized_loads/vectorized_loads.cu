// Stage 05: vectorized loads with several in flight. The conv is stage 01's, the reductions
// stage 04's (warp shuffles); only how the pool phase reads memory changes:
//  - conv:     one thread per convT output element (lib/conv_transpose_gather.cuh);
//  - pool:     each thread reads 16 bytes per load (float4) and issues kUnroll of them before it
//              adds any, and each block grid-strides over a chunk 8 times larger than stage 04's,
//              so the reduction's fixed cost (shuffles, a barrier, an atomic) is paid once per
//              64 KiB instead of once per 8 KiB; the block sum is stage 04's;
//  - epilogue: stage 04's warp per sample (lib/bias_logsumexp_warp.cuh).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lib/aligned_split.cuh"
#include "lib/bias_logsumexp_warp.cuh"
#include "lib/conv_transpose_gather.cuh"
#include "lib/plane_sums.cuh"
#include "lib/register_stage.hpp"
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 05 kernels: begin ---------------------------------------------------------------

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kBlock = 256;                       // threads per block: 8 warps
constexpr int kUnroll = 4;                        // independent float4 loads per thread per step
constexpr int kSteps = 4;                         // grid-stride steps over a block's chunk
constexpr int kChunk4 = kBlock * kUnroll * kSteps;  // float4s one block reduces: 4096 (64 KiB)
static_assert(kBlock % kWarp == 0 && kBlock / kWarp <= kWarp, "one warp reduces the warp sums");

/// The sum of v over the 32 lanes of a warp, in lane 0 (the other lanes hold partial sums).
/// Five shuffle steps (offsets 16, 8, 4, 2, 1): lane i adds lane i + offset's value, read
/// straight from its register. All in registers: no shared memory and no barrier.
__device__ __forceinline__ float warp_sum(float v) {
  // BEGIN SOLUTION 04
  // STUB: ladder_todo("05.1", "warp_sum: the warp's sum of v in lane 0, with __shfl_down_sync");
  // STUB: ladder_unused(kFullMask);
  // STUB: return v;
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
  // END SOLUTION
}

/// sums[plane] += sum of one chunk of plane `plane` of conv_out, for every (plane, chunk).
/// conv_out is (N, Cout, Hout, Wout) NCHW; plane = n*Cout + co has plane_size = Hout*Wout
/// elements (< 2^31) and starts at plane*plane_size floats (64-bit offset): 16-byte aligned
/// only when plane*plane_size is a multiple of 4. So each plane is split into
///   head: the 0-3 floats before the first 16-byte boundary, read as scalars;
///   body: body4 = (plane_size - head)/4 aligned float4s, cut into chunks of kChunk4;
///   tail: the 0-3 floats after the body, read as scalars.
/// Grid: planes*chunks_per_plane blocks flattened into x (block b reduces chunk
/// b % chunks_per_plane of plane b / chunks_per_plane; chunk 0 also reads the head and tail),
/// kBlock threads each; sums (one fp32 per plane) is zeroed before the launch.
/// Changed from stage 04: only the loads.
///  - 16-byte loads (LDG.E.128): a quarter of the load instructions, and kUnroll of them issued
///    back to back, so each thread has 64 bytes in flight before it adds anything (stage 04:
///    8 scalar loads, 32 bytes);
///  - a grid-stride loop: a block walks kSteps passes over a 64 KiB chunk, so a plane needs
///    an eighth of the blocks, block sums and atomics that stage 04 needs.
__global__ void pool_vectorized(const float* __restrict__ conv_out, int plane_size,
                                  unsigned chunks_per_plane, float* __restrict__ sums) {
  const int tid = int(threadIdx.x);
  const unsigned plane = blockIdx.x / chunks_per_plane;
  const int chunk = int(blockIdx.x - plane * chunks_per_plane);
  const float* src = conv_out + int64_t(plane) * plane_size;

  // BEGIN SOLUTION
  // STUB: ladder_todo("05.2", "pool_vectorized's loads: head, float4 body (kUnroll in flight), tail, into acc");
  // STUB: float acc = 0.0f;
  // STUB: ladder_unused(tid, chunk, src, plane_size);
  // Split the plane by the address (lib/aligned_split.cuh), so any base offset works (src is at
  // least 4-byte aligned).
  const ChunkSplit split = split_chunk(reinterpret_cast<uintptr_t>(src), plane_size);
  const int head = split.head, body4 = split.body4, tail_begin = split.tail_begin;
  const float4* body = reinterpret_cast<const float4*>(src + head);

  float acc = 0.0f;
  if (chunk == 0) {  // at most 3 + 3 scalar loads per plane
    if (tid < head) acc += src[tid];
    if (tid < plane_size - tail_begin) acc += src[tail_begin + tid];
  }

  // Grid-stride over this block's chunk of the body: kUnroll independent 16-byte loads first,
  // then the adds. Index arithmetic in 32 bits: body4 < 2^29.
  const int begin = chunk * kChunk4;
  const int end = min(begin + kChunk4, body4);
  for (int i = begin + tid; i < end; i += kBlock * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = i + u * kBlock;
      v[u] = j < end ? body[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  // END SOLUTION

  // Block reduce: shuffles inside each warp, one shared slot per warp, shuffles in warp 0.
  // BEGIN SOLUTION 04
  // STUB: ladder_todo("05.3", "the block's sum: warp_sum in each warp, then over the warps; one atomicAdd");
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

// ---- stage 05 kernels: end -----------------------------------------------------------------

size_t workspace_bytes(const Problem& p) { return conv_and_plane_sums_bytes(p); }

// The pool phase, alone (ladder --pool-only) or inside run(); its workspace is the plane sums.
void run_pool(const PoolArgs& a) {
  const Problem& p = a.problem;
  float* sums = static_cast<float*>(a.workspace);
  const int64_t planes = p.pooled_elems(), plane_size = p.out_h() * p.out_w();

  a.marks.begin(Phase::Pool);
  // The body of a plane has at most plane_size/4 float4s, whatever its head. At the KernelBench
  // size: 2048 planes x 17 chunks = 34816 blocks, ~33 waves of the 1056 (8 per SM) an
  // H100/H200 holds at once.
  const int64_t chunks_per_plane = std::max<int64_t>(1, (plane_size / 4 + kChunk4 - 1) / kChunk4);
  const int64_t blocks = planes * chunks_per_plane;
  if (blocks > 2147483647LL)
    throw std::runtime_error("launch configuration of pool_vectorized: " + std::to_string(planes) +
                             " planes x " + std::to_string(chunks_per_plane) +
                             " chunks exceed CUDA's grid limit of 2^31 - 1 blocks");
  CUDA_CHECK(cudaMemsetAsync(sums, 0, size_t(planes) * sizeof(float), a.stream));  // every run
  pool_vectorized<<<unsigned(blocks), kBlock, 0, a.stream>>>(a.conv_out, int(plane_size),
                                                              unsigned(chunks_per_plane), sums);
  CUDA_CHECK_LAUNCH("pool_vectorized");
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
  d.idea = "16-byte loads, several in flight, grid-stride chunks of 64 KiB";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.run_pool = run_pool;
  d.pool_workspace_bytes = plane_sums_bytes;
  d.changes = {Phase::Pool};  // the conv is stage 01's: "vs previous" compares the pool phase
}

}  // namespace ladder
