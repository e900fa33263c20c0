// Stage 09: asynchronous copies with double buffering. Stage 08's register-tiled kernel, with
// its shared-memory fill changed, and nothing else:
//  - conv+pool: the copies global -> shared are cp.async (sm_80+): they go straight to shared
//               memory without passing through registers, and the thread does not wait for them;
//               two buffers, so the copies of the next (tile, input-channel chunk) step are in
//               flight while the current one is computed (stage 08 loads, waits at a barrier,
//               computes, and only then loads again); the zero padding comes from cp.async's
//               zero-fill form. Every other ConvTranspose2d parameter set: the general path
//               (lib/conv_pool_general.cuh), as in stages 07 and 08;
//  - finish:    partials summed in a fixed order, mean, conv bias, log-sum-exp
//               (lib/fused_partials.cuh).
// Below sm_80 (T4, RTX 20xx) there is no cp.async: the helpers compile to plain copies, the
// kernel is stage 08's with two buffers and no overlap, and the stage says so (device_note).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/cp_async.cuh"  // cp_async_f32, cp_async_commit, cp_async_wait
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"  // ceil_div, with_kernel_width
#include "lib/register_stage.hpp"
#include "lib/tiled_fp32_host.cuh"  // TiledFp32Host: the host half
#include "todo.cuh"
#include "lib/warp_reduce.cuh"

