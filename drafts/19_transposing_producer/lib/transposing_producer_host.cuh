// The host half of the transposing-producer rung (19, a draft): stage 17's host half
// (lib/warp_specialized_host.cuh: the tensor map of x, the probe, the weight layout, the launches)
// with a slot that also holds the K-major copy of the box, and a ring of kTpRing slots. A copy of
// WsHost with its own plan; on promotion WsHost would take the slot's size and the ring's depth
// from the rung instead (as WgmmaHost takes WgmmaOperands for stages 15 and 16).
// The stage passes its kernels:
//   struct Rung {
//     template <int KW> static auto kernel();  // conv_pool_transposing_producer<KW>: (CUtensorMap, WsArgs)
//     static auto weight_layout();             // tf32_weight_kmajor, stage 15's layout
//   };
#pragma once

#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "tensor_map.hpp"                 // encode_tensor_map_f32
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"           // ceil_div, with_kernel_width
#include "lib/warp_specialized_host.cuh"  // WsPlan, make_ws_plan, x_tensor_map, ws_weight_bytes, ws_box_bytes

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

constexpr int kTpRing = 3;  ///< slots of (weights, K-major x, x box)

/// Bytes of the K-major copy of a box: [2 k-halves][box rows][kKPitch columns][4 channels] fp32,
/// stage 15's layout: rows x 2,176 = rows x 17 x 128, so every slot part stays 128-byte aligned.
inline int64_t tp_kmajor_bytes(XBox b) { return 2 * int64_t(b.rows) * kKPitch * 4 * int64_t(sizeof(float)); }

/// Bytes of one slot: one step's weights, the K-major copy and the box. KernelBench (3 x 3, a
/// 6 x 68 box): 36,864 + 13,056 + 13,056 = 62,976; three slots 188,928.
inline int64_t tp_slot_bytes(int64_t taps, XBox b) { return ws_weight_bytes(taps) + tp_kmajor_bytes(b) + ws_box_bytes(b); }

/// Stage 17's plan (shape, box, tensor map, device) with this rung's shared memory: the general
/// path where kTpRing slots do not fit. (Stage 17's own limit, four of its smaller slots, applies
/// first: a problem it sends down the general path goes there here too.)
inline WsPlan make_tp_plan(const Problem& pr) {
  WsPlan q = make_ws_plan(pr);
  if (!q.fast) return q;
  const int64_t bytes = kTpRing * tp_slot_bytes(int64_t(pr.kernel_size.h) * pr.kernel_size.w, q.box);
  if (bytes + kWsStaticBytes > int64_t(shared_memory_per_block_limit())) {
    q = WsPlan{};
    q.g = general_grid(pr);
    return q;
  }
  q.smem_bytes = size_t(bytes);
  return q;
}

inline size_t tp_workspace_bytes(const Problem& p) {
  const WsPlan q = make_tp_plan(p);
  if (!q.fast) return partials_bytes(p, q.g.parts);
  return std::max(aligned_partials_bytes(p, q.g.parts) + size_t(ws_layout_floats(p, q)) * sizeof(float),
                  partials_bytes(p, general_grid(p).parts));
}

inline size_t tp_shared_memory_bytes(const Problem& p) { return make_tp_plan(p).smem_bytes; }

template <class Rung>
struct TpHost {
  template <typename F>
  static void with_kernel(const WsPlan& q, F&& f) {
    with_kernel_width(q.kernel_w, [&](auto w) { f(Rung::template kernel<decltype(w)::value>()); });
  }

  /// Once per problem, outside the timed region: the opt-in above 48 KB of dynamic shared memory.
  static void prepare(const Problem& p) {
    const WsPlan q = make_tp_plan(p);
    if (q.fast) with_kernel(q, [&](auto kernel) { opt_in_shared_memory(kernel, q.smem_bytes); });
  }

  /// As WsHost::run, with this rung's plan and kernel.
  static void run(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    WsPlan q = make_tp_plan(p);
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
        kernel<<<q.g.blocks, kWsThreads, q.smem_bytes, a.stream>>>(xmap, t);
        CUDA_CHECK_LAUNCH("conv_pool_transposing_producer");
      });
    });
  }

  static void describe(StageDescriptor& d) {
    d.workspace_bytes = tp_workspace_bytes;
    d.run_gpu = run;
    d.shared_memory_bytes = tp_shared_memory_bytes;
    d.device_note = ws_device_note;
    d.prepare = prepare;
    d.tensor_cores = true;
    d.deterministic = true;
  }
};

}  // namespace
}  // namespace ladder
