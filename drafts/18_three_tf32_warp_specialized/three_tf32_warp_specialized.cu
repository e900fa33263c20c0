// Stage 18 (a draft, not yet run on a GPU): 3xTF32 on the warp-specialized kernel. Stage 17's
// producer/consumer kernel with each operand split instead of rounded, as stage 16 did to 15:
//  - the weights (B, from shared memory): big = tf32(v) and small = tf32(v - big) laid out once
//    per run, both parts of a step side by side in stage 16's layout; the producer's one bulk copy
//    per step brings both;
//  - x (A, from registers): each consumer thread splits the four values of its fragment as it
//    loads them from the box, into a big and a small fragment (16 registers where stage 17 had 8);
//  - per tap and m64 row three wgmma into the same accumulators, the small products first:
//    A small x B big, A big x B small, A big x B big; one commit group for the three;
//  - the ring: both weight parts double the slot's weights, so the plan picks the depth (2 to 4
//    slots) that fits the block's shared memory; the KernelBench problem gets 2 (stage 17: 4).
// The result is held to the FP32 bound, as stage 16's. wgmma and setmaxnreg exist only in sm_90a
// code: every other GPU or build takes the general FP32 path and says so, as in stage 17.
// This file holds the stage's kernels; the instructions are common/toolkit/wgmma.cuh and tma.cuh,
// stage 17's tile lib/warp_specialized_tile.cuh, this rung's ring and arguments
// lib/three_tf32_ws_tile.cuh, the host half lib/three_tf32_ws_host.cuh.
#include <cstdint>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/fused_partials.cuh"
#include "lib/register_stage.hpp"
#include "wgmma.cuh"  // descriptors, wgmma (A from registers), mbarriers, the bulk copy
#include "tma.cuh"    // the tensor copy, setmaxnreg, mbarrier arrival, named barrier
#include "lib/mma_tile.cuh"               // kCiChunk, tf32_bits
#include "lib/warp_specialized_tile.cuh"  // stage 17's roles, registers, x box
#include "lib/three_tf32_ws_tile.cuh"     // parts, ring depth, the kernel's arguments
#include "lib/three_tf32_ws_host.cuh"     // TwsHost: the host half
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 18 kernels: begin ---------------------------------------------------------------