namespace ladder {
namespace {

// ---- stage 09 kernels: begin ---------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Geometry (stage 08's). A warp owns a 16x16 output tile for 8 output channels: lane l computes
// row l % 16, columns 8*(l / 16) .. +7 (kPix consecutive pixels) for the warp's 8 channels
// (kCo): 64 accumulators. The 8 warps of a block share the pixels and split 64 channels.
constexpr int kTileRows = 16;
constexpr int kTileCols = 16;
constexpr int kPix = 8;                      // output pixels per thread (one row segment)
constexpr int kCo = 8;                       // output channels per thread
constexpr int kCoTile = kWarps * kCo;        // 64 output channels per block
constexpr int kMaxKernelW = 5;
// Shared-memory row pitch of the input patch: 16 columns + kernel_w - 1 halo, padded so every
// thread's 16-byte window loads stay in the row. 20 words = 5 groups of 4 banks, and 5 is odd,
// so rows r = 0..7 start in groups 5r mod 8, all different: the 8 threads of a quarter warp
// (8 consecutive rows, one column group) hit 8 disjoint groups of 4 banks.
constexpr int kPitch = kTileCols + kMaxKernelW - 1;
constexpr int kMaxCiChunk = 8;               // input channels staged per pipeline step
constexpr int kBuffers = 2;                  // double buffering: copy step s+1, compute step s
constexpr int kSmemBudget = 96 * 1024;       // dynamic shared memory per block: 2 blocks per SM
constexpr int64_t kTargetBlocks = 4096;      // about 15 waves of 2 blocks on 132 SMs
static_assert(kThreads % kCoTile == 0 && kThreads >= kPitch, "fixed per-thread copy roles");
static_assert(kTileRows * (kTileCols / kPix) == 32, "one warp covers one tile");

/// The tiled kernel's arguments, by value. x (N, Cin, H, W), weight (Cin, Cout/g, kH, kW),
/// partials (N, g.parts, Cout), fp32. The grid (make_fused_grid): units are the plane's 16x16
/// tiles, kCoTile channels per block.
struct TiledArgs {
  ConvParams p;
  const float* x;
  const float* weight;
  float* partials;
  FusedGrid g;
  int tiles_w;     ///< tiles per row of tiles
  int ci_chunk;    ///< input channels per pipeline step
  int patch_rows;  ///< kTileRows + (kernel_h - 1) * dilation_h
};

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of 16x16 tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's 64 channels.
/// Stride (1, 1), dilation_w 1, kernel_w == KW (1..5); any kernel_h, dilation_h, padding,
/// output_padding, groups, sizes. With stride 1 the gather form is a correlation with the
/// flipped kernel:  out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[kh, kw]
/// (x zero outside the plane), so an output tile needs one input patch with a halo.
///
/// Block: (n, a contiguous range of 16x16 output tiles of the plane, 64 channels of one group).
/// Per tile it walks the group's input channels in chunks of ci_chunk, double-buffered:
///   shared x patch [ci_chunk][patch_rows][20], rows from oh0 + ph - (kh-1)*dh, columns from
///   ow0 + pw - (KW-1), zero where outside the input (cp.async zero fill);
///   shared weights [ci_chunk][kh*KW][64]  (transposed so a thread's 8 channels are 2 float4).
/// Thread: output row r = lane % 16, columns 8t .. 8t+7 with t = lane / 16, channels
/// 8*warp .. +7. For each (ci, kh) it loads its input row window once (8 + KW - 1 values in
/// 16-byte loads) and reuses it for all KW taps: window[m + kk] is x at column (8t + m) + kk,
/// the input of output m under tap kw = KW-1-kk. Per tap: 2 broadcast LDS.128 of weights, then
/// 64 FMAs, so each value read from shared memory feeds 8 FMAs.
/// When a tile's last chunk is done, the thread adds its in-range outputs to 8 running channel
/// sums (pool) and clears the accumulators; at the end each warp reduces pool with shuffles and
/// lane 0 writes the partials. Shared memory: 2 * ci_chunk * (patch_rows*20 + kh*KW*64)
/// floats, sized by the tile and at most 96 KB (2 blocks per SM); 0 bytes of stack.
/// Changed from stage 08: the fill is cp.async into buffer step % 2, issued one step ahead.
template <int KW>
__global__ void __launch_bounds__(kThreads, 2) conv_pool_async_copy(TiledArgs a) {
  extern __shared__ __align__(16) float smem[];
  constexpr int kWindow = (kPix + KW - 1 + 3) / 4 * 4;  // floats per row window, whole float4s
  static_assert(kTileCols - kPix + kWindow <= kPitch, "the last column group's window stays in the row");
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int r = lane % kTileRows, t = lane / kTileRows;
  const BlockCoords bc = block_coords(a.g);
  const int co_count = min(kCoTile, p.out_per_group - bc.co_base);  // valid channels of the tile
  const bool warp_active = warp * kCo < co_count;                    // warp-uniform
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int ci_group = bc.group * p.in_per_group;
  const int chunks = (p.in_per_group + a.ci_chunk - 1) / a.ci_chunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int patch_floats = a.patch_rows * kPitch;
  const int weight_floats = taps * kCoTile;
  const int stage_floats = a.ci_chunk * (patch_floats + weight_floats);
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const float* x_n = a.x + bc.n * p.in_channels * in_plane;
  // The slot is addressed before the loop: a pointer stays in registers across it.
  float* out = partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels,
                            bc.group * p.out_per_group + bc.co_base + warp * kCo);

  // Copy roles, fixed per thread so the copy loops carry no divisions: the x patch is filled
  // kFillRows rows per pass with thread -> (row fill_row0, column fill_col); the weights with
  // thread -> (channel w_co, taps w_tap0, w_tap0 + kTapStep, ...), since kThreads % kCoTile == 0.
  constexpr int kFillRows = kThreads / kPitch;  // 12 rows per pass; the last 16 threads copy no x
  constexpr int kTapStep = kThreads / kCoTile;  // 4
  const int fill_col = tid % kPitch, fill_row0 = tid / kPitch;
  const bool fills_x = fill_row0 < kFillRows;
  const int w_co = tid % kCoTile, w_tap0 = tid / kCoTile;
  const bool w_valid = w_co < co_count;  // channels past the group's end are zero-filled

