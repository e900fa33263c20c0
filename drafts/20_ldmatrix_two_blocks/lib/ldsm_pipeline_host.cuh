// The host half of the draft of stage 20 (ldmatrix, two blocks per SM): stage 14's
// lib/mma_pipeline_host.cuh with three changes, marked "stage 20:" below:
//  - the tile: MidTile (warp tile 64 pixels x 32 channels, block 64 channels) where stage 14
//    takes WideTile; NarrowTile (<= 32 channels per group) as in stage 14;
//  - the depth: S = min(4, what two blocks' shares of an SM's shared memory hold), so that two
//    blocks run per SM; one block's share if not even two stages fit that way;
//  - the weight layout's name and the kernel's name in messages.
// The stage passes what the host half takes from it as a template argument:
//   struct Rung {
//     template <int KW, int KH, class Shape>   // conv_pool_multistage_ldsm: (PipelineArgs); KW
//     static auto kernel();                    //   1..kMaxKernelW, KH 3 for the unrolled 3x3
//                                              //   instance, else 0; Shape MidTile or NarrowTile
//     static auto weight_layout();   // tf32_weight_khalves: (ConvParams, weight, wt, chunks,
//   };                               //   co tiles per group, co_tile, wt floats)
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

/// stage 20: warps 4 x 2, warp tile 64 pixels x 32 channels (4 x 4 mma tiles, 64 FP32
/// accumulators per thread), block 64 channels. Per tap a warp loads its 6 A rows once per kernel
/// column (stage 14's sharing) and 2 ldmatrix.x4 of B, for 16 mma.
using MidTile = TileShape<4, 4>;

/// stage 20: the blocks per SM the plan aims for (the kernel's __launch_bounds__ minimum).
constexpr int kBlocksPerSm = 2;

/// stage 20: the shared memory of one SM, in bytes (cudaDevAttrMaxSharedMemoryPerMultiprocessor:
/// 228 KiB on sm_90, 164 KiB on sm_80, 100 KiB on sm_86 and sm_89). Throws CudaError.
inline size_t shared_memory_per_sm() {
  int dev = 0, bytes = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  return size_t(bytes);
}

template <class Rung>
struct LdsmPipelineHost {
  /// The launch plan of a problem: a pure function of the problem and the device, so
  /// workspace_bytes, prepare and run agree.
  struct Plan {
    bool fast = false;  ///< the tensor-core kernel; else conv_pool_general
    bool narrow = false;  ///< NarrowTile (32 channels per block) instead of MidTile (64; stage 20)
    bool unrolled_3x3 = false;  ///< the instance with every tap unrolled: 3x3 kernel, dilation 1
    int kernel_w = 0, patch_rows = 0, tiles_w = 0, pitch = 0, plane = 0, shift = 0, vec_cols = 0, stages = 0;
    int co_tile = 0;
    int blocks_per_sm = 0;  ///< stage 20: the blocks the plan's shared memory lets run on an SM (1 or 2)
    size_t smem_bytes = 0;
    FusedGrid g{};
  };

  /// Whether the code that runs on this device has TF32 mma (tf32_mma_in). Throws CudaError.
  static bool tensor_cores_here() { return tf32_mma_in(Rung::template kernel<3, 3, MidTile>()); }

  /// Floats of one pipeline stage: the x patch (8 planes) and one step's weights.
  static int64_t stage_floats(int64_t plane, int64_t taps, int64_t co_tile) {
    return kCiChunk * plane + taps * co_tile * kCiChunk;
  }

  static Plan make_plan(const Problem& pr) {
    pr.validate();
    Plan q;
    const int64_t rows = kTileRows + (pr.kernel_size.h - 1) * pr.dilation.h;
    const int64_t taps = pr.kernel_size.h * pr.kernel_size.w;
    q.narrow = pr.out_per_group() <= NarrowTile::kCoTile;
    q.co_tile = q.narrow ? NarrowTile::kCoTile : MidTile::kCoTile;  // stage 20: MidTile, not WideTile
    const AlignedPatchRow row = aligned_patch_row(pr.padding.w, pr.kernel_size.w, kTileCols);
    const int64_t pitch = 4 * row.vectors;
    const int64_t plane = rows * pitch + (8 - rows * pitch % 32 + 32) % 32;  // 8 mod 32: conflict-free A loads
    const int64_t stage_bytes = int64_t(sizeof(float)) * stage_floats(plane, taps, q.co_tile);
    // The opt-in limit covers dynamic and static shared memory together: keep 4 KiB for the
    // kernel's static warp_pool (2 KiB on the wide tile, 1 KiB on the narrow one).
    const int64_t limit = int64_t(shared_memory_per_block_limit()) - 4096;
    // stage 20: two blocks per SM where two stages fit in half an SM's shared memory (each block
    // also costs the 1 KiB the system reserves per block, inside the same 4 KiB margin); else
    // stage 14's one block with the per-block limit.
    const int64_t share = std::min<int64_t>(limit, int64_t(shared_memory_per_sm()) / kBlocksPerSm - 4096);
    const int64_t stages_two = std::min<int64_t>(kMaxStages, share / stage_bytes);
    const int64_t stages = stages_two >= 2 ? stages_two : std::min<int64_t>(kMaxStages, limit / stage_bytes);
    q.blocks_per_sm = stages_two >= 2 ? kBlocksPerSm : 1;
    q.fast = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 && pr.kernel_size.w <= kMaxKernelW &&
             rows <= kMaxPatchRows && stages >= 2 && tensor_cores_here();
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
    q.g = chunked_tile_grid(pr, units, q.co_tile, "conv_pool_multistage_ldsm");
    return q;
  }

