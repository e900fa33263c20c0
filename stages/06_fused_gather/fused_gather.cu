// Stage 06: fusion alone. Stages 01-05 write the whole convT output to HBM (2.16 GB at the
// KernelBench size) and a second kernel reads it back to pool it. Here the pool moves into the
// convolution kernel, and nothing else changes:
//  - conv+pool: each thread computes convT outputs with stage 01's gather loop
//               (gather_output in lib/conv_transpose_gather.cuh), one output element at a time,
//               and adds them up in a register instead of storing them; a block covers a
//               contiguous range of one (n, co) plane and reduces its threads' sums with warp
//               shuffles and one shared slot per warp into one partial sum (no atomics);
//  - finish:    a small kernel adds each plane's partials in a fixed order, divides by the
//               plane size, adds the conv bias, and runs the warp log-sum-exp epilogue
//               (lib/fused_partials.cuh).
// The intermediate tensor never exists. The arithmetic, two loads per FMA, stays stage 01's.
#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/conv_transpose_gather.cuh"
#include "lib/fused_partials.cuh"
#include "lib/register_stage.hpp"
#include "todo.cuh"
#include "lib/warp_reduce.cuh"

namespace ladder {
namespace {

// ---- stage 06 kernels: begin ---------------------------------------------------------------

constexpr int kThreads = 256;                    // 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kPixelsPerThread = 8;              // outputs each thread computes and adds, at most
constexpr int kChunk = kThreads * kPixelsPerThread;  // output pixels per block: 2048

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of pixels
/// [part_begin(part), part_begin(part + 1)) of plane (n, co). x (N, Cin, H, W), weight
/// (Cin, Cout/g, kH, kW), partials (N, g.parts, Cout), fp32 NCHW. Grid: make_fused_grid with one
/// channel per block and the pixels of a plane as its units (block_coords: co fastest, so the
/// blocks of one pixel range read the same x at the same time). kThreads threads.
/// Changed from stages 01-05: the output is never written. Thread t computes pixels t,
/// t + kThreads, ... of the block's range (consecutive lanes, consecutive pixels: the x loads of
/// a warp are coalesced, the weight loads a broadcast, as in stage 01) and keeps their running
/// sum in a register; the block then adds its 256 sums in a fixed tree (shuffles within each
/// warp, one shared slot per warp, warp slots in order) and thread 0 writes one partial.
__global__ void __launch_bounds__(kThreads)
    conv_pool_gather(ConvParams p, const float* __restrict__ x, const float* __restrict__ weight,
                     float* __restrict__ partials, FusedGrid g) {
  __shared__ float warp_sums[kWarps];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const BlockCoords bc = block_coords(g);
  const int co = bc.group * p.out_per_group + bc.co_base;  // one channel per block
  const int pix_begin = part_begin(g, bc.part), pix_end = part_begin(g, bc.part + 1);

  // The slot is addressed before the loop: a pointer stays in registers, where n and co held
  // across the loop would be spilled to local memory (ptxas, nvcc 13.0, sm_90).
  float* slot = partial_slot(partials, g, bc.n, bc.part, p.out_channels, co);
  // BEGIN SOLUTION
  // STUB: ladder_todo("06.1", "conv_pool_gather: this thread's convT outputs (gather_output), summed in registers");
  // STUB: float sum = 0.0f;
  // STUB: ladder_unused(tid, p, x, weight, bc, co, pix_begin, pix_end);
  float sum = 0.0f;  // this thread's outputs, added as they are computed
  // Pixel indices fit in 31 bits (validate() bounds the plane); unsigned so i + 256 cannot wrap.
  const unsigned count = unsigned(pix_end - pix_begin);
  for (unsigned i = tid; i < count; i += kThreads) {
    const int pix = pix_begin + int(i);
    const int oh = pix / p.out_w, ow = pix - oh * p.out_w;
    sum += gather_output(p, x, weight, bc.n, co, oh, ow, 0.0f);  // stage 01: out[idx] = ...
  }
  // END SOLUTION

  // BEGIN SOLUTION 04 06
  // STUB: ladder_todo("06.2", "conv_pool_gather: the block's sum in a fixed order, written once to *slot");
  // STUB: ladder_unused(sum, slot, lane, warp, warp_sums);
  sum = warp_allreduce_sum(sum);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (tid == 0) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_sums[w];
    *slot = s;
  }
  // END SOLUTION
}

// ---- stage 06 kernels: end -----------------------------------------------------------------

/// The grid: one channel per block, planes cut into chunks of kChunk pixels (130 parts per plane
/// and 266,240 blocks at the KernelBench size). Throws std::runtime_error if it is too large.
FusedGrid make_grid(const Problem& p) {
  const int64_t plane = p.out_h() * p.out_w();
  return make_fused_grid(p, plane, 1, (plane + kChunk - 1) / kChunk, "conv_pool_gather");
}

/// Workspace: the partial sums (N, parts, Cout) fp32, 1.06 MB at the KernelBench size.
size_t workspace_bytes(const Problem& p) { return partials_bytes(p, make_grid(p).parts); }

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  const FusedGrid g = make_grid(p);
  float* partials = static_cast<float*>(a.workspace);

  a.marks.begin(Phase::Fused);
  conv_pool_gather<<<g.blocks, kThreads, 0, a.stream>>>(conv_params(p), a.in.x, a.in.weight, partials, g);
  CUDA_CHECK_LAUNCH("conv_pool_gather");

  a.marks.begin(Phase::Epilogue);
  launch_finish_pooled_logsumexp(p, partials, g.parts, a.in, a.pooled, a.y, a.stream);
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};  // "vs previous": conv + pool, fused or not
  d.idea = "fusion alone: stage 01's gather pooled in registers, the convT output never written";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.deterministic = true;  // partials written once, summed in a fixed order: no float atomics
}

}  // namespace ladder
