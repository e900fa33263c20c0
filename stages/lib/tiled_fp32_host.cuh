// The host half of the tiled FP32 stages (07, 08, 09): the launch plan, the workspace, the opt-in
// to more than 48 KB of shared memory and the launches. The stage passes its tile as a template
// argument, so the compiler (and the reader) sees everything the host half takes from it:
//   struct Tile {
//     using Args = TiledArgs;   // the kernel's argument struct: {ConvParams, x, weight, partials,
//                               //   FusedGrid, tiles_w, ci_chunk, patch_rows}
//     static constexpr int threads, tile_rows, tile_cols, pitch, co_tile, buffers,
//                          max_kernel_w, max_ci_chunk, smem_budget;   // smem_budget in bytes
//     static constexpr int64_t target_blocks;
//     static constexpr const char* name;              // the kernel's name, for errors
//     template <int KW> static auto kernel();         // the tiled kernel for kernel width KW
//   };
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"  // ceil_div, with_kernel_width

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

template <class Tile>
struct TiledFp32Host {
  /// The launch plan of a problem: which kernel, how the work is split, how much shared memory.
  /// A pure function of the problem and the device's shared-memory limit, so workspace_bytes,
  /// prepare and run always agree.
  struct Plan {
    bool fast = false;  ///< the tiled kernel; else conv_pool_general
    int kernel_w = 0, ci_chunk = 0, patch_rows = 0, tiles_w = 0;
    size_t smem_bytes = 0;
    FusedGrid g{};
  };

  static Plan make_plan(const Problem& pr) {
    pr.validate();
    Plan q;
    // The device's opt-in limit caps the budget: 64 KiB per block on sm_75 (T4), 99 KiB on sm_86
    // and sm_89; fewer input channels per chunk fit there, and none at all means the general path.
    const int64_t budget = std::min<int64_t>(Tile::smem_budget, int64_t(shared_memory_per_block_limit()));
    const int64_t rows = Tile::tile_rows + (pr.kernel_size.h - 1) * pr.dilation.h;
    const int64_t per_ci_bytes =
        int64_t(sizeof(float)) * (rows * Tile::pitch + pr.kernel_size.h * pr.kernel_size.w * Tile::co_tile);
    q.fast = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 && pr.kernel_size.w <= Tile::max_kernel_w &&
             Tile::buffers * per_ci_bytes <= budget;
    if (!q.fast) {
      q.g = general_grid(pr);
      return q;
    }
    q.kernel_w = int(pr.kernel_size.w);
    q.patch_rows = int(rows);
    q.ci_chunk =
        int(std::min<int64_t>({Tile::max_ci_chunk, pr.in_per_group(), budget / (Tile::buffers * per_ci_bytes)}));
    q.smem_bytes = size_t(Tile::buffers * q.ci_chunk) * size_t(per_ci_bytes);
    q.tiles_w = int(ceil_div(pr.out_w(), Tile::tile_cols));
    const int64_t units = ceil_div(pr.out_h(), Tile::tile_rows) * q.tiles_w;
    const int64_t co_tiles = pr.groups * ceil_div(pr.out_per_group(), Tile::co_tile);
    // A block walks (its tiles) x (input-channel chunks) steps, counted in 32 bits.
    const int64_t chunks = ceil_div(pr.in_per_group(), q.ci_chunk);
    const int64_t min_parts = ceil_div(units * chunks, 2147483647 - chunks);
    const int64_t parts = std::max(ceil_div(Tile::target_blocks, pr.batch * co_tiles), min_parts);
    q.g = make_fused_grid(pr, units, Tile::co_tile, parts, Tile::name);
    return q;
  }

  /// Workspace: the partial sums (N, parts, Cout) fp32: O(N * Cout * parts); deterministic (each
  /// partial written once, summed in a fixed order).
  static size_t workspace_bytes(const Problem& p) { return partials_bytes(p, make_plan(p).g.parts); }

  /// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
  static size_t shared_memory_bytes(const Problem& p) { return make_plan(p).smem_bytes; }

  /// Calls f(kernel) with the tiled kernel for q.kernel_w (1..Tile::max_kernel_w).
  template <typename F>
  static void with_tiled_kernel(const Plan& q, F&& f) {
    with_kernel_width(q.kernel_w, [&](auto w) { f(Tile::template kernel<decltype(w)::value>()); });
  }

  /// The descriptor's prepare hook, called once per problem before any run: above 48 KB of
  /// dynamic shared memory a kernel must opt in (cudaFuncSetAttribute, a host call kept out of
  /// the timed region). Throws CudaError if the device cannot give the plan's shared memory.
  static void prepare(const Problem& p) {
    const Plan q = make_plan(p);
    if (!q.fast) return;  // the general kernel uses static shared memory only
    with_tiled_kernel(q, [&](auto kernel) {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(q.smem_bytes)));
    });
  }

  /// Enqueues the stage; prepare(a.problem) must have run first (GpuSession::time_stage does),
  /// or the tiled kernel's launch fails for want of its shared memory above 48 KB.
  static void run(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    const Plan q = make_plan(p);
    float* partials = static_cast<float*>(a.workspace);

    a.marks.begin(Phase::Fused);
    if (!q.fast) {
      launch_conv_pool_general(p, a.in, q.g, partials, a.stream);
    } else {
      const typename Tile::Args t{conv_params(p), a.in.x, a.in.weight, partials,
                                  q.g, q.tiles_w, q.ci_chunk, q.patch_rows};
      static const std::string launch_of = std::string("launch of ") + Tile::name;  // built once
      with_tiled_kernel(q, [&](auto kernel) {
        kernel<<<q.g.blocks, Tile::threads, q.smem_bytes, a.stream>>>(t);
        cuda_check(cudaGetLastError(), launch_of.c_str(), __FILE__, __LINE__);
      });
    }

    a.marks.begin(Phase::Epilogue);
    launch_finish_pooled_logsumexp(p, partials, q.g.parts, a.in, a.pooled, a.y, a.stream);
  }

  /// Fills the descriptor's hooks for this host half.
  static void describe(StageDescriptor& d) {
    d.workspace_bytes = workspace_bytes;
    d.run_gpu = run;
    d.shared_memory_bytes = shared_memory_bytes;
    d.prepare = prepare;     // cudaFuncSetAttribute, once per problem, outside the timed region
    d.deterministic = true;  // partials written once, summed in a fixed order: no float atomics
  }
};

}  // namespace
}  // namespace ladder
