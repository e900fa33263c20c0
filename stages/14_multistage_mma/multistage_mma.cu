// Stage 14: the mma.sync kernel completed, as CUTLASS 2.x builds its sm_80 GEMMs. Stage 10's
// implicit GEMM (16x16 output pixels per block, k = (tap, 8 input channels), the pool taken from
// the accumulator fragments), with the data path rebuilt so the tensor cores wait less:
//  - a multistage pipeline: up to 4 stages of cp.async in flight and one barrier per step
//    (stage 10: two buffers and two barriers);
//  - the x patch kept in x's own layout, one plane per channel with 16-byte aligned rows, so a
//    thread copies 16 bytes at a time, with the row and column masks it needs computed once per
//    tile from its fixed role (stage 10: 4-byte copies into an interleaved patch);
//  - A fragments rounded to TF32 in registers after their shared loads, which needs no second
//    pass over shared memory and no barrier for it; the plane pitch (8 mod 32 floats) makes the
//    4-byte fragment loads conflict-free;
//  - for the 3x3 kernel (dilation 1) the taps unrolled so that the A row three taps share is
//    loaded and rounded once, and the next taps' loads are scheduled under this tap's mma;
//  - a warp tile the plan picks from the channel counts: 64x64 (128 channels per block), or 32x32
//    (32 channels) where a group has at most 32 output channels.
// Every other ConvTranspose2d parameter set, and GPUs below sm_80, take the general FP32 path.
// This file holds the stage's kernels; the tile is lib/mma_pipeline.cuh and the host half (plan,
// workspace, launches) lib/mma_pipeline_host.cuh.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/fused_partials.cuh"
#include "lib/mma_pipeline.cuh"  // the tile shapes, the arguments, 16-byte zero-filling cp.async
#include "lib/mma_pipeline_host.cuh"  // MmaPipelineHost: the host half
#include "lib/register_stage.hpp"
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 14 kernels: begin ---------------------------------------------------------------

