// Stage 17: warp specialization. Stage 15's implicit GEMM (4 output rows x 64 columns x 128
// channels a block, k = (tap, 8 input channels), m64n128k8 TF32 wgmma, the pool from the
// accumulators) with its block split into roles instead of every thread doing every job:
//  - a producer warpgroup: one thread issues all copies, x straight from NCHW by the copy engine
//    through a tensor map (one box per step; the conv's zero padding is the box's out-of-bounds
//    fill) and the weights by one bulk copy, as in stage 15; the rest of the warpgroup idles;
//  - two consumer warpgroups: each waits on a FULL mbarrier, loads its A fragments from the box
//    into registers (rounding to TF32; no transpose, no staging copy), issues wgmma with B from
//    shared memory, and frees the slot on an EMPTY mbarrier once the wgmma that read it are done;
//    no block-wide barrier in the main loop;
//  - a four-slot ring of (x box, weights) pairs; setmaxnreg moves registers from the producer to
//    the consumers (384 threads: 168 each at entry, then 40 and 232);
//  - finish: as in stages 14 and 15 (lib/fused_partials.cuh).
// wgmma and setmaxnreg exist only in sm_90a code: CMake builds this stage so when 90 is in the
// architecture list, and every other GPU or build takes the general FP32 path and says so. This
// file holds the stage's kernels; the instructions are common/toolkit/wgmma.cuh and tma.cuh, the
// tile lib/warp_specialized_tile.cuh, stage 15's weight layout lib/tf32_weight_kmajor.cuh, the host
// half lib/warp_specialized_host.cuh.
#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/fused_partials.cuh"
#include "lib/register_stage.hpp"
#include "wgmma.cuh"  // descriptors, wgmma (A from registers), mbarriers, the bulk copy
#include "tma.cuh"    // the tensor copy, setmaxnreg, mbarrier arrival, named barrier
#include "lib/warp_specialized_tile.cuh"  // roles, ring, registers, the x box, the kernel's arguments
#include "lib/tf32_weight_kmajor.cuh"     // stage 15's weight layout: B K-major in TF32
#include "lib/warp_specialized_host.cuh"  // WsHost: the host half
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 17 kernels: begin ---------------------------------------------------------------

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of the tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's 128 channels; a
/// tile is 4 output rows x 64 columns. Stride (1, 1), dilation_w 1, kernel_w == KW (1..5), in_w a
/// multiple of 4, x 16-byte aligned; any kernel_h, dilation_h, padding, output_padding, groups,
/// sizes; sm_90a; 384 threads. As in stage 15,
///   out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[ci, co, kh, kw].
///
/// xmap: x (N, Cin, H, W) as a 5-D tensor map (w, h, ci within the group, group, n), box
/// (a.box_cols, a.box_rows, 8, 1, 1) (lib/warp_specialized_host.cuh: x_tensor_map).
/// Step s = (tile, chunk of 8 input channels); slot s % kWsRing of the ring holds its
///   x box   [8 ci][box_rows][box_cols] fp32, the patch rows ih0 .. and columns iw0 .. of the
///           tile from box column a.box_shift on (the box starts 16 bytes into a row of x), zeros
///           outside x and past the group's channels (the copy engine's fill);
///   weights [tap][khalf][128 co][4 ci] fp32, TF32-rounded, K-major (stage 15's slot).
/// full[slot] completes when both have landed (one arrival with the step's transaction bytes);
/// empty[slot] when the 8 consumer warps have released it (8 arrivals).
template <int KW>
__global__ void __launch_bounds__(kWsThreads, 1)
    conv_pool_warp_specialized(const __grid_constant__ CUtensorMap xmap, WsArgs a) {
  extern __shared__ __align__(1024) float smem[];
  __shared__ float warp_pool[kWsConsumerWarps][kWgCo];
  __shared__ __align__(8) uint64_t full[kWsRing];   // the slot's box and weights have landed
  __shared__ __align__(8) uint64_t empty[kWsRing];  // every consumer warp is done with the slot
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, role = warp / 4;  // role 0 produces
  const BlockCoords bc = block_coords(a.g);
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int chunks = (p.in_per_group + kCiChunk - 1) / kCiChunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int weight_floats = taps * 2 * kWgCo * 4;             // one step's weights
  const int plane = a.box_rows * a.box_cols;                   // one channel of the box, floats
  const int box_floats = kCiChunk * plane;
  float* wring = smem;                                         // [kWsRing][weight_floats]
  float* xring = wring + kWsRing * weight_floats;              // [kWsRing][box_floats]

  if (tid == 0) {
    for (int i = 0; i < kWsRing; ++i) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], kWsConsumerWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the only block-wide barrier: the mbarriers exist before anyone uses them

  if (role == 0) {
    // ---- producer warpgroup: 40 registers; one thread issues every copy --------------------
    setmaxnreg_dec<kWsProducerRegs>();
    if (warp == 0 && lane == 0) {
      // BEGIN SOLUTION
      // STUB: ladder_todo("17.1", "producer: wait EMPTY, expect_tx on FULL, x box by TMA, weights by bulk copy");
      // STUB: ladder_unused(xmap, wring, xring, steps, chunks, weight_floats, box_floats);
      prefetch_tensor_map(&xmap);
      const float* const wt_block =
          &a.wt[int64_t(bc.group * chunks * a.g.co_tiles_per_group + bc.co_base / kWgCo) * weight_floats];
      const uint32_t step_bytes = uint32_t((weight_floats + box_floats) * 4);  // what lands per step
      for (int s = 0; s < steps; ++s) {
        const int slot = s % kWsRing;
        // The slot's previous use, step s - kWsRing, was the (s / kWsRing - 1)-th phase of empty[slot].
        if (s >= kWsRing) mbar_wait(&empty[slot], (s / kWsRing + 1) & 1);
        const int tile = tile_begin + s / chunks, chunk = s % chunks;
        const int th = tile / a.tiles_w, tw = tile - a.tiles_w * th;
        const int ih0 = th * kOutRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
        const int iw0 = tw * kOutCols + p.padding_w - (KW - 1) - a.box_shift;  // a multiple of 4: 16 bytes
        mbar_arrive_expect_tx(&full[slot], step_bytes);
        tma_load_5d(xring + slot * box_floats, &xmap, iw0, ih0, chunk * kCiChunk, bc.group, int(bc.n), &full[slot]);
        bulk_copy(wring + slot * weight_floats, wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats,
                  uint32_t(weight_floats * 4), &full[slot]);
      }
      // END SOLUTION
    }
  } else {
    // ---- consumer warpgroups: 232 registers; wait FULL, wgmma, release EMPTY ----------------
    setmaxnreg_inc<kWsConsumerRegs>();
    const int cwarp = warp - 4, cwg = cwarp / 4, q = cwarp % 4;  // consumer warpgroup, warp in it
    const int g = lane / 4, t = lane % 4;
    const int co_count = min(kWgCo, p.out_per_group - bc.co_base);
    // This thread's A element (pixel 16q + g, channel t) of output row 2*cwg of the patch, tap (kH-1, KW-1).
    const int a_base = t * plane + (kWgRows * cwg) * a.box_cols + a.box_shift + 16 * q + g;
    const uint32_t b_lbo = kWgCo * 16;  // B: the second k-half, 2,048 bytes on; SBO 128 (16 co apart)

    float acc[kWgRows][64];  // read by the wgmma's "+f" operands; a tile's first wgmma ignores them (scale-d 0)
#pragma unroll
    for (int r = 0; r < kWgRows; ++r)
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[r][i] = 0.0f;
    float pool[16][2] = {};
    uint32_t afrag[kWgRows][4];  // one A fragment per m64 row: row r's wgmma reads afrag[r]
    int owed = -1;               // a slot whose wgmma may still run: released after the next wait

    for (int tile = tile_begin; tile < tile_end; ++tile) {
      for (int c = 0; c < chunks; ++c) {
        const int step = (tile - tile_begin) * chunks + c, slot = step % kWsRing;
        mbar_wait(&full[slot], (step / kWsRing) & 1);  // the box and the weights of this step
        const float* xs = xring + slot * box_floats + a_base;
        const uint32_t ws = smem_addr(wring + slot * weight_floats);
        for (int kh = 0; kh < p.kernel_h; ++kh) {
          const float* xrow = xs + (p.kernel_h - 1 - kh) * p.dilation_h * a.box_cols;
#pragma unroll
          for (int kw = 0; kw < KW; ++kw) {
            const uint64_t bd = wgmma_desc(ws + uint32_t((kh * KW + kw) * 2 * kWgCo * 16), b_lbo, 128);
#pragma unroll
            for (int r = 0; r < kWgRows; ++r) {
              // BEGIN SOLUTION
              // STUB: if (step == 0 && kh == 0 && kw == 0 && r == 0)
              // STUB:   ladder_todo("17.2", "consumer: A fragment (rounded), wgmma, commit, wait 1, release");
              // STUB: ladder_unused(xrow, bd, afrag, owed);
              // afrag[r] was last read by row r's wgmma of the previous tap: complete, since
              // every wgmma is its own group and the wait<1> after the one since covered it.
              const float* src = xrow + r * a.box_cols + (KW - 1 - kw);
              afrag[r][0] = tf32_bits(src[0]);              // (pixel g,     channel t)
              afrag[r][1] = tf32_bits(src[8]);              // (pixel g + 8, channel t)
              afrag[r][2] = tf32_bits(src[4 * plane]);      // (pixel g,     channel t + 4)
              afrag[r][3] = tf32_bits(src[4 * plane + 8]);  // (pixel g + 8, channel t + 4)
              wgmma_fence();  // the fragment's register writes before the wgmma that reads them
              wgmma_m64n128k8_rs(acc[r], afrag[r], bd, c > 0 || kh > 0 || kw > 0);
              wgmma_commit();
              wgmma_wait<1>();  // every wgmma but this one is done: the other row's fragment is free
              if (owed >= 0) {  // the previous step's last wgmma is done: its slot goes back
                __syncwarp();
                if (lane == 0) mbar_arrive(empty + owed);
                owed = -1;
              }
              // END SOLUTION
            }
          }
        }
        owed = slot;  // this step's last wgmma may still be reading the slot's weights
      }
      {  // the tile is complete: pool its in-range pixels from the accumulators
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
    named_barrier_sync<1, kWsConsumerThreads>();  // the consumers only: the producer has left
    const int ct = tid - 128;
    if (ct < co_count) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < kWsConsumerWarps; ++w) s += warp_pool[w][ct];
      *partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels, bc.group * p.out_per_group + bc.co_base + ct) = s;
    }
  }
}

// ---- stage 17 kernels: end -----------------------------------------------------------------

/// What the host half (lib/warp_specialized_host.cuh: plan, workspace, tensor map, launches)
/// takes from this stage.
struct WsRung : WsRungDefaults {  // stage 17 keeps the default plan and launch
  template <int KW>
  static auto kernel() { return conv_pool_warp_specialized<KW>; }
  static auto weight_layout() { return tf32_weight_kmajor; }
};
using Host = WsHost<WsRung>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // probe, plan, workspace, opt-in, tensor map, launches; tensor cores, deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "warp specialization: a TMA producer warp, wgmma consumer warpgroups on full/empty mbarriers";
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
