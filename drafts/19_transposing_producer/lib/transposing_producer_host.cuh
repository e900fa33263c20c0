// The plan of the transposing-producer rung (19, a draft), which stage 17's host half
// (lib/warp_specialized_host.cuh: WsHost) takes in place of its own: a slot that also holds the
// K-major copy of the box, and a ring of kTpRing slots.
#pragma once

#include <cstdint>

#include "conv_params.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/warp_specialized_host.cuh"  // WsPlan, make_ws_plan, ws_weight_bytes, ws_box_bytes, WsHost

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

}  // namespace
}  // namespace ladder
