// The host half of the warp-specialized rung (17): the launch plan (stage 15's conditions, plus
// what the copy engine's tensor map needs), the workspace, the opt-in to more than 48 KB of shared
// memory, the tensor map of x, and the launches. Whether the device runs sm_90a code is stage 15's
// probe (lib/wgmma_host.cuh: wgmma_here, wgmma_device_note). The stage passes its kernels, and
// may replace the plan or the launch (WsRungDefaults, stage 17's):
//   struct Rung : WsRungDefaults {
//     template <int KW> static auto kernel();  // conv_pool_warp_specialized<KW>: (CUtensorMap, WsArgs)
//     static auto weight_layout();             // tf32_weight_kmajor, stage 15's layout
//   };
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "tensor_map.hpp"  // TensorMapF32, tensor_map_problem, encode_tensor_map_f32
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"  // ceil_div, with_kernel_width
#include "lib/wgmma_host.cuh"    // wgmma_here, wgmma_device_note
#include "lib/warp_specialized_tile.cuh"

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// The launch plan of a problem: a pure function of the problem and the device, so
/// workspace_bytes, prepare and run agree. (x's address is not part of it: run() sends an x that
/// is not 16-byte aligned down the general path, which the workspace also covers.)
struct WsPlan {
  bool fast = false;  ///< the warp-specialized kernel; else conv_pool_general
  int kernel_w = 0, tiles_w = 0;
  XBox box{};
  int shift = 0;  ///< box_shift: the box's columns left of the patch
  size_t smem_bytes = 0;
  FusedGrid g{};
};

/// The tensor map of x (N, Cin, H, W) fp32 as the kernel reads it: 5-D (w, h, channel within the
/// group, group, n), innermost first, so that a chunk's channels past the group's end read as
/// zeros (as past the tensor's edges: the conv's padding) rather than as the next group's. Box:
/// (box cols, box rows, 8 channels, 1 group, 1 sample).
inline TensorMapF32 x_tensor_map(const Problem& p, const float* x, XBox box) {
  TensorMapF32 m;
  m.base = x;
  m.rank = 5;
  const uint64_t w = uint64_t(p.in_w), h = uint64_t(p.in_h), cg = uint64_t(p.in_per_group()), g = uint64_t(p.groups);
  m.size[0] = w, m.size[1] = h, m.size[2] = cg, m.size[3] = g, m.size[4] = uint64_t(p.batch);
  m.stride[0] = w * 4, m.stride[1] = w * h * 4, m.stride[2] = cg * w * h * 4, m.stride[3] = g * cg * w * h * 4;
  m.box[0] = uint32_t(box.cols), m.box[1] = uint32_t(box.rows), m.box[2] = kCiChunk, m.box[3] = 1, m.box[4] = 1;
  return m;
}

/// Bytes of one ring slot: one step's weights (taps x 2 k-halves x 128 co x 4 ci fp32, stage 15's
/// weight slot) and one x box (8 channels x rows x cols fp32). Both multiples of 128 bytes, so
/// every slot's start keeps the 128-byte alignment the copy engine wants.
inline int64_t ws_weight_bytes(int64_t taps) { return taps * 2 * kWgCo * 4 * int64_t(sizeof(float)); }
inline int64_t ws_box_bytes(XBox b) { return int64_t(kCiChunk) * b.rows * b.cols * int64_t(sizeof(float)); }

inline WsPlan make_ws_plan(const Problem& pr) {
  pr.validate();
  WsPlan q;
  const int64_t rows = kOutRows + (pr.kernel_size.h - 1) * pr.dilation.h;
  const int64_t taps = pr.kernel_size.h * pr.kernel_size.w;
  const bool shape_ok = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 &&
                        pr.kernel_size.w <= kMaxKernelW && rows <= kMaxWgPatchRows && pr.in_w % 4 == 0;
  if (shape_ok) {
    q.shift = box_shift(int(pr.padding.w), int(pr.kernel_size.w));
    q.box = x_box(int(rows), int(pr.kernel_size.w), q.shift);
    const int64_t bytes = kWsRing * (ws_weight_bytes(taps) + ws_box_bytes(q.box));
    alignas(16) static const float probe[4] = {};  // an aligned address: the plan checks the map's shape only
    q.fast = bytes + kWsStaticBytes <= int64_t(shared_memory_per_block_limit()) &&
             tensor_map_problem(x_tensor_map(pr, probe, q.box)).empty() && wgmma_here();
    q.smem_bytes = size_t(bytes);
  }
  if (!q.fast) {
    q = WsPlan{};
    q.g = general_grid(pr);
    return q;
  }
  q.kernel_w = int(pr.kernel_size.w);
  q.tiles_w = int(ceil_div(pr.out_w(), kOutCols));
  const int64_t units = ceil_div(pr.out_h(), kOutRows) * q.tiles_w;
  q.g = chunked_tile_grid(pr, units, kWgCo, "conv_pool_warp_specialized");
  return q;
}