  // Enqueue the copies of pipeline step `step` (tile step / chunks, chunk step % chunks).
  auto load_step = [&](int step) {
    const int tile = tile_begin + step / chunks, chunk = step % chunks;
    const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
    // BEGIN SOLUTION 07 09
    // STUB: if (step == 0) ladder_todo("09.1", "load_step(step) as cp.async copies into buffer step & 1");
    // STUB: ladder_unused(chunk, th, tw, fill_col, fill_row0, fills_x, w_co, w_tap0, w_valid, int(kTapStep));
    // STUB: ladder_unused(x_n, in_plane, ci_group, patch_floats, weight_floats, stage_floats, taps, smem);
    // STUB: ladder_unused(cp_async_f32);
    const int ih0 = th * kTileRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
    const int iw = tw * kTileCols + p.padding_w - (KW - 1) + fill_col;
    const bool col_inside = fills_x && iw >= 0 && iw < p.in_w;
    const int ci0 = ci_group + chunk * a.ci_chunk;
    const int nci = min(a.ci_chunk, ci_group + p.in_per_group - ci0);
    float* xs = smem + (step & 1) * stage_floats;
    float* ws = xs + a.ci_chunk * patch_floats;
    for (int cl = 0; cl < nci; ++cl) {
      const float* x_c = x_n + int64_t(ci0 + cl) * in_plane;
      float* xs_c = xs + cl * patch_floats + fill_col;
      if (fills_x)
        for (int row = fill_row0; row < a.patch_rows; row += kFillRows) {
          const int ih = ih0 + row;
          const bool inside = col_inside && ih >= 0 && ih < p.in_h;
          cp_async_f32(xs_c + row * kPitch, inside ? x_c + (ih * p.in_w + iw) : a.x, inside);
        }
      // shared [tap][co] <- global [co][tap]: a thread's 8 channels become two float4 reads
      const float* w_c = a.weight + (int64_t(ci0 + cl) * p.out_per_group + bc.co_base + w_co) * taps;
      float* ws_c = ws + cl * weight_floats + w_co;
      for (int tap = w_tap0; tap < taps; tap += kTapStep)
        cp_async_f32(ws_c + tap * kCoTile, w_valid ? w_c + tap : a.weight, w_valid);
    }
    // END SOLUTION
  };

  float acc[kPix][kCo];
  float pool[kCo];
#pragma unroll
  for (int c = 0; c < kCo; ++c) {
    pool[c] = 0.0f;
#pragma unroll
    for (int m = 0; m < kPix; ++m) acc[m][c] = 0.0f;
  }

  // BEGIN SOLUTION
  // STUB: ladder_todo("09.2", "the pipeline's start: enqueue step 0 and commit it as one group");
  // STUB: ladder_unused(load_step, cp_async_commit);
  load_step(0);
  cp_async_commit();
  // END SOLUTION
  for (int step = 0; step < steps; ++step) {
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("09.3", "each step: enqueue step + 1, commit, cp_async_wait<1>, a barrier");
    // STUB: ladder_unused(load_step);
    if (step + 1 < steps) load_step(step + 1);  // overlaps with this step's math
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies for `step` have landed ...
    __syncthreads();     // ... and everyone else's
    // END SOLUTION
    const int chunk = step % chunks;
    const int nci = min(a.ci_chunk, p.in_per_group - chunk * a.ci_chunk);
    // BEGIN SOLUTION 08
    // STUB: if (step == 0) ladder_todo("09.4", "the register tile of stage 08, from buffer step & 1");
    // STUB: ladder_unused(nci, warp_active, patch_floats, weight_floats, stage_floats, smem);
    if (warp_active) {
      const float* xs = smem + (step & 1) * stage_floats;
      const float* ws = xs + a.ci_chunk * patch_floats;
      for (int cl = 0; cl < nci; ++cl) {
        const float* x_thread = xs + cl * patch_floats + r * kPitch + t * kPix;
        const float* w_warp = ws + cl * weight_floats + warp * kCo;
        for (int jh = 0; jh < p.kernel_h; ++jh) {  // patch row r + jh*dh: tap kh = kernel_h-1-jh
          const float* x_row = x_thread + jh * p.dilation_h * kPitch;
          const float* w_row = w_warp + (p.kernel_h - 1 - jh) * KW * kCoTile;
          float window[kWindow];
#pragma unroll
          for (int q = 0; q < kWindow / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(x_row + 4 * q);
            window[4 * q] = v.x;
            window[4 * q + 1] = v.y;
            window[4 * q + 2] = v.z;
            window[4 * q + 3] = v.w;
          }
#pragma unroll
          for (int kk = 0; kk < KW; ++kk) {  // window offset kk is tap kw = KW-1-kk
            const float* w_tap = w_row + (KW - 1 - kk) * kCoTile;
            const float4 w0 = *reinterpret_cast<const float4*>(w_tap);
            const float4 w1 = *reinterpret_cast<const float4*>(w_tap + 4);
            const float wv[kCo] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
            for (int m = 0; m < kPix; ++m)
#pragma unroll
              for (int c = 0; c < kCo; ++c) acc[m][c] = fmaf(window[m + kk], wv[c], acc[m][c]);
          }
        }
      }
    }
    // END SOLUTION
    if (chunk == chunks - 1) {  // the tile is complete: pool its in-range pixels, start afresh
      const int tile = tile_begin + step / chunks;
      const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
      const int oh = th * kTileRows + r, ow = tw * kTileCols + t * kPix;
#pragma unroll
      for (int m = 0; m < kPix; ++m) {
        const bool inside = oh < p.out_h && ow + m < p.out_w;
#pragma unroll
        for (int c = 0; c < kCo; ++c) {
          if (inside) pool[c] += acc[m][c];
          acc[m][c] = 0.0f;
        }
      }
    }
    __syncthreads();  // the buffer just read is refilled by the next iteration's load_step
  }

