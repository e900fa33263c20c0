// Stage 19 (a draft, never run on a GPU): stage 17 with a producer warpgroup that transposes, so
// that the consumers' wgmma read both operands from shared memory and a whole kernel row of them
// is one commit group. Stage 17's consumers loaded and rounded every A fragment themselves, between
// wgmma: one wgmma in flight per warpgroup, and ptxas serializes every deeper queue of register
// fragments (stage 17's EXPERIMENTS.md, "Deeper wgmma queues, tried on the compiler"). Here:
//  - the producer warpgroup: one thread issues the copies as in stage 17 (x box by tensor map,
//    weights by bulk copy), two steps ahead; then all four warps wait for the box, transpose it
//    into stage 15's K-major layout, rounding to TF32, fence the stores for the async proxy and
//    arrive on READY;
//  - the consumer warpgroups: wait READY, issue a kernel row's 2 x KW wgmma with A and B by
//    descriptor as one group, wait for the row before and release the previous step's slot on
//    EMPTY: a whole kernel row of wgmma (6 at kernel width 3) stays in flight while the next is
//    issued, where stage 17 keeps one;
//  - a three-slot ring of (weights, K-major x, x box); setmaxnreg 56 / 224 (the producer needs
//    registers for the transpose now).
// The instructions are common/toolkit/wgmma.cuh and tma.cuh, the tile lib/warp_specialized_tile.cuh
// (stage 17's), the weight layout lib/tf32_weight_kmajor.cuh, the plan
// lib/transposing_producer_host.cuh, the host half stage 17's lib/warp_specialized_host.cuh.
#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/fused_partials.cuh"
#include "lib/register_stage.hpp"
#include "wgmma.cuh"  // descriptors, wgmma, mbarriers, the bulk copy, the proxy fence
#include "tma.cuh"    // the tensor copy, setmaxnreg, mbarrier arrival, named barrier
#include "lib/warp_specialized_tile.cuh"        // roles, the x box, the kernel's arguments
#include "lib/tf32_weight_kmajor.cuh"           // stage 15's weight layout: B K-major in TF32
#include "lib/transposing_producer_host.cuh"    // kTpRing, the plan (stage 17's WsHost runs it)
#include "todo.cuh"

