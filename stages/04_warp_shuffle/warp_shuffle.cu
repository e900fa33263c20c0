// Stage 04: warp shuffles and 16-byte loads. The conv is stage 01's; the pool and the epilogue
// change:
//  - conv:     one thread per convT output element (lib/conv_transpose_gather.cuh);
//  - pool:     each block reduces one chunk of one plane: each thread walks the chunk with
//              float4 loads, kUnroll independent 16-byte loads in flight before it adds any of
//              them; a warp then sums its 32 values with __shfl_down_sync (registers only, no
//              barrier), the block combines its warps through one shared slot per warp, and
//              thread 0 makes one atomicAdd into the plane's sum;
//  - epilogue: one warp per sample: each lane folds its channels into an online
//              (max, sum of exp) pair, and the lanes merge their pairs with __shfl_xor_sync.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "lib/aligned_split.cuh"
#include "lib/conv_transpose_gather.cuh"
#include "lib/plane_sums.cuh"
#include "lib/register_stage.hpp"
#include "lib/warp_reduce.cuh"
#include "logsumexp.hpp"

namespace ladder {
namespace {

// ---- stage 04 kernels: begin ---------------------------------------------------------------

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kBlock = 256;                       // 8 warps
constexpr int kUnroll = 4;                        // independent float4 loads per thread per step
constexpr int kSteps = 4;                         // grid-stride steps over a block's chunk
constexpr int kChunk4 = kBlock * kUnroll * kSteps;  // float4s one block reduces: 4096 (64 KiB)
static_assert(kBlock % kWarp == 0 && kBlock / kWarp <= kWarp, "one warp reduces the warp sums");

/// The sum of v over the 32 lanes of a warp, in lane 0 (the other lanes hold partial sums).
/// Five shuffle steps, all in registers: no shared memory and no barrier.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_down_sync(kFullMask, v, offset);
  return v;
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
/// Changed from stage 03:
///  - 16-byte loads (LDG.E.128): a quarter of the load instructions, and kUnroll of them issued
///    back to back, so each thread has 64 bytes in flight before it adds anything;
///  - several elements per thread: a block grid-strides kSteps times over 64 KiB, so the
///    reduction's fixed cost is paid once per 64 KiB instead of once per 8 KiB;
///  - the tree runs in registers with warp shuffles; shared memory only carries one value per
///    warp between the two shuffle rounds: one barrier instead of log2(kBlock) + 1.
__global__ void pool_warp_shuffle(const float* __restrict__ conv_out, int plane_size,
                                  unsigned chunks_per_plane, float* __restrict__ sums) {
  __shared__ float warp_sums[kBlock / kWarp];
  const int tid = int(threadIdx.x), lane = int(threadIdx.x % kWarp), warp = int(threadIdx.x / kWarp);
  const unsigned plane = blockIdx.x / chunks_per_plane;
  const int chunk = int(blockIdx.x - plane * chunks_per_plane);
  const float* src = conv_out + int64_t(plane) * plane_size;

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

  // Block reduce: shuffles inside each warp, one shared slot per warp, shuffles in warp 0.
  acc = warp_sum(acc);
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < kBlock / kWarp ? warp_sums[lane] : 0.0f;
    acc = warp_sum(acc);
    if (lane == 0) atomicAdd(&sums[plane], acc);  // one atomic per block
  }
}

/// y[n] = scale * logsumexp_co(pooled[n, co] + bias[co]) for pooled (N, Cout), bias (Cout):
/// one warp per sample (blockDim a multiple of 32, grid covering batch*32 threads).
/// Changed from stages 01-03 (one thread per sample, two passes over the channels): lane l
/// folds channels l, l+32, ... into an online (max, sum of exp(z - max)) pair in one pass
/// (lse_push), and the 32 pairs are merged in five butterfly steps with __shfl_xor_sync
/// (warp_allreduce_lse, lib/warp_reduce.cuh; lse_merge is associative, so any tree gives the
/// same value up to rounding). Lanes without a channel (Cout < 32) hold the empty pair
/// (-inf, 0), which merges as a no-op. Every step keeps torch.logsumexp's max shift, so nothing
/// overflows; inf and NaN follow its rules.
__global__ void bias_logsumexp_warp(const float* __restrict__ pooled, const float* __restrict__ bias,
                                    int64_t batch, int channels, float scale, float* __restrict__ y) {
  const int64_t n = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = int(threadIdx.x % kWarp);
  if (n >= batch) return;  // n is the same for the whole warp: full warps leave together
  const float* z = pooled + n * channels;
  float max_z = -INFINITY, sum_exp = 0.0f;
  for (int c = lane; c < channels; c += kWarp) lse_push(max_z, sum_exp, z[c] + bias[c]);
  warp_allreduce_lse(max_z, sum_exp);
  if (lane == 0) y[n] = scale * lse_finish(max_z, sum_exp);
}

// ---- stage 04 kernels: end -----------------------------------------------------------------

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
  constexpr int kEpilogueBlock = 128;  // 4 warps, 4 samples per block
  static_assert(kEpilogueBlock % kWarp == 0, "the epilogue gives each sample a whole warp");

  conv_then_pool(a, run_pool, plane_sums(p, a.workspace));

  a.marks.begin(Phase::Epilogue);
  bias_logsumexp_warp<<<blocks_for(p.batch * kWarp, kEpilogueBlock, "bias_logsumexp_warp"),
                        kEpilogueBlock, 0, a.stream>>>(a.pooled, a.in.bias, p.batch,
                                                       int(p.out_channels), float(p.scale), a.y);
  CUDA_CHECK_LAUNCH("bias_logsumexp_warp");
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "warp shuffles, float4 loads, online log-sum-exp across lanes";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.run_pool = run_pool;
  d.pool_workspace_bytes = plane_sums_bytes;
}

}  // namespace ladder