  // Channel sums of the block: a shuffle tree per channel (fixed order), lane 0 writes.
#pragma unroll
  for (int c = 0; c < kCo; ++c) pool[c] = warp_allreduce_sum(pool[c]);
  if (lane == 0 && warp_active) {
#pragma unroll
    for (int c = 0; c < kCo; ++c)
      if (warp * kCo + c < co_count) out[c] = pool[c];
  }
}

// ---- stage 09 kernels: end -----------------------------------------------------------------

/// What the host half (lib/tiled_fp32_host.cuh: plan, workspace, opt-in, launches) takes from
/// this stage.
struct AsyncCopyTile {
  using Args = TiledArgs;
  static constexpr int threads = kThreads, tile_rows = kTileRows, tile_cols = kTileCols, pitch = kPitch,
                       co_tile = kCoTile, buffers = kBuffers, max_kernel_w = kMaxKernelW,
                       max_ci_chunk = kMaxCiChunk, smem_budget = kSmemBudget;
  static constexpr int64_t target_blocks = kTargetBlocks;
  static constexpr const char* name = "conv_pool_async_copy";
  template <int KW>
  static auto kernel() { return conv_pool_async_copy<KW>; }
};
using Host = TiledFp32Host<AsyncCopyTile>;

/// Says when the code that runs has no cp.async: on a GPU below sm_80, and also on a newer GPU
/// running code JIT-compiled from an older architecture's PTX (a build for 75 only on an A100).
/// The kernel's ptxVersion is the virtual architecture its code came from, x10.
std::string device_note() {
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, conv_pool_async_copy<3>));
#ifdef LADDER_NO_CP_ASYNC
  return "built with LADDER_NO_CP_ASYNC: the copies are synchronous (stage 08 with two buffers, no overlap)";
#endif
  if (attr.ptxVersion >= 80) return "";
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return "cp.async needs code for sm_80 or newer; this sm_" + std::to_string(major) + std::to_string(minor) +
         " GPU runs code built for compute_" + std::to_string(attr.ptxVersion) +
         ", so the copies are synchronous (stage 08 with two buffers, no overlap)";
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // plan, workspace, opt-in, launches; deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};  // "vs previous": conv + pool, fused or not
  d.idea = "cp.async double buffering: the next chunk's copies overlap this chunk's FMAs";
  d.device_note = device_note;  // below sm_80: no cp.async
}

}  // namespace ladder
