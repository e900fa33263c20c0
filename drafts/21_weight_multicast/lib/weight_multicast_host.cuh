// The plan and the launch of the weight-multicast rung (21, a draft), which stage 17's host half
// (lib/warp_specialized_host.cuh: WsHost) takes in place of its own: a grid of clusters of
// kMcCluster blocks, an even number of parts per (sample, channel tile), so that the two blocks of
// a cluster (parts 2k and 2k + 1, consecutive in the grid) share their weights, launched with the
// cluster dimension.
#pragma once

#include <algorithm>
#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/mma_tile.cuh"               // chunked_tile_grid
#include "lib/warp_specialized_host.cuh"  // WsPlan, make_ws_plan, WsArgs, WsHost

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

/// The kernel over q's grid in clusters of kMcCluster blocks along x (cudaLaunchKernelEx: the
/// grid, a multiple of the cluster, stays 1-D), checked. The launch a rung declares for WsHost.
template <class Kernel>
void launch_clusters(Kernel kernel, const WsPlan& q, const CUtensorMap& xmap, const WsArgs& t, cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(q.g.blocks);
  config.blockDim = dim3(kWsThreads);
  config.dynamicSmemBytes = q.smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute cluster = {};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kMcCluster, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  config.attrs = &cluster;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, xmap, t));
  CUDA_CHECK_LAUNCH("conv_pool_weight_multicast");
}

}  // namespace
}  // namespace ladder
