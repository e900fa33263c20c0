// The host half of the 3xTF32 warp-specialized rung (18, a draft): stage 17's host half
// (lib/warp_specialized_host.cuh: the tensor map of x, the probe, the fallback) with two changes,
// as stage 16's WgmmaOperands made of stage 15's:
//  - a ring slot holds both TF32 parts of a step's weights, and the laid-out weights in the
//    workspace are twice stage 17's;
//  - the plan picks the ring's depth: the most slots, at most kTwsMaxRing, that fit the block's
//    shared memory; fewer than kTwsMinRing take the general FP32 path, as a ring that does not fit
//    does in stage 17.
// The stage passes its kernels:
//   struct Rung {
//     template <int KW> static auto kernel();  // conv_pool_three_tf32_warp_specialized<KW>: (CUtensorMap, TwsArgs)
//     static auto weight_layout();             // tf32_split_weight_kmajor: both parts, stage 16's layout
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
#include "lib/kernel_width.cuh"             // ceil_div, with_kernel_width
#include "lib/wgmma_host.cuh"               // wgmma_here, wgmma_device_note
#include "lib/warp_specialized_host.cuh"    // x_tensor_map, ws_weight_bytes (one part), ws_box_bytes
#include "lib/three_tf32_ws_tile.cuh"

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// The launch plan of a problem: a pure function of the problem and the device, so
/// workspace_bytes, prepare and run agree. Stage 17's WsPlan plus the ring's depth.
struct TwsPlan {
  bool fast = false;  ///< the 3xTF32 warp-specialized kernel; else conv_pool_general
  int kernel_w = 0, tiles_w = 0;
  XBox box{};
  int shift = 0;  ///< box_shift: the box's columns left of the patch
  int ring = 0;   ///< slots, kTwsMinRing .. kTwsMaxRing
  size_t smem_bytes = 0;
  FusedGrid g{};
};

/// Bytes of one ring slot: both TF32 parts of one step's weights (kTwsParts x taps x 2 k-halves x
/// 128 co x 4 ci fp32) and one x box (8 channels x rows x cols fp32, stage 17's). All multiples
/// of 128 bytes, so every slot keeps the alignment the copy engine wants. KernelBench (3 x 3, a
/// 6 x 68 box): 2 x 36,864 + 13,056 = 86,784.
inline int64_t tws_slot_bytes(int64_t taps, XBox b) { return kTwsParts * ws_weight_bytes(taps) + ws_box_bytes(b); }

/// The most slots (at most kTwsMaxRing) of slot_bytes that fit next to the static shared memory
/// in limit bytes; 0 where fewer than kTwsMinRing fit.
constexpr int tws_ring(int64_t slot_bytes, int64_t limit) {
  const int64_t n = std::min<int64_t>(kTwsMaxRing, (limit - kWsStaticBytes) / slot_bytes);
  return n >= kTwsMinRing ? int(n) : 0;
}
// At the H100/H200 opt-in limit (232,448 bytes): the KernelBench slot gets two slots, not 17's four.
static_assert(tws_ring(2 * 9 * 4096 + 8 * 6 * 68 * 4, 232448) == 2, "KernelBench: a two-slot ring");
static_assert(tws_ring(9 * 4096 + 8 * 6 * 68 * 4, 232448) == 4, "one part (stage 17's slot): four");

inline TwsPlan make_tws_plan(const Problem& pr) {
  pr.validate();
  TwsPlan q;
  const int64_t rows = kOutRows + (pr.kernel_size.h - 1) * pr.dilation.h;
  const int64_t taps = pr.kernel_size.h * pr.kernel_size.w;
  const bool shape_ok = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 &&
                        pr.kernel_size.w <= kMaxKernelW && rows <= kMaxWgPatchRows && pr.in_w % 4 == 0;
  if (shape_ok) {
    q.shift = box_shift(int(pr.padding.w), int(pr.kernel_size.w));
    q.box = x_box(int(rows), int(pr.kernel_size.w), q.shift);
    const int64_t slot = tws_slot_bytes(taps, q.box);
    q.ring = tws_ring(slot, int64_t(shared_memory_per_block_limit()));
    alignas(16) static const float probe[4] = {};  // an aligned address: the plan checks the map's shape only
    q.fast = q.ring > 0 && tensor_map_problem(x_tensor_map(pr, probe, q.box)).empty() && wgmma_here();
    q.smem_bytes = size_t(q.ring * slot);
  }
  if (!q.fast) {
    q = TwsPlan{};
    q.g = general_grid(pr);
    return q;
  }
  q.kernel_w = int(pr.kernel_size.w);
  q.tiles_w = int(ceil_div(pr.out_w(), kOutCols));
  const int64_t units = ceil_div(pr.out_h(), kOutRows) * q.tiles_w;
  q.g = chunked_tile_grid(pr, units, kWgCo, "conv_pool_three_tf32_warp_specialized");
  return q;
}

