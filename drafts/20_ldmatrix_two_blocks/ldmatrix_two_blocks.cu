// Stage 20 (draft, rung d of issue 39): stage 14's multistage mma.sync kernel with two changes,
// both aimed at the instructions around the mma that stage 14's profile found binding
// (math_pipe_throttle the largest stall after wait; no bank conflicts; L2 at 18%):
//  - the B (weight) fragments come from shared memory by ldmatrix.x4: one instruction gives a
//    lane the (b0, b1) pairs of two n8 tiles (stage 14: one LDS.64 per n8 tile). For that the
//    weights' shared image keeps each tap's 8 input channels as two k halves of 4, each 16 bytes
//    per output channel ([tap][k half][co][4], natural channel order; stage 14's interleaved
//    slot order 0 4 1 5 2 6 3 7 goes). The A fragments stay on 4-byte LDS from the planes:
//    ldmatrix cannot read them there (the README says why);
//  - two blocks per SM: a warp tile of 64 pixels x 32 channels (MidTile, block 64 channels) in at
//    most 128 registers (__launch_bounds__(256, 2)), and a pipeline depth the plan sizes so that
//    two blocks' stages fit in one SM's shared memory. Four warps per scheduler instead of two.
// Everything else is stage 14's: the cp.async pipeline, the planes, the rounding in registers, the
// A rows shared by the three kernel rows, the pool, the partials.
// This file holds the stage's kernels; the tile is lib/mma_pipeline.cuh (stage 14's), the host
// half (plan, workspace, launches) the draft's lib/ldsm_pipeline_host.cuh, the ldmatrix wrapper
// the draft's lib/ldmatrix.cuh.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/fused_partials.cuh"
#include "lib/mma_pipeline.cuh"  // the tile shapes, the arguments, 16-byte zero-filling cp.async
#include "lib/ldmatrix.cuh"  // ldmatrix_x4 (draft lib)
#include "lib/ldsm_pipeline_host.cuh"  // LdsmPipelineHost: the host half (draft lib), MidTile
#include "lib/register_stage.hpp"
#include "todo.cuh"

namespace ladder {
namespace {

// ---- stage 20 kernels: begin ---------------------------------------------------------------

/// The weights as the kernel's shared memory wants them, rounded to TF32 (cvt.rna), written once
/// per run: wt[group][chunk][co_tile][tap][khalf 2][co_per_tile channels][4], element q of k half
/// h of channel co holding tf32(weight[group*Cin/g + chunk*8 + 4*h + q, co_tile*co_per_tile + co,
/// tap]), zero past the group's channels. So the 4 input channels of one k half of one output
/// channel are one 16-byte row, and the rows of 8 consecutive output channels are 128
/// contiguous bytes: one 8x8 b16 matrix of ldmatrix (stage 14: [tap][co][8 slots] in the order
/// 0 4 1 5 2 6 3 7, for 8-byte loads). weight (Cin, Cout/g, kH, kW) fp32; one thread per wt element.
__global__ void tf32_weight_khalves(ConvParams p, const float* weight, float* wt, int chunks, int co_tiles,
                                    int co_per_tile, int64_t total) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int taps = p.kernel_h * p.kernel_w;
  constexpr int kHalf = kCiChunk / 2;  // 4 channels: one 16-byte ldmatrix row
  const int q = int(e % kHalf), co = int(e / kHalf % co_per_tile);
  int64_t rest = e / (kHalf * co_per_tile);
  const int half = int(rest % 2);
  rest /= 2;
  const int tap = int(rest % taps);
  rest /= taps;
  const int co_tile = int(rest % co_tiles);
  rest /= co_tiles;
  const int chunk = int(rest % chunks), group = int(rest / chunks);
  const int cl = kHalf * half + q;  // natural order: no slot interleave
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
///   weights [kh*KW taps][2 k halves][kCoTile channels][4]  (a block of wt: TF32 already).
/// Copy roles: warp w copies channel w of the chunk; lane l its rows l / 8, + 4, ... and vector
/// column l % 8 (if < a.vec_cols). A of m16 tile i under tap (kh, kw), fragment row g (pixel
/// (rr, g), rr = kMTiles*wm + i) and k column t (channel t): the patch at channel t, row
/// rr + (kernel_h-1-kh)*dh, column shift + g + KW-1-kw; a1 is 8 pixels on, a2 and a3 channel
/// t + 4. Lanes (g, t) read words t*plane + g + const: with plane = 8 mod 32, 32 banks.
/// B of n8 tiles 2jp and 2jp + 1 under a tap: one ldmatrix.x4 (load_b says which lane gets what).
/// At most 128 registers per thread, so that two blocks of 256 threads fit an SM's 64K registers.
template <int KW, int KH, class Shape>
__global__ void __launch_bounds__(kThreads, 2) conv_pool_multistage_ldsm(PipelineArgs a) {
  extern __shared__ __align__(16) float smem[];
  __shared__ float warp_pool[Shape::kWarpsM][Shape::kCoTile];
  constexpr int kMT = Shape::kMTiles, kNT = Shape::kNTiles, kCo = Shape::kCoTile;
  static_assert(kNT % 2 == 0, "one ldmatrix.x4 loads the B fragments of two n8 tiles");
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
    // draft solution region: begin
    // draft stub: if (step == 0) ladder_todo("20.1", "load_step: this thread's pieces of step `step`'s x patch");
    // draft stub: ladder_unused(xs, th, tw, copies_x, xs_role, x_n, in_plane, ci_group);
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
    // draft solution region: end
    const float* w_src = wt_block + int64_t(chunk) * a.g.co_tiles_per_group * weight_floats;
    float* ws = xs + x_floats;
    for (int q = tid * 4; q < weight_floats; q += kThreads * 4) cp_async_16(ws + q, w_src + q);
  };