/// Floats of the laid-out weights of a fast plan (stage 15's layout: groups x ceil(Cin/g / 8) x
/// co tiles x kH x kW x 128 x 8).
inline int64_t ws_layout_floats(const Problem& p, const WsPlan& q) {
  return int64_t(p.groups) * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group * p.kernel_size.h *
         p.kernel_size.w * kWgCo * kCiChunk;
}

/// Says when the warp-specialized kernel does not run on this device or for this problem shape:
/// stage 15's note about the device (sm_90 with sm_90a code).
inline std::string ws_device_note() { return wgmma_device_note(); }

/// What WsHost asks of a rung besides its kernels, with stage 17's answers: the plan of a problem
/// and the checked launch of the kernel over it. A rung that plans or launches otherwise derives
/// from this and declares its own plan or launch, which hides this one.
struct WsRungDefaults {
  static WsPlan plan(const Problem& p) { return make_ws_plan(p); }
  template <class Kernel>
  static void launch(Kernel kernel, const WsPlan& q, const CUtensorMap& xmap, const WsArgs& t, cudaStream_t stream) {
    kernel<<<q.g.blocks, kWsThreads, q.smem_bytes, stream>>>(xmap, t);
    CUDA_CHECK_LAUNCH("conv_pool_warp_specialized");
  }
};

template <class Rung>
struct WsHost {
  /// Calls f(kernel) with the kernel for q's kernel width.
  template <typename F>
  static void with_kernel(const WsPlan& q, F&& f) {
    with_kernel_width(q.kernel_w, [&](auto w) { f(Rung::template kernel<decltype(w)::value>()); });
  }

  /// Workspace: the partial sums (N, parts, Cout) fp32, then on the fast path the laid-out weights;
  /// a fast plan also covers the general path's partials (an x that is not 16-byte aligned takes it).
  static size_t workspace_bytes(const Problem& p) {
    const WsPlan q = Rung::plan(p);
    if (!q.fast) return partials_bytes(p, q.g.parts);
    return std::max(aligned_partials_bytes(p, q.g.parts) + size_t(ws_layout_floats(p, q)) * sizeof(float),
                    partials_bytes(p, general_grid(p).parts));
  }

  /// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
  static size_t shared_memory_bytes(const Problem& p) { return Rung::plan(p).smem_bytes; }

  /// Once per problem, outside the timed region: the probe and the opt-in above 48 KB of dynamic
  /// shared memory. Throws CudaError if the device cannot give the plan's shared memory.
  static void prepare(const Problem& p) {
    const WsPlan q = Rung::plan(p);
    if (q.fast) with_kernel(q, [&](auto kernel) { opt_in_shared_memory(kernel, q.smem_bytes); });
  }

  /// Enqueues the stage: tf32_weight_kmajor lays the weights out in the workspace, the tensor map
  /// of x is encoded (host only, no CUDA call on the stream), the kernel runs, then the finish;
  /// prepare(a.problem) must have run first. Throws std::invalid_argument / CudaError from the
  /// tensor map's encoding (naming the parameter), CudaError from a launch.
  static void run(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    WsPlan q = Rung::plan(p);
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
      with_kernel(q, [&](auto kernel) { Rung::launch(kernel, q, xmap, t, a.stream); });
    });
  }

  /// Fills the descriptor's hooks for this host half.
  static void describe(StageDescriptor& d) {
    d.workspace_bytes = workspace_bytes;
    d.run_gpu = run;
    d.shared_memory_bytes = shared_memory_bytes;
    d.device_note = ws_device_note;
    d.prepare = prepare;
    d.tensor_cores = true;
    d.deterministic = true;
  }
};

}  // namespace
}  // namespace ladder
