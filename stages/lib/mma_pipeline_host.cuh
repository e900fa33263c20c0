// The host half of the multistage mma rung (14): the launch plan (tile shape and pipeline depth
// from the problem), the workspace, the opt-in to more than 48 KB of shared memory, and the
// launches. The including stage defines its kernels first: tf32_weight_tiles and
// `template <int KW, class Shape> __global__ void conv_pool_multistage(PipelineArgs)`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"  // ceil_div, with_kernel_width
#include "lib/mma_pipeline.cuh"

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// The launch plan of a problem: a pure function of the problem and the device, so
/// workspace_bytes, prepare and run agree.
struct PipelinePlan {
  bool fast = false;  ///< the tensor-core kernel; else conv_pool_general
  bool narrow = false;  ///< NarrowTile (32 channels per block) instead of WideTile (128)
  bool unrolled_3x3 = false;  ///< the instance with every tap unrolled: 3x3 kernel, dilation 1
  int kernel_w = 0, patch_rows = 0, tiles_w = 0, pitch = 0, plane = 0, shift = 0, vec_cols = 0, stages = 0;
  int co_tile = 0;
  size_t smem_bytes = 0;
  FusedGrid g{};
};

/// Whether the code that runs on this device has TF32 mma (tf32_mma_in). Throws CudaError.
bool pipeline_tensor_cores_here() { return tf32_mma_in(conv_pool_multistage<3, 3, WideTile>); }

/// Floats of one pipeline stage: the x patch (8 planes) and one step's weights.
int64_t pipeline_stage_floats(int64_t plane, int64_t taps, int64_t co_tile) {
  return kCiChunk * plane + taps * co_tile * kCiChunk;
}

PipelinePlan make_pipeline_plan(const Problem& pr) {
  pr.validate();
  PipelinePlan q;
  const int64_t rows = kTileRows + (pr.kernel_size.h - 1) * pr.dilation.h;
  const int64_t taps = pr.kernel_size.h * pr.kernel_size.w;
  q.narrow = pr.out_per_group() <= NarrowTile::kCoTile;
  q.co_tile = q.narrow ? NarrowTile::kCoTile : WideTile::kCoTile;
  const AlignedPatchRow row = aligned_patch_row(pr.padding.w, pr.kernel_size.w, kTileCols);
  const int64_t pitch = 4 * row.vectors;
  const int64_t plane = rows * pitch + (8 - rows * pitch % 32 + 32) % 32;  // 8 mod 32: conflict-free A loads
  const int64_t stage_bytes = int64_t(sizeof(float)) * pipeline_stage_floats(plane, taps, q.co_tile);
  // The opt-in limit covers dynamic and static shared memory together: keep 4 KiB for the
  // kernel's static warp_pool (2 KiB on the wide tile, 1 KiB on the narrow one).
  const int64_t limit = int64_t(shared_memory_per_block_limit()) - 4096;
  const int64_t stages = std::min<int64_t>(kMaxStages, limit / stage_bytes);
  q.fast = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 && pr.kernel_size.w <= kMaxKernelW &&
           rows <= kMaxPatchRows && stages >= 2 && pipeline_tensor_cores_here();
  if (!q.fast) {
    q.g = general_grid(pr);
    return q;
  }
  q.kernel_w = int(pr.kernel_size.w);
  q.unrolled_3x3 = pr.kernel_size.h == 3 && pr.kernel_size.w == 3 && pr.dilation.h == 1;
  q.patch_rows = int(rows);
  q.plane = int(plane);
  q.shift = row.shift;
  q.vec_cols = row.vectors;
  q.pitch = int(pitch);
  q.stages = int(stages);
  q.smem_bytes = size_t(stages * stage_bytes);
  q.tiles_w = int(ceil_div(pr.out_w(), kTileCols));
  const int64_t units = ceil_div(pr.out_h(), kTileRows) * q.tiles_w;
  q.g = chunked_tile_grid(pr, units, q.co_tile, "conv_pool_multistage");
  return q;
}

