// The host half of the tensor-core stages (10, 11): the launch plan, the workspace, the opt-in to
// more than 48 KB of shared memory, and the launches. The stage passes what the host half takes
// from it as a template argument, so the compiler (and the reader) sees the dependency:
//   struct Rung {
//     template <int KW> static auto kernel();   // the tiled kernel: (TiledArgs), KW 1..kMaxKernelW
//     static auto weight_layout();              // (ConvParams, weight (Cin, Cout/g, kH, kW), wt,
//                                               //  chunks, co tiles per group, wt floats)
//     static constexpr const char* weight_layout_name;  // for launch errors
//     static constexpr const char* arithmetic;  // "TF32 mma": named when no tensor core runs
//   };
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "lib/conv_pool_general.cuh"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"  // ceil_div, with_kernel_width
#include "lib/mma_tile.cuh"

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

template <class Rung>
struct MmaTileHost {
  /// The launch plan of a problem: which kernel, how the work is split, how much shared memory.
  /// A pure function of the problem and the device, so workspace_bytes, prepare and run agree.
  struct Plan {
    bool fast = false;  ///< the tensor-core kernel; else conv_pool_general
    int kernel_w = 0, patch_rows = 0, tiles_w = 0;
    size_t smem_bytes = 0;
    FusedGrid g{};
  };

  /// Whether the code that runs on this device has TF32 mma (tf32_mma_in). Throws CudaError.
  static bool tensor_cores_here() { return tf32_mma_in(Rung::template kernel<3>()); }

  static Plan make_plan(const Problem& pr) {
    pr.validate();
    Plan q;
    const int64_t rows = kTileRows + (pr.kernel_size.h - 1) * pr.dilation.h;
    const int64_t taps = pr.kernel_size.h * pr.kernel_size.w;
    const int64_t bytes = kBuffers * int64_t(sizeof(float)) * kCiChunk * (rows * kPitch + taps * kCoTile);
    q.fast = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 && pr.kernel_size.w <= kMaxKernelW &&
             bytes <= int64_t(shared_memory_per_block_limit()) && tensor_cores_here();
    if (!q.fast) {
      q.g = general_grid(pr);
      return q;
    }
    q.kernel_w = int(pr.kernel_size.w);
    q.patch_rows = int(rows);
    q.smem_bytes = size_t(bytes);
    q.tiles_w = int(ceil_div(pr.out_w(), kTileCols));
    const int64_t units = ceil_div(pr.out_h(), kTileRows) * q.tiles_w;
    q.g = chunked_tile_grid(pr, units, kCoTile, "conv_pool_tensor_cores");
    return q;
  }

  /// Floats of the laid-out weights (the stage's weight layout kernel) of a fast plan.
  static int64_t layout_floats(const Problem& p, const Plan& q) {
    return int64_t(p.groups) * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group * p.kernel_size.h *
           p.kernel_size.w * kCoTile * kCiChunk;
  }

  /// Workspace: the partial sums (N, parts, Cout) fp32 as in stages 06-09, then on the fast path
  /// the laid-out weights: (groups * ceil(Cin/g / 8) * ceil(Cout/g / 128) * kH * kW * 1024) fp32,
  /// 295 KB at the KernelBench size.
  static size_t workspace_bytes(const Problem& p) {
    const Plan q = make_plan(p);
    if (!q.fast) return partials_bytes(p, q.g.parts);
    return aligned_partials_bytes(p, q.g.parts) + size_t(layout_floats(p, q)) * sizeof(float);
  }

  /// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
  static size_t shared_memory_bytes(const Problem& p) { return make_plan(p).smem_bytes; }

  /// Calls f(kernel) with the tiled kernel for q.kernel_w (1..kMaxKernelW).
  template <typename F>
  static void with_tiled_kernel(const Plan& q, F&& f) {
    with_kernel_width(q.kernel_w, [&](auto w) { f(Rung::template kernel<decltype(w)::value>()); });
  }

  /// Once per problem, outside the timed region: the opt-in above 48 KB of dynamic shared memory.
  /// Throws CudaError if the device cannot give the plan's shared memory.
  static void prepare(const Problem& p) {
    const Plan q = make_plan(p);
    if (q.fast) with_tiled_kernel(q, [&](auto kernel) { opt_in_shared_memory(kernel, q.smem_bytes); });
  }

  /// Enqueues the stage: the rung's weight layout kernel lays the weights out in the workspace,
  /// then the tiled kernel runs; prepare(a.problem) must have run first.
  static void run(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    const Plan q = make_plan(p);
    run_fused_plan(a, q, [&](float* partials) {
      const ConvParams cp = conv_params(p);
      float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + aligned_partials_bytes(p, q.g.parts));
      const int64_t total = layout_floats(p, q);
      Rung::weight_layout()<<<blocks_for(total, kThreads, Rung::weight_layout_name), kThreads, 0, a.stream>>>(
          cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, total);
      static const std::string launch_of = std::string("launch of ") + Rung::weight_layout_name;  // built once
      cuda_check(cudaGetLastError(), launch_of.c_str(), __FILE__, __LINE__);
      const TiledArgs t{cp, a.in.x, wt, partials, q.g, q.tiles_w, q.patch_rows};
      with_tiled_kernel(q, [&](auto kernel) {
        kernel<<<q.g.blocks, kThreads, q.smem_bytes, a.stream>>>(t);
        CUDA_CHECK_LAUNCH("conv_pool_tensor_cores");
      });
    });
  }

  /// Says when no tensor core runs (below sm_80, or code JIT-compiled from an older PTX), naming
  /// the rung's arithmetic.
  static std::string device_note() { return tensor_cores_here() ? "" : no_tf32_mma_note(Rung::arithmetic); }

  /// Fills the descriptor's hooks for this host half.
  static void describe(StageDescriptor& d) {
    d.workspace_bytes = workspace_bytes;
    d.run_gpu = run;
    d.shared_memory_bytes = shared_memory_bytes;
    d.device_note = device_note;
    d.prepare = prepare;     // cudaFuncSetAttribute, once per problem, outside the timed region
    d.tensor_cores = true;
    d.deterministic = true;  // partials written once, summed in a fixed order: no float atomics
  }
};

}  // namespace
}  // namespace ladder
