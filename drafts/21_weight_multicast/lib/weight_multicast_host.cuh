// The host half of the weight-multicast rung (21, a draft): stage 17's host half
// (lib/warp_specialized_host.cuh: the tensor map of x, the probe, the weight layout, the ring)
// with a grid of clusters of kMcCluster blocks: an even number of parts per (sample, channel
// tile), so that the two blocks of a cluster (parts 2k and 2k + 1, consecutive in the grid) share
// their weights, and a launch with the cluster dimension. A copy of WsHost with its own plan and
// launch; on promotion WsHost would take both from the rung.
// The stage passes its kernels:
//   struct Rung {
//     template <int KW> static auto kernel();  // conv_pool_weight_multicast<KW>: (CUtensorMap, WsArgs)
//     static auto weight_layout();             // tf32_weight_kmajor, stage 15's layout
//   };
#pragma once

#include <algorithm>
#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "tensor_map.hpp"                 // encode_tensor_map_f32
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"           // ceil_div, with_kernel_width
#include "lib/mma_tile.cuh"               // chunked_tile_grid
#include "lib/warp_specialized_host.cuh"  // WsPlan, make_ws_plan, x_tensor_map, ws_layout_floats

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

constexpr int kMcCluster = 2;  ///< blocks per cluster: each copies half of a step's weights for both

/// Stage 17's plan (shape, box, tensor map, ring, device) on a grid whose parts per (sample,
/// channel tile) are a multiple of kMcCluster. A plane of a single tile has no partner for its
/// block: the general path.
inline WsPlan make_mc_plan(const Problem& pr) {
  WsPlan q = make_ws_plan(pr);
  if (!q.fast) return q;
  const int64_t units = q.g.units;
  if (units < kMcCluster) {
    q = WsPlan{};
    q.g = general_grid(pr);
    return q;
  }
  const int64_t parts = ceil_div(int64_t(q.g.parts), kMcCluster) * kMcCluster;  // 17's parts, rounded up
  q.g = make_fused_grid(pr, units, kWgCo, std::min(parts, units / kMcCluster * kMcCluster), "conv_pool_weight_multicast");
  return q;
}

inline size_t mc_workspace_bytes(const Problem& p) {
  const WsPlan q = make_mc_plan(p);
  if (!q.fast) return partials_bytes(p, q.g.parts);
  return std::max(aligned_partials_bytes(p, q.g.parts) + size_t(ws_layout_floats(p, q)) * sizeof(float),
                  partials_bytes(p, general_grid(p).parts));
}

inline size_t mc_shared_memory_bytes(const Problem& p) { return make_mc_plan(p).smem_bytes; }

template <class Rung>
struct McHost {
  template <typename F>
  static void with_kernel(const WsPlan& q, F&& f) {
    with_kernel_width(q.kernel_w, [&](auto w) { f(Rung::template kernel<decltype(w)::value>()); });
  }

  /// Once per problem, outside the timed region: the opt-in above 48 KB of dynamic shared memory.
  static void prepare(const Problem& p) {
    const WsPlan q = make_mc_plan(p);
    if (q.fast) with_kernel(q, [&](auto kernel) { opt_in_shared_memory(kernel, q.smem_bytes); });
  }

  /// As WsHost::run, with this rung's plan, and the kernel launched in clusters of kMcCluster
  /// blocks along x (cudaLaunchKernelEx: the grid, a multiple of the cluster, stays 1-D).
  static void run(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    WsPlan q = make_mc_plan(p);
    if (q.fast && reinterpret_cast<uintptr_t>(a.in.x) % 16 != 0) {  // the copy engine needs a 16-byte aligned base
      q = WsPlan{};
      q.g = general_grid(p);
    }
    run_fused_plan(a, q, [&](float* partials) {
      const ConvParams cp = conv_params(p);
      float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + aligned_partials_bytes(p, q.g.parts));
      const int64_t total = ws_layout_floats(p, q);
      const auto layout = Rung::weight_layout();
      layout<<<blocks_for(total, kThreads, "tf32_weight_kmajor"), kThreads, 0, a.stream>>>(
          cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, total);
      CUDA_CHECK_LAUNCH("tf32_weight_kmajor");
      const CUtensorMap xmap = encode_tensor_map_f32(x_tensor_map(p, a.in.x, q.box), "x");
      const WsArgs t{cp, wt, partials, q.g, q.tiles_w, q.box.rows, q.box.cols, q.shift};
      with_kernel(q, [&](auto kernel) {
        cudaLaunchConfig_t config = {};
        config.gridDim = dim3(q.g.blocks);
        config.blockDim = dim3(kWsThreads);
        config.dynamicSmemBytes = q.smem_bytes;
        config.stream = a.stream;
        cudaLaunchAttribute cluster = {};
        cluster.id = cudaLaunchAttributeClusterDimension;
        cluster.val.clusterDim.x = kMcCluster, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
        config.attrs = &cluster;
        config.numAttrs = 1;
        CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, xmap, t));
        CUDA_CHECK_LAUNCH("conv_pool_weight_multicast");
      });
    });
  }

  static void describe(StageDescriptor& d) {
    d.workspace_bytes = mc_workspace_bytes;
    d.run_gpu = run;
    d.shared_memory_bytes = mc_shared_memory_bytes;
    d.device_note = ws_device_note;
    d.prepare = prepare;
    d.tensor_cores = true;
    d.deterministic = true;
  }
};

}  // namespace
}  // namespace ladder