/// Floats of the laid-out weights of a fast plan, both parts (stage 16's layout: groups x
/// ceil(Cin/g / 8) x co tiles x 2 parts x kH x kW x 128 x 8; 2 x 295 KB at the KernelBench size).
inline int64_t tws_layout_floats(const Problem& p, const TwsPlan& q) {
  return int64_t(kTwsParts) * p.groups * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group *
         p.kernel_size.h * p.kernel_size.w * kWgCo * kCiChunk;
}

/// Workspace: the partial sums (N, parts, Cout) fp32, then on the fast path the laid-out weights;
/// a fast plan also covers the general path's partials (an x that is not 16-byte aligned takes it).
inline size_t tws_workspace_bytes(const Problem& p) {
  const TwsPlan q = make_tws_plan(p);
  if (!q.fast) return partials_bytes(p, q.g.parts);
  return std::max(aligned_partials_bytes(p, q.g.parts) + size_t(tws_layout_floats(p, q)) * sizeof(float),
                  partials_bytes(p, general_grid(p).parts));
}

/// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
inline size_t tws_shared_memory_bytes(const Problem& p) { return make_tws_plan(p).smem_bytes; }

template <class Rung>
struct TwsHost {
  /// Calls f(kernel) with the kernel for q's kernel width.
  template <typename F>
  static void with_kernel(const TwsPlan& q, F&& f) {
    with_kernel_width(q.kernel_w, [&](auto w) { f(Rung::template kernel<decltype(w)::value>()); });
  }

  /// Once per problem, outside the timed region: the probe and the opt-in above 48 KB of dynamic
  /// shared memory. Throws CudaError if the device cannot give the plan's shared memory.
  static void prepare(const Problem& p) {
    const TwsPlan q = make_tws_plan(p);
    if (q.fast) with_kernel(q, [&](auto kernel) { opt_in_shared_memory(kernel, q.smem_bytes); });
  }

  /// Enqueues the stage: tf32_split_weight_kmajor lays both parts of the weights out in the
  /// workspace, the tensor map of x is encoded (host only), the kernel runs, then the finish;
  /// prepare(a.problem) must have run first. Throws std::invalid_argument / CudaError from the
  /// tensor map's encoding (naming the parameter), CudaError from a launch.
  static void run(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    TwsPlan q = make_tws_plan(p);
    if (q.fast && reinterpret_cast<uintptr_t>(a.in.x) % 16 != 0) {  // the copy engine needs a 16-byte aligned base
      q = TwsPlan{};
      q.g = general_grid(p);
    }
    run_fused_plan(a, q, [&](float* partials) {
      const ConvParams cp = conv_params(p);
      float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + aligned_partials_bytes(p, q.g.parts));
      const int64_t total = tws_layout_floats(p, q);
      const auto layout = Rung::weight_layout();
      layout<<<blocks_for(total, kThreads, "tf32_split_weight_kmajor"), kThreads, 0, a.stream>>>(
          cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, total);
      CUDA_CHECK_LAUNCH("tf32_split_weight_kmajor");
      const CUtensorMap xmap = encode_tensor_map_f32(x_tensor_map(p, a.in.x, q.box), "x");
      const TwsArgs t{cp, wt, partials, q.g, q.tiles_w, q.box.rows, q.box.cols, q.shift, q.ring};
      with_kernel(q, [&](auto kernel) {
        kernel<<<q.g.blocks, kWsThreads, q.smem_bytes, a.stream>>>(xmap, t);
        CUDA_CHECK_LAUNCH("conv_pool_three_tf32_warp_specialized");
      });
    });
  }

  /// Fills the descriptor's hooks for this host half.
  static void describe(StageDescriptor& d) {
    d.workspace_bytes = tws_workspace_bytes;
    d.run_gpu = run;
    d.shared_memory_bytes = tws_shared_memory_bytes;
    d.device_note = ws_device_note;
    d.prepare = prepare;
    d.tensor_cores = true;
    d.deterministic = true;
  }
};

}  // namespace
}  // namespace ladder