  /// Floats of the laid-out weights (the rung's weight layout, tf32_weight_khalves) of a fast plan.
  static int64_t layout_floats(const Problem& p, const Plan& q) {
    return int64_t(p.groups) * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group * p.kernel_size.h *
           p.kernel_size.w * q.co_tile * kCiChunk;
  }

  /// Workspace: the partial sums (N, parts, Cout) fp32, then on the fast path the laid-out weights
  /// (groups * ceil(Cin/g / 8) * co tiles * kH * kW * co_tile * 8 fp32; 295 KB at the KernelBench size).
  static size_t workspace_bytes(const Problem& p) {
    const Plan q = make_plan(p);
    if (!q.fast) return partials_bytes(p, q.g.parts);
    return aligned_partials_bytes(p, q.g.parts) + size_t(layout_floats(p, q)) * sizeof(float);
  }

  /// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
  static size_t shared_memory_bytes(const Problem& p) { return make_plan(p).smem_bytes; }

  /// Calls f(kernel) with the multistage kernel for q's kernel size and tile shape.
  template <typename F>
  static void with_kernel(const Plan& q, F&& f) {
    if (q.unrolled_3x3) {
      if (q.narrow) f(Rung::template kernel<3, 3, NarrowTile>());
      else f(Rung::template kernel<3, 3, MidTile>());
      return;
    }
    with_kernel_width(q.kernel_w, [&](auto w) {
      constexpr int kw = decltype(w)::value;
      if (q.narrow) f(Rung::template kernel<kw, 0, NarrowTile>());
      else f(Rung::template kernel<kw, 0, MidTile>());
    });
  }

  /// Once per problem, outside the timed region: the opt-in above 48 KB of dynamic shared memory.
  /// Throws CudaError if the device cannot give the plan's shared memory.
  static void prepare(const Problem& p) {
    const Plan q = make_plan(p);
    if (q.fast) with_kernel(q, [&](auto kernel) { opt_in_shared_memory(kernel, q.smem_bytes); });
  }

  /// Enqueues the stage: the rung's weight layout (tf32_weight_khalves) lays the weights out in the
  /// workspace, then the multistage kernel runs, then the finish; prepare(a.problem) must have run.
  static void run(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    const Plan q = make_plan(p);
    run_fused_plan(a, q, [&](float* partials) {
      const ConvParams cp = conv_params(p);
      float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + aligned_partials_bytes(p, q.g.parts));
      const int64_t total = layout_floats(p, q);
      Rung::weight_layout()<<<blocks_for(total, kThreads, "tf32_weight_khalves"), kThreads, 0, a.stream>>>(
          cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, q.co_tile, total);
      CUDA_CHECK_LAUNCH("tf32_weight_khalves");
      const bool vec16 = p.in_w % 4 == 0 && reinterpret_cast<uintptr_t>(a.in.x) % 16 == 0;
      const PipelineArgs t{cp,      a.in.x,  wt,      partials,   q.g,      q.tiles_w,    q.patch_rows,
                           q.pitch, q.plane, q.shift, q.vec_cols, q.stages, vec16 ? 1 : 0};
      with_kernel(q, [&](auto kernel) {
        kernel<<<q.g.blocks, kThreads, q.smem_bytes, a.stream>>>(t);
        CUDA_CHECK_LAUNCH("conv_pool_multistage_ldsm");
      });
    });
  }

  /// Says when no tensor core runs: below sm_80, or code JIT-compiled from an older PTX.
  static std::string device_note() { return tensor_cores_here() ? "" : no_tf32_mma_note("TF32 mma"); }

  /// Fills the descriptor's hooks for this host half.
  static void describe(StageDescriptor& d) {
    d.workspace_bytes = workspace_bytes;
    d.run_gpu = run;
    d.shared_memory_bytes = shared_memory_bytes;
    d.device_note = device_note;
    d.prepare = prepare;  // cudaFuncSetAttribute, once per problem, outside the timed region
    d.tensor_cores = true;
    d.deterministic = true;  // partials written once, summed in a fixed order: no float atomics
  }
};

}  // namespace
}  // namespace ladder