/// The weights as the kernel's shared memory wants them, rounded to TF32 (cvt.rna), written once
/// per run: wt[group][chunk][co_tile][tap][co_per_tile channels][8 slots], slot channel_slot(cl)
/// of channel co holding tf32(weight[group*Cin/g + chunk*8 + cl, co_tile*co_per_tile + co, tap]),
/// zero past the group's channels. weight (Cin, Cout/g, kH, kW) fp32; one thread per wt element.
__global__ void tf32_weight_tiles(ConvParams p, const float* weight, float* wt, int chunks, int co_tiles,
                                  int co_per_tile, int64_t total) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int taps = p.kernel_h * p.kernel_w;
  const int slot = int(e % kCiChunk), co = int(e / kCiChunk % co_per_tile);
  int64_t rest = e / (kCiChunk * co_per_tile);
  const int tap = int(rest % taps);
  rest /= taps;
  const int co_tile = int(rest % co_tiles);
  rest /= co_tiles;
  const int chunk = int(rest % chunks), group = int(rest / chunks);
  const int cl = slot / 2 + 4 * (slot % 2);  // channel_slot's inverse
  const int ci = chunk * kCiChunk + cl, co_g = co_tile * co_per_tile + co;
  float v = 0.0f;
  if (ci < p.in_per_group && co_g < p.out_per_group)
    v = weight[(int64_t(group * p.in_per_group + ci) * p.out_per_group + co_g) * taps + tap];
  wt[e] = __uint_as_float(tf32_bits(v));
}

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of 16x16 tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's Shape::kCoTile
/// channels. Stride (1, 1), dilation_w 1, kernel_w == KW (1..5); kernel_h == KH and dilation_h 1
/// when KH > 0 (the unrolled 3x3 instance), else any kernel_h and dilation_h; any
/// padding, output_padding, groups, sizes; sm_80+. As in stage 10,
///   out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[ci, co, kh, kw].
///
/// Pipeline step s is (tile s / chunks, chunk s % chunks); a.stages buffers of shared memory:
///   x patch [8 channels][a.plane floats: patch_rows rows of a.pitch columns],
///           column c = input column iw_al + c, iw_al = first patch column - a.shift (16-byte aligned);
///   weights [kh*KW taps][kCoTile channels][8 slots]  (a block of wt: TF32 already).
/// Copy roles: warp w copies channel w of the chunk; lane l its rows l / 8, + 4, ... and vector
/// column l % 8 (if < a.vec_cols). A of m16 tile i under tap (kh, kw), fragment row g (pixel
/// (rr, g), rr = kMTiles*wm + i) and k column t (channel t): the patch at channel t, row
/// rr + (kernel_h-1-kh)*dh, column shift + g + KW-1-kw; a1 is 8 pixels on, a2 and a3 channel
/// t + 4. Lanes (g, t) read words t*plane + g + const: with plane = 8 mod 32, 32 banks.
template <int KW, int KH, class Shape>
__global__ void __launch_bounds__(kThreads, 1) conv_pool_multistage(PipelineArgs a) {
  extern __shared__ __align__(16) float smem[];
  __shared__ float warp_pool[Shape::kWarpsM][Shape::kCoTile];
  constexpr int kMT = Shape::kMTiles, kNT = Shape::kNTiles, kCo = Shape::kCoTile;
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp % Shape::kWarpsM, wn = warp / Shape::kWarpsM;
  const int g = lane / 4, t = lane % 4;
  const BlockCoords bc = block_coords(a.g);
  const int co_count = min(kCo, p.out_per_group - bc.co_base);
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int ci_group = bc.group * p.in_per_group;
  const int chunks = (p.in_per_group + kCiChunk - 1) / kCiChunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int x_floats = kCiChunk * a.plane;
  const int weight_floats = taps * kCo * kCiChunk;
  const int stage_floats = x_floats + weight_floats;
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const float* x_n = a.x + bc.n * p.in_channels * in_plane;
  const float* wt_block = a.wt + int64_t(bc.group * chunks * a.g.co_tiles_per_group + bc.co_base / kCo) * weight_floats;

  // This thread's copy role, fixed for the whole kernel: channel `warp` of each chunk, vector
  // column vcol, rows row0, row0 + 4, ...; its shared destinations are xs_role + 4*pitch*r.
  const int vcol = lane % 8, row0 = lane / 8;
  const bool copies_x = vcol < a.vec_cols;
  const int xs_role = warp * a.plane + row0 * a.pitch + vcol * 4;

  auto load_step = [&](int step, int buf) {
    float* xs = smem + buf * stage_floats;
    const int tile = tile_begin + step / chunks, chunk = step - (step / chunks) * chunks;
    const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("14.1", "load_step: this thread's pieces of step `step`'s x patch");
    // STUB: ladder_unused(xs, th, tw, copies_x, xs_role, x_n, in_plane, ci_group);
    if (copies_x) {
      const int ih0 = th * kTileRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
      const int iw = tw * kTileCols + p.padding_w - (KW - 1) - a.shift + 4 * vcol;  // this thread's column
      const int ci = chunk * kCiChunk + warp;
      const bool col_ok = ci < p.in_per_group && iw >= 0 && iw < p.in_w;  // the mask of the whole step
      const float* src = x_n + (col_ok ? int64_t(ci_group + ci) * in_plane + iw : 0);
      for (int r = row0; r < a.patch_rows; r += kCopyRowsPerPass) {
        const int ih = ih0 + r;
        const bool ok = col_ok && ih >= 0 && ih < p.in_h;
        float* dst = xs + xs_role + (r - row0) * a.pitch;
        if (a.vec16) {
          cp_async_16_or_zero(dst, ok ? src + int64_t(ih) * p.in_w : a.x, ok);
        } else {  // unaligned rows: four 4-byte copies, each with its own column mask
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const bool ok_e = ci < p.in_per_group && ih >= 0 && ih < p.in_h && iw + e >= 0 && iw + e < p.in_w;
            cp_async_f32(dst + e, ok_e ? x_n + int64_t(ci_group + ci) * in_plane + int64_t(ih) * p.in_w + iw + e : a.x,
                         ok_e);
          }
        }
      }
    }
    // END SOLUTION
    const float* w_src = wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats;
    float* ws = xs + x_floats;
    for (int q = tid * 4; q < weight_floats; q += kThreads * 4) cp_async_16(ws + q, w_src + q);
  };

  // Fragment loads of tap (kh, kw) from buffer xs (weights at ws). a_lane: this lane's A word of
  // tap (kernel_h-1, KW-1), m16 tile 0 (patch row kMT*wm, column shift + g, channel t).
  const int a_lane = t * a.plane + kMT * wm * a.pitch + a.shift + g;
  const int b_lane = (wn * kNT * 8 + g) * kCiChunk + 2 * t;
  const int plane4 = 4 * a.plane;
  float acc[kMT][kNT][4] = {};
  // BEGIN SOLUTION
  // STUB: ladder_todo("14.2", "load_a, load_b: a tap's A and B fragments, rounded to TF32");
  // STUB: auto load_a = [&](const float* xs, int row, int kw,
  // STUB:                   uint2& lo, uint2& hi) { ladder_unused(xs, row, kw, lo, hi, a_lane, plane4); };
  // STUB: auto load_b = [&](const float* ws, int kh, int kw,
  // STUB:                   uint2 (&b)[kNT]) { ladder_unused(ws, kh, kw, b, b_lane); };
  // The A fragment of one m16 tile: patch row `row` below the warp's first, tap column kw, the
  // values rounded to TF32 (cvt.rna) once, as they leave shared memory. lo = (a0, a2): (row g,
  // k t), (row g, k t+4); hi = (a1, a3): the same 8 pixels on.
  auto load_a = [&](const float* xs, int row, int kw, uint2& lo, uint2& hi) {
    const float* ap = xs + a_lane + row * a.pitch + (KW - 1 - kw);
    lo = uint2{tf32_bits(ap[0]), tf32_bits(ap[plane4])};
    hi = uint2{tf32_bits(ap[8]), tf32_bits(ap[plane4 + 8])};
  };
  // The B fragments of tap (kh, kw): one 8-byte load per n8 tile (TF32 already).
  auto load_b = [&](const float* ws, int kh, int kw, uint2 (&b)[kNT]) {
    const float* bp = ws + (kh * KW + kw) * kCo * kCiChunk + b_lane;
#pragma unroll
    for (int j = 0; j < kNT; ++j) b[j] = *reinterpret_cast<const uint2*>(bp + 8 * j * kCiChunk);
  };
  // END SOLUTION
  // One step's taps. Tap (kh, kw) of m16 tile i reads patch row i + (kernel_h-1-kh)*dh.
  auto step_mma = [&](const float* xs, const float* ws) {
    if constexpr (KH > 0) {
      // The unrolled 3x3 instance (dilation 1): per tap column kw the warp's kMT + KH - 1 patch
      // rows are loaded and rounded once and shared by the KH taps that read them.
#pragma unroll
      for (int kw = 0; kw < KW; ++kw) {
        uint2 lo[kMT + KH - 1], hi[kMT + KH - 1];
#pragma unroll
        for (int r = 0; r < kMT + KH - 1; ++r) load_a(xs, r, kw, lo[r], hi[r]);
#pragma unroll
        for (int kh = 0; kh < KH; ++kh) {
          uint2 b[kNT];
          load_b(ws, kh, kw, b);
#pragma unroll
          for (int i = 0; i < kMT; ++i)
#pragma unroll
            for (int j = 0; j < kNT; ++j) mma_tf32(acc[i][j], lo[i + KH - 1 - kh], hi[i + KH - 1 - kh], b[j]);
        }
      }
    } else {
      for (int kh = 0; kh < p.kernel_h; ++kh) {
        const int row_shift = (p.kernel_h - 1 - kh) * p.dilation_h;
#pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
          uint2 b[kNT];
          load_b(ws, kh, kw, b);
#pragma unroll
          for (int i = 0; i < kMT; ++i) {
            uint2 lo, hi;
            load_a(xs, i + row_shift, kw, lo, hi);
#pragma unroll
            for (int j = 0; j < kNT; ++j) mma_tf32(acc[i][j], lo, hi, b[j]);
          }
        }
      }
    }
  };

  float pool[kNT][2] = {};  // columns 2t, 2t+1 of each n8 tile, summed over the thread's rows

  // BEGIN SOLUTION
  // STUB: ladder_todo("14.3", "the prologue: steps 0 .. a.stages - 2 into their buffers, one commit each");
  // STUB: ladder_unused(load_step, taps);
  for (int s = 0; s < a.stages - 1; ++s) {
    if (s < steps) load_step(s, s);
    cp_async_commit();
  }
  int read_buf = 0, write_buf = a.stages - 1;
  // END SOLUTION
  for (int step = 0; step < steps; ++step) {
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("14.4", "one step: wait, barrier, enqueue, commit, step_mma");
    // STUB: ladder_unused(load_step, step_mma);
    cp_async_wait_dynamic(a.stages - 2);  // this thread's copies of `step` have landed
    __syncthreads();  // ... everyone's; and every warp is done with the buffer refilled next
    if (step + a.stages - 1 < steps) load_step(step + a.stages - 1, write_buf);
    cp_async_commit();
    write_buf = write_buf + 1 == a.stages ? 0 : write_buf + 1;

    const float* xs = smem + read_buf * stage_floats;
    const float* ws = xs + x_floats;
    read_buf = read_buf + 1 == a.stages ? 0 : read_buf + 1;
    step_mma(xs, ws);
    // END SOLUTION

    if (step % chunks == chunks - 1) {  // the tile is complete: pool its in-range pixels
      const int tile = tile_begin + step / chunks;
      const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
      const int ow_lo = tw * kTileCols + g, ow_hi = ow_lo + 8;
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
        const int oh = th * kTileRows + kMT * wm + i;
        const bool in_lo = oh < p.out_h && ow_lo < p.out_w, in_hi = oh < p.out_h && ow_hi < p.out_w;
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
          pool[j][0] += (in_lo ? acc[i][j][0] : 0.0f) + (in_hi ? acc[i][j][2] : 0.0f);
          pool[j][1] += (in_lo ? acc[i][j][1] : 0.0f) + (in_hi ? acc[i][j][3] : 0.0f);
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
        }
      }
    }
  }
  cp_async_wait<0>();  // no copy may land after the block exits (the trailing groups are empty)

  // Channel sums: over the 8 row groups g of the warp (xor 4, 8, 16), then over the M-warps that
  // share the channels, in a fixed order through shared memory.
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int s = 4; s < 32; s *= 2) pool[nt][e] += __shfl_xor_sync(0xffffffffu, pool[nt][e], s);
  if (g == 0)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) warp_pool[wm][wn * kNT * 8 + 8 * nt + 2 * t + e] = pool[nt][e];
  __syncthreads();
  if (tid < co_count) {
    float s = 0.0f;
#pragma unroll
    for (int m = 0; m < Shape::kWarpsM; ++m) s += warp_pool[m][tid];
    *partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels, bc.group * p.out_per_group + bc.co_base + tid) = s;
  }
}

// ---- stage 14 kernels: end -----------------------------------------------------------------

/// What the host half (lib/mma_pipeline_host.cuh: plan, workspace, opt-in, launches) takes
/// from this stage.
struct MultistageRung {
  template <int KW, int KH, class Shape>
  static auto kernel() { return conv_pool_multistage<KW, KH, Shape>; }
  static auto weight_layout() { return tf32_weight_tiles; }
};
using Host = MmaPipelineHost<MultistageRung>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // plan, workspace, opt-in, launches, device note; tensor cores, deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "the complete mma.sync kernel: a 4-stage cp.async pipeline, 16-byte copies, the plan's warp tile";
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