namespace ladder {
namespace {

// The producer transposes now: it keeps 56 registers and the consumers, whose A no longer passes
// through registers, take 224 (128 accumulators, 32 pool sums, addresses).
constexpr int kTpProducerRegs = 56;
constexpr int kTpConsumerRegs = 224;
static_assert(128 * kTpProducerRegs + kWsConsumerThreads * kTpConsumerRegs <= kWsThreads * kWsEntryRegs,
              "the consumers take no more registers than the producer gives back");

// ---- stage 19 kernels: begin ---------------------------------------------------------------

/// partials[n, part, co] as stage 17's conv_pool_warp_specialized, under the same conditions (stride
/// (1, 1), dilation_w 1, kernel_w == KW (1..5), in_w a multiple of 4, x 16-byte aligned; sm_90a;
/// 384 threads).
///
/// Step s = (tile, chunk of 8 input channels); slot s % kTpRing holds its
///   weights [tap][khalf][128 co][4 ci] fp32, TF32, K-major (stage 15's, by bulk copy);
///   kmajor  [khalf][box_rows][kKPitch][4 ci] fp32, TF32: the box transposed by the producer
///           warpgroup (stage 15's A layout: 8 pixels x 4 channels are one 128-byte core matrix);
///   x box   [8 ci][box_rows][box_cols] fp32 as the copy engine writes it (stage 17's).
/// full[slot]: box and weights landed (one arrival with the transaction bytes);
/// ready[slot]: the K-major copy is written and fenced (128 producer arrivals);
/// empty[slot]: the 8 consumer warps' wgmma of the step are done (8 arrivals).
template <int KW>
__global__ void __launch_bounds__(kWsThreads, 1)
    conv_pool_transposing_producer(const __grid_constant__ CUtensorMap xmap, WsArgs a) {
  extern __shared__ __align__(1024) float smem[];
  __shared__ float warp_pool[kWsConsumerWarps][kWgCo];
  __shared__ __align__(8) uint64_t full[kTpRing];
  __shared__ __align__(8) uint64_t ready[kTpRing];
  __shared__ __align__(8) uint64_t empty[kTpRing];
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, role = warp / 4;  // role 0 produces
  const BlockCoords bc = block_coords(a.g);
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int chunks = (p.in_per_group + kCiChunk - 1) / kCiChunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int weight_floats = taps * 2 * kWgCo * 4;              // one step's weights
  const int plane = a.box_rows * a.box_cols;                    // one channel of the box, floats
  const int box_floats = kCiChunk * plane;
  const int kmajor_floats = 2 * a.box_rows * kKPitch * 4;       // the box, K-major
  float* wring = smem;                                          // [kTpRing][weight_floats]
  float* kring = wring + kTpRing * weight_floats;               // [kTpRing][kmajor_floats]
  float* xring = kring + kTpRing * kmajor_floats;               // [kTpRing][box_floats]

  if (tid == 0) {
    for (int i = 0; i < kTpRing; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&ready[i], 128);
      mbar_init(&empty[i], kWsConsumerWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the only block-wide barrier: the mbarriers exist before anyone uses them

  if (role == 0) {
    // ---- producer warpgroup: 56 registers; thread 0 copies, all 128 transpose ---------------
    setmaxnreg_dec<kTpProducerRegs>();
    const float* const wt_block =
        &a.wt[int64_t(bc.group * chunks * a.g.co_tiles_per_group + bc.co_base / kWgCo) * weight_floats];
    const uint32_t step_bytes = uint32_t((weight_floats + box_floats) * 4);  // what lands per step
    // The copies of step s into its slot, once the consumers have released the slot's last use.
    auto issue = [&](int s) {
      const int slot = s % kTpRing;
      if (s >= kTpRing) mbar_wait(&empty[slot], (s / kTpRing + 1) & 1);  // step s - kTpRing's release
      const int tile = tile_begin + s / chunks, chunk = s % chunks;
      const int th = tile / a.tiles_w, tw = tile - a.tiles_w * th;
      const int ih0 = th * kOutRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
      const int iw0 = tw * kOutCols + p.padding_w - (KW - 1) - a.box_shift;  // a multiple of 4: 16 bytes
      mbar_arrive_expect_tx(&full[slot], step_bytes);
      tma_load_5d(xring + slot * box_floats, &xmap, iw0, ih0, chunk * kCiChunk, bc.group, int(bc.n), &full[slot]);
      bulk_copy(wring + slot * weight_floats, wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats,
                uint32_t(weight_floats * 4), &full[slot]);
    };
    const bool copier = warp == 0 && lane == 0;
    if (copier) {
      prefetch_tensor_map(&xmap);
      for (int s = 0; s < kTpRing - 1 && s < steps; ++s) issue(s);
    }
    // Warp w transposes k-half w & 1 (channels 4 (w & 1) .. +3), rows w >> 1, +2, ...; lane: columns
    // lane, +32, +64 of the patch (kcols = 64 + KW - 1, from the box's column box_shift on).
    const int khalf = warp & 1, kcols = kOutCols + KW - 1;
    for (int s = 0; s < steps; ++s) {
      const int slot = s % kTpRing;
      mbar_wait(&full[slot], (s / kTpRing) & 1);  // this step's box has landed
      // draft solution region: begin
      // draft stub: if (s == 0)
      // draft stub:   ladder_todo("19.1", "producer: transpose the box K-major, rounded; fence; arrive READY");
      // draft stub: ladder_unused(kring, xring, kmajor_floats, box_floats, plane, khalf, kcols);
      const float* xs = xring + slot * box_floats + khalf * 4 * plane + a.box_shift;
      float* kd = kring + slot * kmajor_floats + khalf * a.box_rows * kKPitch * 4;
      for (int r = warp >> 1; r < a.box_rows; r += 2) {
#pragma unroll
        for (int c0 = 0; c0 < kKPitch; c0 += 32) {
          const int c = c0 + lane;
          if (c >= kcols) continue;
          const float* src = xs + r * a.box_cols + c;  // pixel (r, c), channel 4 khalf
          float4 v;
          v.x = __uint_as_float(tf32_bits(src[0]));
          v.y = __uint_as_float(tf32_bits(src[plane]));
          v.z = __uint_as_float(tf32_bits(src[2 * plane]));
          v.w = __uint_as_float(tf32_bits(src[3 * plane]));
          *reinterpret_cast<float4*>(kd + (r * kKPitch + c) * 4) = v;
        }
      }
      fence_proxy_async();    // these generic-proxy stores, before the wgmma that read them (async proxy)
      mbar_arrive(&ready[slot]);
      // draft solution region: end
      // The copies two steps ahead: their slot's last use, step s - 1, is released once the
      // consumers have issued step s, which the arrival above lets them do.
      if (copier && s + kTpRing - 1 < steps) issue(s + kTpRing - 1);
    }
  } else {
    // ---- consumer warpgroups: 224 registers; wait READY, one group of wgmma a kernel row ----
    setmaxnreg_inc<kTpConsumerRegs>();
    const int cwarp = warp - 4, cwg = cwarp / 4, q = cwarp % 4;  // consumer warpgroup, warp in it
    const int g = lane / 4, t = lane % 4;
    const int co_count = min(kWgCo, p.out_per_group - bc.co_base);
    const uint32_t a_lbo = uint32_t(a.box_rows * kKPitch * 16);  // A: the second k-half
    const uint32_t b_lbo = kWgCo * 16;                           // B: the second k-half, 2,048 bytes on

    float acc[kWgRows][64];  // read by the wgmma's "+f" operands; a tile's first wgmma ignores them (scale-d 0)
#pragma unroll
    for (int r = 0; r < kWgRows; ++r)
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[r][i] = 0.0f;
    float pool[16][2] = {};
    int owed = -1;  // the slot of the previous step, whose last group may still run

    for (int tile = tile_begin; tile < tile_end; ++tile) {
      for (int c = 0; c < chunks; ++c) {
        const int step = (tile - tile_begin) * chunks + c, slot = step % kTpRing;
        mbar_wait(&full[slot], (step / kTpRing) & 1);   // the weights (already waited for by the producer)
        mbar_wait(&ready[slot], (step / kTpRing) & 1);  // the K-major x
        const uint32_t kb = smem_addr(kring + slot * kmajor_floats);
        const uint32_t ws = smem_addr(wring + slot * weight_floats);
        // draft solution region: begin
        // draft stub: if (step == 0)
        // draft stub:   ladder_todo("19.2", "consumer: a kernel row's wgmma by descriptors, one group; wait 1; release");
        // draft stub: ladder_unused(kb, ws, a_lbo, b_lbo, owed);
        for (int kh = 0; kh < p.kernel_h; ++kh) {
          // One group per kernel row: ptxas closes a group at every trip of a loop that is not
          // unrolled anyway (the last HGMMA of a trip carries gsb0), so the row is the unit the
          // waits can count.
          const int row_shift = (p.kernel_h - 1 - kh) * p.dilation_h;
          wgmma_fence();
#pragma unroll
          for (int kw = 0; kw < KW; ++kw) {
            const uint64_t bd = wgmma_desc(ws + uint32_t((kh * KW + kw) * 2 * kWgCo * 16), b_lbo, 128);
#pragma unroll
            for (int r = 0; r < kWgRows; ++r) {
              const int prow = cwg * kWgRows + r + row_shift;  // patch row of this m64 row and tap
              const uint64_t ad = wgmma_desc(kb + uint32_t((prow * kKPitch + (KW - 1 - kw)) * 16), a_lbo, 128);
              wgmma_m64n128k8(acc[r], ad, bd, c > 0 || kh > 0 || kw > 0);
            }
          }
          wgmma_commit();
          wgmma_wait<1>();  // the row before is done: 2 x KW wgmma stay in flight
          if (owed >= 0) {  // so is the previous step: its slot goes back
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[owed]);
            owed = -1;
          }
        }
        owed = slot;  // this step's last row may still be reading the slot
        // draft solution region: end
      }
      {  // the tile is complete: pool its in-range pixels from the accumulators (stage 17's)
        wgmma_wait<0>();
        if (owed >= 0) {
          __syncwarp();
          if (lane == 0) mbar_arrive(&empty[owed]);
          owed = -1;
        }
#pragma unroll
        for (int r = 0; r < kWgRows; ++r)
#pragma unroll
          for (int i = 0; i < 64; ++i) pin_register(acc[r][i]);  // the reads below stay after the wait
        const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
        const int ow_lo = tw * kOutCols + 16 * q + g, ow_hi = ow_lo + 8;
#pragma unroll
        for (int r = 0; r < kWgRows; ++r) {
          const int oh = th * kOutRows + cwg * kWgRows + r;
          const bool in_lo = oh < p.out_h && ow_lo < p.out_w, in_hi = oh < p.out_h && ow_hi < p.out_w;
#pragma unroll
          for (int j = 0; j < 16; ++j) {
            pool[j][0] += (in_lo ? acc[r][4 * j] : 0.0f) + (in_hi ? acc[r][4 * j + 2] : 0.0f);
            pool[j][1] += (in_lo ? acc[r][4 * j + 1] : 0.0f) + (in_hi ? acc[r][4 * j + 3] : 0.0f);
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int s = 4; s < 32; s *= 2) pool[j][e] += __shfl_xor_sync(0xffffffffu, pool[j][e], s);
    if (g == 0)
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) warp_pool[cwarp][8 * j + 2 * t + e] = pool[j][e];
    named_barrier_sync<1, kWsConsumerThreads>();  // the consumers only: the producer may still be copying
    const int ct = tid - 128;
    if (ct < co_count) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWsConsumerWarps; ++w) s += warp_pool[w][ct];
      *partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels, bc.group * p.out_per_group + bc.co_base + ct) = s;
    }
  }
}

// ---- stage 19 kernels: end -----------------------------------------------------------------

/// What stage 17's host half (lib/warp_specialized_host.cuh) takes from this stage: its kernels,
/// its plan (lib/transposing_producer_host.cuh) and its launch (stage 17's, under this name).
struct TpRung : WsRungDefaults {
  template <int KW>
  static auto kernel() { return conv_pool_transposing_producer<KW>; }
  static auto weight_layout() { return tf32_weight_kmajor; }
  static WsPlan plan(const Problem& p) { return make_tp_plan(p); }
  template <class Kernel>
  static void launch(Kernel kernel, const WsPlan& q, const CUtensorMap& xmap, const WsArgs& t, cudaStream_t stream) {
    kernel<<<q.g.blocks, kWsThreads, q.smem_bytes, stream>>>(xmap, t);
    CUDA_CHECK_LAUNCH("conv_pool_transposing_producer");
  }
};
using Host = WsHost<TpRung>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // plan, workspace, opt-in, tensor map, launches; tensor cores, deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "a producer warpgroup that transposes x K-major: both wgmma operands by descriptor, a kernel row a group";
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
