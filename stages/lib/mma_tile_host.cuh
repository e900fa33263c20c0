// The host half of the tensor-core stages (10, 11): the launch plan, the workspace, the opt-in to
// more than 48 KB of shared memory, and the launches. The including stage defines its kernels
// first: `template <int KW> __global__ void conv_pool_tensor_cores(TiledArgs)` (the tiled kernel
// for kernel width KW, 1..kMaxKernelW) and a weight layout kernel it passes to run_mma_tile.
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

/// A weight layout kernel: (conv, weight (Cin, Cout/g, kH, kW), wt, chunks, co tiles, wt floats).
using WeightLayoutKernel = void (*)(ConvParams, const float*, float*, int, int, int64_t);

/// The launch plan of a problem: which kernel, how the work is split, how much shared memory.
/// A pure function of the problem and the device, so workspace_bytes, prepare and run agree.
struct Plan {
  bool fast = false;  ///< the tensor-core kernel; else conv_pool_general
  int kernel_w = 0, patch_rows = 0, tiles_w = 0;
  size_t smem_bytes = 0;
  FusedGrid g{};
};

/// Whether the code that runs on this device has TF32 mma (tf32_mma_in). Throws CudaError.
bool tensor_cores_here() { return tf32_mma_in(conv_pool_tensor_cores<3>); }

Plan make_plan(const Problem& pr) {
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
int64_t layout_floats(const Problem& p, const Plan& q) {
  return int64_t(p.groups) * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group * p.kernel_size.h *
         p.kernel_size.w * kCoTile * kCiChunk;
}

/// Workspace: the partial sums (N, parts, Cout) fp32 as in stages 06-09, then on the fast path
/// the laid-out weights: (groups * ceil(Cin/g / 8) * ceil(Cout/g / 128) * kH * kW * 1024) fp32,
/// 295 KB at the KernelBench size.
size_t workspace_bytes(const Problem& p) {
  const Plan q = make_plan(p);
  if (!q.fast) return partials_bytes(p, q.g.parts);
  return aligned_partials_bytes(p, q.g.parts) + size_t(layout_floats(p, q)) * sizeof(float);
}

/// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
size_t shared_memory_bytes(const Problem& p) { return make_plan(p).smem_bytes; }

/// Calls f(kernel) with the tiled kernel for q.kernel_w (1..kMaxKernelW).
template <typename F>
void with_tiled_kernel(const Plan& q, F&& f) {
  with_kernel_width(q.kernel_w, [&](auto w) { f(conv_pool_tensor_cores<decltype(w)::value>); });
}

/// Once per problem, outside the timed region: the opt-in above 48 KB of dynamic shared memory.
/// Throws CudaError if the device cannot give the plan's shared memory.
void prepare(const Problem& p) {
  const Plan q = make_plan(p);
  if (!q.fast) return;
  with_tiled_kernel(q, [&](auto kernel) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(q.smem_bytes)));
  });
}

/// Enqueues the stage: `weight_layout` (named `layout_name`) lays the weights out in the
/// workspace, then the tiled kernel runs; prepare(a.problem) must have run first.
void run_mma_tile(const GpuStageArgs& a, WeightLayoutKernel weight_layout, const char* layout_name) {
  const Problem& p = a.problem;
  const Plan q = make_plan(p);
  float* partials = static_cast<float*>(a.workspace);
  a.marks.begin(Phase::Fused);
  if (!q.fast) {
    launch_conv_pool_general(p, a.in, q.g, partials, a.stream);
  } else {
    const ConvParams cp = conv_params(p);
    float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + aligned_partials_bytes(p, q.g.parts));
    const int64_t total = layout_floats(p, q);
    weight_layout<<<blocks_for(total, kThreads, layout_name), kThreads, 0, a.stream>>>(
        cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, total);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)  // the message built only on failure
      throw_cuda_error(e, (std::string("launch of ") + layout_name).c_str(), __FILE__, __LINE__);
    const TiledArgs t{cp, a.in.x, wt, partials, q.g, q.tiles_w, q.patch_rows};
    with_tiled_kernel(q, [&](auto kernel) {
      kernel<<<q.g.blocks, kThreads, q.smem_bytes, a.stream>>>(t);
      CUDA_CHECK_LAUNCH("conv_pool_tensor_cores");
    });
  }
  a.marks.begin(Phase::Epilogue);
  launch_finish_pooled_logsumexp(p, partials, q.g.parts, a.in, a.pooled, a.y, a.stream);
}

/// Says when no tensor core runs (`what`: the stage's arithmetic, "TF32 mma"): below sm_80, or
/// code JIT-compiled from an older PTX.
std::string mma_tile_device_note(const char* what) { return tensor_cores_here() ? "" : no_tf32_mma_note(what); }

}  // namespace
}  // namespace ladder