/// The weights as wgmma reads B, K-major and split into TF32 parts, written once per run (stage
/// 16's layout and split): wt[group][chunk][co_tile][part][tap][khalf][128 co][4] =
/// part 0: big = tf32(w), part 1: small = tf32(w - big), w = weight[group*Cin/g + chunk*8 +
/// khalf*4 + e, co_tile*128 + co, tap], zero past the group's channels; both rounded with
/// cvt.rna (wgmma truncates). A (group, chunk, co_tile) block is one step's bulk copy: all taps
/// of the big part, then all of the small; each (tap, khalf) block of 128 x 4 floats is 16 core
/// matrices of 8 channels x 16 bytes, 128 bytes apart. weight (Cin, Cout/g, kH, kW) fp32; one
/// thread per wt element, `total` of them.
__global__ void tf32_split_weight_kmajor(ConvParams p, const float* weight, float* wt, int chunks, int co_tiles,
                                         int64_t total) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int taps = p.kernel_h * p.kernel_w;
  const int el = int(e % 4), co = int(e / 4 % kWgCo), khalf = int(e / (4 * kWgCo) % 2);
  int64_t rest = e / (8 * kWgCo);
  const int tap = int(rest % taps);
  rest /= taps;
  const int part = int(rest % kTwsParts);
  rest /= kTwsParts;
  const int co_tile = int(rest % co_tiles);
  rest /= co_tiles;
  const int chunk = int(rest % chunks), group = int(rest / chunks);
  const int ci = chunk * kCiChunk + khalf * 4 + el, co_g = co_tile * kWgCo + co;
  float v = 0.0f;
  if (ci < p.in_per_group && co_g < p.out_per_group)
    v = weight[(int64_t(group * p.in_per_group + ci) * p.out_per_group + co_g) * taps + tap];
  const float big = __uint_as_float(tf32_bits(v));
  wt[e] = part == 0 ? big : __uint_as_float(tf32_bits(v - big));
}

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of the tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's 128 channels; a
/// tile is 4 output rows x 64 columns. Stage 17's problems (stride 1, dilation_w 1, kernel_w ==
/// KW (1..5), in_w a multiple of 4, x 16-byte aligned; any kernel_h, dilation_h, padding,
/// output_padding, groups, sizes; sm_90a; 384 threads) and formula (stage 15's gather form),
///   out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[ci, co, kh, kw],
/// each product computed as 3xTF32: x_small w_big + x_big w_small + x_big w_big.
///
/// xmap: x (N, Cin, H, W) as stage 17's 5-D tensor map (w, h, ci within the group, group, n), box
/// (a.box_cols, a.box_rows, 8, 1, 1). Step s = (tile, chunk of 8 input channels); slot s % a.ring
/// of the ring holds its
///   weights [part][tap][khalf][128 co][4 ci] fp32, part 0 big, part 1 small (one bulk copy);
///   x box   [8 ci][box_rows][box_cols] fp32 unrounded, stage 17's box (one tensor copy).
/// full[slot] completes when both have landed (one arrival with the step's transaction bytes);
/// empty[slot] when the 8 consumer warps have released it (8 arrivals).
template <int KW>
__global__ void __launch_bounds__(kWsThreads, 1)
    conv_pool_three_tf32_warp_specialized(const __grid_constant__ CUtensorMap xmap, TwsArgs a) {
  extern __shared__ __align__(1024) float smem[];
  __shared__ float warp_pool[kWsConsumerWarps][kWgCo];  // [8 consumer warps][128 co]: the pool's sums
  __shared__ __align__(8) uint64_t full[kTwsMaxRing];   // the slot's box and both weight parts have landed
  __shared__ __align__(8) uint64_t empty[kTwsMaxRing];  // every consumer warp is done with the slot
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, role = warp / 4;  // role 0 produces
  const BlockCoords bc = block_coords(a.g);
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int chunks = (p.in_per_group + kCiChunk - 1) / kCiChunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int ring = a.ring;
  const int weight_part = taps * 2 * kWgCo * 4;          // one part of a step's weights, floats
  const int weight_floats = kTwsParts * weight_part;     // both parts: [part][tap][khalf][128][4]
  const int plane = a.box_rows * a.box_cols;             // one channel of the box, floats
  const int box_floats = kCiChunk * plane;               // [8 ci][box_rows][box_cols]
  float* wring = smem;                                   // [ring][weight_floats]
  float* xring = wring + ring * weight_floats;           // [ring][box_floats]

  if (tid == 0) {
    for (int i = 0; i < ring; ++i) {
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
      prefetch_tensor_map(&xmap);
      const float* const wt_block =
          &a.wt[int64_t(bc.group * chunks * a.g.co_tiles_per_group + bc.co_base / kWgCo) * weight_floats];
      const uint32_t step_bytes = uint32_t((weight_floats + box_floats) * 4);  // what lands per step
      int slot = 0;
      uint32_t phase = 0;  // (s / ring) & 1: the use of the slot, counted as the consumers count it
      for (int s = 0; s < steps; ++s) {
        // The slot's previous use, step s - ring, completed phase `phase ^ 1` of empty[slot].
        if (s >= ring) mbar_wait(&empty[slot], phase ^ 1);
        const int tile = tile_begin + s / chunks, chunk = s % chunks;
        const int th = tile / a.tiles_w, tw = tile - a.tiles_w * th;
        const int ih0 = th * kOutRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
        const int iw0 = tw * kOutCols + p.padding_w - (KW - 1) - a.box_shift;  // a multiple of 4: 16 bytes
        mbar_arrive_expect_tx(&full[slot], step_bytes);
        tma_load_5d(xring + slot * box_floats, &xmap, iw0, ih0, chunk * kCiChunk, bc.group, int(bc.n), &full[slot]);
        bulk_copy(wring + slot * weight_floats, wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats,
                  uint32_t(weight_floats * 4), &full[slot]);  // both parts: one contiguous block
        if (++slot == ring) slot = 0, phase ^= 1;
      }
    }
  } else {
    // ---- consumer warpgroups: 232 registers; wait FULL, split A, 3 wgmma, release EMPTY -----
    setmaxnreg_inc<kWsConsumerRegs>();
    const int cwarp = warp - 4, cwg = cwarp / 4, q = cwarp % 4;  // consumer warpgroup, warp in it
    const int g = lane / 4, t = lane % 4;
    const int co_count = min(kWgCo, p.out_per_group - bc.co_base);
    // This thread's A element (pixel 16q + g, channel t) of output row 2*cwg of the patch, tap (kH-1, KW-1).
    const int a_base = t * plane + (kWgRows * cwg) * a.box_cols + a.box_shift + 16 * q + g;
    const uint32_t b_lbo = kWgCo * 16;                     // B: the second k-half, 2,048 bytes on; SBO 128
    const uint32_t b_small = uint32_t(weight_part * 4);    // B: the small part, one part's bytes on

    float acc[kWgRows][64];  // read by the wgmma's "+f" operands; a tile's first wgmma ignores them (scale-d 0)
#pragma unroll
    for (int r = 0; r < kWgRows; ++r)
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[r][i] = 0.0f;
    float pool[16][2] = {};
    // One big and one small A fragment per m64 row [row][4 registers] (TF32 bits): row r's three
    // wgmma read abig[r] and asmall[r] until the wait after the other row's commit.
    uint32_t abig[kWgRows][4], asmall[kWgRows][4];
    int owed = -1;  // a slot whose wgmma may still run: released after the next wait
    int slot = 0;
    uint32_t phase = 0;  // (step / ring) & 1

    for (int tile = tile_begin; tile < tile_end; ++tile) {
      for (int c = 0; c < chunks; ++c) {
        mbar_wait(&full[slot], phase);  // the box and both weight parts of this step
        const float* xs = xring + slot * box_floats + a_base;
        const uint32_t ws = smem_addr(wring + slot * weight_floats);
        for (int kh = 0; kh < p.kernel_h; ++kh) {
          const float* xrow = xs + (p.kernel_h - 1 - kh) * p.dilation_h * a.box_cols;
#pragma unroll
          for (int kw = 0; kw < KW; ++kw) {
            // B descriptors of tap (kh, kw): the big part, and the small one a part's bytes on.
            const uint32_t b_tap = ws + uint32_t((kh * KW + kw) * 2 * kWgCo * 16);
            const uint64_t bd_big = wgmma_desc(b_tap, b_lbo, 128);
            const uint64_t bd_small = wgmma_desc(b_tap + b_small, b_lbo, 128);
#pragma unroll
            for (int r = 0; r < kWgRows; ++r) {
              // draft solution region: begin
              // draft stub: if (c == 0 && tile == tile_begin && kh == 0 && kw == 0 && r == 0)
              // draft stub:   ladder_todo("18.1", "consumer: split A (big, small), 3 wgmma small first, commit, wait 1, release");
              // draft stub: ladder_unused(xrow, bd_big, bd_small, abig, asmall, owed);
              // abig[r] and asmall[r] were last read by row r's group of the previous tap:
              // complete, since the wait<1> after the other row's commit covered it.
              const float* src = xrow + r * a.box_cols + (KW - 1 - kw);
              const float v[4] = {src[0],               // (pixel g,     channel t)
                                  src[8],               // (pixel g + 8, channel t)
                                  src[4 * plane],       // (pixel g,     channel t + 4)
                                  src[4 * plane + 8]};  // (pixel g + 8, channel t + 4)
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                abig[r][i] = tf32_bits(v[i]);                                 // cvt.rna: wgmma truncates
                asmall[r][i] = tf32_bits(v[i] - __uint_as_float(abig[r][i]));  // the bits TF32 dropped
              }
              wgmma_fence();  // the fragments' register writes before the wgmma that read them
              // The small products first (their sums are the smallest); only the first may start a tile.
              wgmma_m64n128k8_rs(acc[r], asmall[r], bd_big, c > 0 || kh > 0 || kw > 0);
              wgmma_m64n128k8_rs(acc[r], abig[r], bd_small, true);
              wgmma_m64n128k8_rs(acc[r], abig[r], bd_big, true);
              wgmma_commit();   // the three as one group
              wgmma_wait<1>();  // every group but this one is done: the other row's fragments are free
              if (owed >= 0) {  // the previous step's last group is done: its slot goes back
                __syncwarp();
                if (lane == 0) mbar_arrive(empty + owed);
                owed = -1;
              }
              // draft solution region: end
            }
          }
        }
        owed = slot;  // this step's last group may still be reading the slot's weights
        if (++slot == ring) slot = 0, phase ^= 1;
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

// ---- stage 18 kernels: end -----------------------------------------------------------------

/// What the host half (lib/three_tf32_ws_host.cuh: plan, workspace, tensor map, launches) takes
/// from this stage.
struct TwsRung {
  template <int KW>
  static auto kernel() { return conv_pool_three_tf32_warp_specialized<KW>; }
  static auto weight_layout() { return tf32_split_weight_kmajor; }
};
using Host = TwsHost<TwsRung>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // probe, plan, workspace, opt-in, tensor map, launches; tensor cores, deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "3xTF32 on the warp-specialized kernel: A split in registers, B's parts by bulk copy, three wgmma";
  d.precision = Precision::Fp32;  // the split recovers FP32 accuracy: held to the FP32 bound
}

}  // namespace ladder