  // Fragment loads of tap (kh, kw) from buffer xs (weights at ws). a_lane: this lane's A word of
  // tap (kernel_h-1, KW-1), m16 tile 0 (patch row kMT*wm, column shift + g, channel t).
  const int a_lane = t * a.plane + kMT * wm * a.pitch + a.shift + g;
  // ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8. Matrix m of n8 tile pair
  // jp holds k half m % 2 of the 8 channels of n8 tile 2jp + m / 2: row r = output channel
  // wn*kNT*8 + 8*(2jp + m/2) + r, its 16 bytes = input channels 4*(m%2) .. +3 (the weight image's
  // [k half][co][4]). b_lane is that row's word for jp = 0, tap 0; the tap adds kCo*kCiChunk,
  // the pair jp adds 16 channels = 64 words.
  constexpr int kHalf = kCiChunk / 2;  // 4 input channels: one 16-byte ldmatrix row
  const int b_lane = (lane / 8 % 2) * kCo * kHalf + (wn * kNT * 8 + 8 * (lane / 16) + lane % 8) * kHalf;
  const int plane4 = 4 * a.plane;
  float acc[kMT][kNT][4] = {};
  // draft solution region: begin
  // draft stub: ladder_todo("20.2", "load_a, load_b: a tap's A and B fragments, rounded to TF32");
  // draft stub: auto load_a = [&](const float* xs, int row, int kw,
  // draft stub:                   uint2& lo, uint2& hi) { ladder_unused(xs, row, kw, lo, hi, a_lane, plane4); };
  // draft stub: auto load_b = [&](const float* ws, int kh, int kw,
  // draft stub:                   uint2 (&b)[kNT]) { ladder_unused(ws, kh, kw, b, b_lane); };
  // The A fragment of one m16 tile: patch row `row` below the warp's first, tap column kw, the
  // values rounded to TF32 (cvt.rna) once, as they leave shared memory. lo = (a0, a2): (row g,
  // k t), (row g, k t+4); hi = (a1, a3): the same 8 pixels on.
  auto load_a = [&](const float* xs, int row, int kw, uint2& lo, uint2& hi) {
    const float* ap = xs + a_lane + row * a.pitch + (KW - 1 - kw);
    lo = uint2{tf32_bits(ap[0]), tf32_bits(ap[plane4])};
    hi = uint2{tf32_bits(ap[8]), tf32_bits(ap[plane4 + 8])};
  };
  // The B fragments of tap (kh, kw): one ldmatrix.x4 per pair of n8 tiles (TF32 already).
  // ldmatrix moves 16-bit elements, but a lane receives elements 2*(l%4) and 2*(l%4)+1 of row
  // l/4 of each matrix as one 32-bit register, in memory order: 32-bit word l%4 of the row,
  // bit for bit. Lane (g, t) therefore gets word t of row g of each matrix:
  //   r.x: matrix 0 = (tile 2jp,   k half 0): channel t   of output channel g -> b0 of tile 2jp
  //   r.y: matrix 1 = (tile 2jp,   k half 1): channel t+4 of output channel g -> b1 of tile 2jp
  //   r.z: matrix 2 = (tile 2jp+1, k half 0): channel t                      -> b0 of tile 2jp+1
  //   r.w: matrix 3 = (tile 2jp+1, k half 1): channel t+4                    -> b1 of tile 2jp+1
  // which is the m16n8k8 TF32 B fragment: b0 = B[k = t][n = g], b1 = B[k = t+4][n = g]. Each
  // matrix is 8 rows x 16 bytes = 128 contiguous bytes: 32 banks, one wavefront, 4 per load.
  auto load_b = [&](const float* ws, int kh, int kw, uint2 (&b)[kNT]) {
    const float* bp = ws + (kh * KW + kw) * kCo * kCiChunk + b_lane;
#pragma unroll
    for (int jp = 0; jp < kNT / 2; ++jp) {
      const uint4 r = ldmatrix_x4(bp + jp * 16 * kHalf);
      b[2 * jp] = uint2{r.x, r.y};
      b[2 * jp + 1] = uint2{r.z, r.w};
    }
  };
  // draft solution region: end
  // One step's taps. Tap (kh, kw) of m16 tile i reads patch row i + (kernel_h-1-kh)*dh.
  auto step_mma = [&](const float* xs, const float* ws) {
    if constexpr (KH > 0) {
      // The unrolled 3x3 instance (dilation 1): per tap column kw the warp's kMT + KH - 1 patch
      // rows are loaded and rounded once and shared by the KH taps that read them.
      // stage 20: the kernel columns are a loop, not unrolled (stage 14 unrolls them). Unrolled,
      // ptxas loads the next column's 6 A rows under this column's mma, 24 more live registers,
      // and under the 128 of two blocks per SM it spilled (56 bytes of stack; nvcc 13.0.88,
      // sm_90). As a loop the instance takes 122 registers and no local memory; the latency of
      // a column's first loads is left to the other warps of the scheduler (4 now, 2 in stage 14).
#pragma unroll 1
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

  // draft solution region: begin
  // draft stub: ladder_todo("20.3", "the prologue: steps 0 .. a.stages - 2 into their buffers, one commit each");
  // draft stub: ladder_unused(load_step, taps);
  for (int s = 0; s < a.stages - 1; ++s) {
    if (s < steps) load_step(s, s);
    cp_async_commit();
  }
  int read_buf = 0, write_buf = a.stages - 1;
  // draft solution region: end
  for (int step = 0; step < steps; ++step) {
    // draft solution region: begin
    // draft stub: if (step == 0) ladder_todo("20.4", "one step: wait, barrier, enqueue, commit, step_mma");
    // draft stub: ladder_unused(load_step, step_mma);
    cp_async_wait_dynamic(a.stages - 2);  // this thread's copies of `step` have landed
    __syncthreads();  // ... everyone's; and every warp is done with the buffer refilled next
    if (step + a.stages - 1 < steps) load_step(step + a.stages - 1, write_buf);
    cp_async_commit();
    write_buf = write_buf + 1 == a.stages ? 0 : write_buf + 1;

    const float* xs = smem + read_buf * stage_floats;
    const float* ws = xs + x_floats;
    read_buf = read_buf + 1 == a.stages ? 0 : read_buf + 1;
    step_mma(xs, ws);
    // draft solution region: end

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

// ---- stage 20 kernels: end -----------------------------------------------------------------

/// What the host half (lib/mma_pipeline_host.cuh: plan, workspace, opt-in, launches) takes
/// from this stage.
struct LdsmRung {
  template <int KW, int KH, class Shape>
  static auto kernel() { return conv_pool_multistage_ldsm<KW, KH, Shape>; }
  static auto weight_layout() { return tf32_weight_khalves; }
};
using Host = LdsmPipelineHost<LdsmRung>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // plan, workspace, opt-in, launches, device note; tensor cores, deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};
  d.idea = "stage 14 with ldmatrix.x4 for the weight fragments and two blocks per SM (warp tile 64x32)";
  d.precision = Precision::Tf32;  // inputs rounded to 10 mantissa bits: the TF32 bound
}

}  // namespace ladder