/// Floats of the laid-out weights (tf32_weight_tiles) of a fast plan.
int64_t pipeline_layout_floats(const Problem& p, const PipelinePlan& q) {
  return int64_t(p.groups) * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group * p.kernel_size.h *
         p.kernel_size.w * q.co_tile * kCiChunk;
}

/// Workspace: the partial sums (N, parts, Cout) fp32, then on the fast path the laid-out weights
/// (groups * ceil(Cin/g / 8) * co tiles * kH * kW * co_tile * 8 fp32; 295 KB at the KernelBench size).
size_t pipeline_workspace_bytes(const Problem& p) {
  const PipelinePlan q = make_pipeline_plan(p);
  if (!q.fast) return partials_bytes(p, q.g.parts);
  return aligned_partials_bytes(p, q.g.parts) + size_t(pipeline_layout_floats(p, q)) * sizeof(float);
}

/// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
size_t pipeline_shared_memory_bytes(const Problem& p) { return make_pipeline_plan(p).smem_bytes; }

/// Calls f(kernel) with the multistage kernel for q's kernel size and tile shape.
template <typename F>
void with_pipeline_kernel(const PipelinePlan& q, F&& f) {
  if (q.unrolled_3x3) {
    if (q.narrow) f(conv_pool_multistage<3, 3, NarrowTile>);
    else f(conv_pool_multistage<3, 3, WideTile>);
    return;
  }
  with_kernel_width(q.kernel_w, [&](auto w) {
    constexpr int kw = decltype(w)::value;
    if (q.narrow) f(conv_pool_multistage<kw, 0, NarrowTile>);
    else f(conv_pool_multistage<kw, 0, WideTile>);
  });
}

/// Once per problem, outside the timed region: the opt-in above 48 KB of dynamic shared memory.
/// Throws CudaError if the device cannot give the plan's shared memory.
void prepare_pipeline(const Problem& p) {
  const PipelinePlan q = make_pipeline_plan(p);
  if (!q.fast) return;
  with_pipeline_kernel(q, [&](auto kernel) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(q.smem_bytes)));
  });
}

/// Enqueues the stage: tf32_weight_tiles lays the weights out in the workspace, then the
/// multistage kernel runs, then the finish; prepare_pipeline(a.problem) must have run first.
void run_pipeline(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  const PipelinePlan q = make_pipeline_plan(p);
  float* partials = static_cast<float*>(a.workspace);
  a.marks.begin(Phase::Fused);
  if (!q.fast) {
    launch_conv_pool_general(p, a.in, q.g, partials, a.stream);
  } else {
    const ConvParams cp = conv_params(p);
    float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + aligned_partials_bytes(p, q.g.parts));
    const int64_t total = pipeline_layout_floats(p, q);
    tf32_weight_tiles<<<blocks_for(total, kThreads, "tf32_weight_tiles"), kThreads, 0, a.stream>>>(
        cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, q.co_tile, total);
    CUDA_CHECK_LAUNCH("tf32_weight_tiles");
    const bool vec16 = p.in_w % 4 == 0 && reinterpret_cast<uintptr_t>(a.in.x) % 16 == 0;
    const PipelineArgs t{cp,      a.in.x,  wt,         partials, q.g,      q.tiles_w,   q.patch_rows,
                         q.pitch,   q.plane, q.shift,    q.vec_cols, q.stages, vec16 ? 1 : 0};
    with_pipeline_kernel(q, [&](auto kernel) {
      kernel<<<q.g.blocks, kThreads, q.smem_bytes, a.stream>>>(t);
      CUDA_CHECK_LAUNCH("conv_pool_multistage");
    });
  }
  a.marks.begin(Phase::Epilogue);
  launch_finish_pooled_logsumexp(p, partials, q.g.parts, a.in, a.pooled, a.y, a.stream);
}

/// Says when no tensor core runs: below sm_80, or code JIT-compiled from an older PTX.
std::string pipeline_device_note() { return pipeline_tensor_cores_here() ? "" : no_tf32_mma_note("TF32 mma"); }

}  // namespace
}  // namespace ladder
