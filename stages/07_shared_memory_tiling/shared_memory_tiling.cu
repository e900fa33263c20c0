// Stage 07: shared-memory tiling. Stage 06 reads every x value and every weight from global
// memory for each FMA (two loads per FMA, most of them hits in L1 or L2). Here a block first
// copies what its outputs need into shared memory, and its threads compute from there:
//  - conv+pool: a block owns a tile of 32 output pixels (one row segment) x 8 output channels;
//               per (tile, input-channel chunk) its threads copy the input patch of the tile
//               with its halo (kernel_h rows of 32 + kernel_w - 1 columns, zeros outside the
//               input) and the chunk's weights of the 8 channels into shared memory, wait at a
//               barrier, and each thread adds that chunk's taps to its ONE output (warp w:
//               channel w; lane l: pixel l), reading both operands from shared memory, then a
//               second barrier before the buffer is refilled. A tile's outputs are pooled in
//               registers as in stage 06. Stride-1 problems with kernel_w <= 5 and dilation_w 1;
//               every other parameter set runs the general path (lib/conv_pool_general.cuh);
//  - finish:    partials summed in a fixed order, mean, conv bias, log-sum-exp
//               (lib/fused_partials.cuh).
// No register tiling yet: each FMA still takes two shared-memory loads (stage 08's step).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"  // ceil_div, with_kernel_width
#include "lib/register_stage.hpp"
#include "lib/tiled_fp32_host.cuh"  // TiledFp32Host: the host half
#include "todo.cuh"
#include "lib/warp_reduce.cuh"

namespace ladder {
namespace {

// ---- stage 07 kernels: begin ---------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// Geometry. A block owns a tile of 1 x 32 output pixels for 8 output channels: warp w computes
// channel w of the tile, lane l pixel l. One output per thread, one accumulator.
constexpr int kTileRows = 1;
constexpr int kTileCols = 32;
constexpr int kCoTile = kWarps;              // 8 output channels per block, one per warp
constexpr int kMaxKernelW = 5;
// Shared-memory row pitch of the input patch: 32 columns + kernel_w - 1 halo. A warp reads 32
// consecutive floats of one patch row (lane l, column l + kk), one per bank whatever the pitch,
// and its weight is one address for all 32 lanes (a broadcast): no bank conflicts.
constexpr int kPitch = kTileCols + kMaxKernelW - 1;
constexpr int kMaxCiChunk = 8;               // input channels staged per step
constexpr int kBuffers = 1;                  // one buffer: copy, barrier, compute, barrier
constexpr int kSmemBudget = 96 * 1024;       // dynamic shared memory per block at most
// Resident blocks per SM the registers must allow: 6 (1536 threads); an sm_75 SM holds 1024
// threads, so 4 there.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750
constexpr int kMinBlocks = 4;
#else
constexpr int kMinBlocks = 6;
#endif
constexpr int64_t kTargetBlocks = 16384;     // about 20 waves of 6 blocks on 132 SMs
static_assert(kThreads % kCoTile == 0 && kThreads >= kPitch, "fixed per-thread copy roles");
static_assert(kTileRows * kTileCols == 32, "one warp covers one tile");

/// The tiled kernel's arguments, by value. x (N, Cin, H, W), weight (Cin, Cout/g, kH, kW),
/// partials (N, g.parts, Cout), fp32. The grid (make_fused_grid): units are the plane's 1x32
/// tiles, kCoTile channels per block.
struct TiledArgs {
  ConvParams p;
  const float* x;
  const float* weight;
  float* partials;
  FusedGrid g;
  int tiles_w;     ///< tiles per row of tiles
  int ci_chunk;    ///< input channels per step
  int patch_rows;  ///< kTileRows + (kernel_h - 1) * dilation_h
};

/// partials[n, part, co] = sum of the convT outputs (without conv bias) of 1x32 tiles
/// [part_begin(part), part_begin(part + 1)) of plane (n, co), for the block's 8 channels.
/// Stride (1, 1), dilation_w 1, kernel_w == KW (1..5); any kernel_h, dilation_h, padding,
/// output_padding, groups, sizes. With stride 1 the gather form is a correlation with the
/// flipped kernel:  out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[kh, kw]
/// (x zero outside the plane), so an output tile needs one input patch with a halo.
///
/// Block: (n, a contiguous range of 1x32 output tiles of the plane, 8 channels of one group).
/// Per tile it walks the group's input channels in chunks of ci_chunk, staged in shared memory:
///   shared x patch [ci_chunk][patch_rows][36], rows from oh0 + ph - (kh-1)*dh, columns from
///   ow0 + pw - (KW-1), zero where outside the input;
///   shared weights [ci_chunk][kh*KW][8]  (the block's 8 channels of each tap side by side).
/// Thread: output row r = lane / 32 (0), column c = lane % 32, channel warp. Per (ci, kh, kw)
/// one FMA whose two operands are shared-memory loads: x at patch column c + kk, the input of
/// tap kw = KW-1-kk, and the warp's weight, a broadcast. When a tile's last chunk is done the
/// thread adds its output to its running sum (pool) if it is in range; at the end each warp
/// reduces pool with shuffles and lane 0 writes the partial of its channel. Shared memory:
/// ci_chunk * (patch_rows*36 + kh*KW*8) floats, sized by the tile; 0 bytes of stack.
/// Changed from stage 06: x and weights come from shared memory, staged once per block and
/// chunk, instead of from global memory for each FMA.
/// __launch_bounds__(256, 6): at most 40 registers, six blocks (48 warps) per SM to hide the
/// latency of the synchronous fills; without the minimum, ptxas (nvcc 13.0, sm_90) squeezes the
/// kernel into 32 registers and spills to local memory.
template <int KW>
__global__ void __launch_bounds__(kThreads, kMinBlocks) conv_pool_smem_tile(TiledArgs a) {
  extern __shared__ __align__(16) float smem[];
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int r = lane / kTileCols, c = lane % kTileCols;
  const BlockCoords bc = block_coords(a.g);
  const int co_count = min(kCoTile, p.out_per_group - bc.co_base);  // valid channels of the tile
  const bool warp_active = warp < co_count;                          // warp-uniform
  const int tile_begin = part_begin(a.g, bc.part), tile_end = part_begin(a.g, bc.part + 1);
  const int ci_group = bc.group * p.in_per_group;
  const int chunks = (p.in_per_group + a.ci_chunk - 1) / a.ci_chunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int patch_floats = a.patch_rows * kPitch;
  const int weight_floats = taps * kCoTile;
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const float* x_n = a.x + bc.n * p.in_channels * in_plane;
  // The slot is addressed before the loop: a pointer stays in registers across it.
  float* out = partial_slot(a.partials, a.g, bc.n, bc.part, p.out_channels,
                            bc.group * p.out_per_group + bc.co_base + warp);

  // Copy roles, fixed per thread so the copy loops carry no divisions: the x patch is filled
  // kFillRows rows per pass with thread -> (row fill_row0, column fill_col); the weights with
  // thread -> (channel w_co, taps w_tap0, w_tap0 + kTapStep, ...), since kThreads % kCoTile == 0.
  constexpr int kFillRows = kThreads / kPitch;  // 7 rows per pass; the last 4 threads copy no x
  constexpr int kTapStep = kThreads / kCoTile;  // 32
  const int fill_col = tid % kPitch, fill_row0 = tid / kPitch;
  const bool fills_x = fill_row0 < kFillRows;
  const int w_co = tid % kCoTile, w_tap0 = tid / kCoTile;
  const bool w_valid = w_co < co_count;  // channels past the group's end are zero-filled

  // Copy the inputs of step `step` (tile step / chunks, chunk step % chunks) to shared memory.
  auto load_step = [&](int step) {
    const int tile = tile_begin + step / chunks, chunk = step % chunks;
    const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("07.1", "load_step(step): chunk `chunk`'s x patch and weights into smem");
    // STUB: ladder_unused(chunk, th, tw, fill_col, fill_row0, fills_x, w_co, w_tap0, w_valid, int(kTapStep));
    // STUB: ladder_unused(x_n, in_plane, ci_group, patch_floats, weight_floats, taps, smem);
    const int ih0 = th * kTileRows + p.padding_h - (p.kernel_h - 1) * p.dilation_h;
    const int iw = tw * kTileCols + p.padding_w - (KW - 1) + fill_col;
    const bool col_inside = fills_x && iw >= 0 && iw < p.in_w;
    const int ci0 = ci_group + chunk * a.ci_chunk;
    const int nci = min(a.ci_chunk, ci_group + p.in_per_group - ci0);
    float* xs = smem;
    float* ws = xs + a.ci_chunk * patch_floats;
    for (int cl = 0; cl < nci; ++cl) {
      const float* x_c = x_n + int64_t(ci0 + cl) * in_plane;
      float* xs_c = xs + cl * patch_floats + fill_col;
      if (fills_x)
        for (int row = fill_row0; row < a.patch_rows; row += kFillRows) {
          const int ih = ih0 + row;
          const bool inside = col_inside && ih >= 0 && ih < p.in_h;
          xs_c[row * kPitch] = inside ? x_c[ih * p.in_w + iw] : 0.0f;
        }
      // shared [tap][co] <- global [co][tap]: the warps' weights of one tap side by side
      const float* w_c = a.weight + (int64_t(ci0 + cl) * p.out_per_group + bc.co_base + w_co) * taps;
      float* ws_c = ws + cl * weight_floats + w_co;
      for (int tap = w_tap0; tap < taps; tap += kTapStep)
        ws_c[tap * kCoTile] = w_valid ? w_c[tap] : 0.0f;
    }
    // END SOLUTION
  };

  float acc = 0.0f;   // this thread's output, over the chunks of the current tile
  float pool = 0.0f;  // its in-range outputs, summed over the block's tiles

  for (int step = 0; step < steps; ++step) {
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("07.2", "each step: load_step, then wait for every thread's copies");
    // STUB: ladder_unused(load_step);
    load_step(step);
    __syncthreads();  // every thread's copies are in shared memory
    // END SOLUTION
    const int chunk = step % chunks;
    const int nci = min(a.ci_chunk, p.in_per_group - chunk * a.ci_chunk);
    // BEGIN SOLUTION
    // STUB: if (step == 0) ladder_todo("07.3", "one output per thread, both operands from shared memory");
    // STUB: ladder_unused(nci, warp_active, patch_floats, weight_floats, smem);
    if (warp_active) {
      const float* xs = smem;
      const float* ws = xs + a.ci_chunk * patch_floats;
      for (int cl = 0; cl < nci; ++cl) {
        const float* x_thread = xs + cl * patch_floats + r * kPitch + c;
        const float* w_warp = ws + cl * weight_floats + warp;
        for (int jh = 0; jh < p.kernel_h; ++jh) {  // patch row r + jh*dh: tap kh = kernel_h-1-jh
          const float* x_row = x_thread + jh * p.dilation_h * kPitch;
          const float* w_row = w_warp + (p.kernel_h - 1 - jh) * KW * kCoTile;
#pragma unroll
          for (int kk = 0; kk < KW; ++kk)  // patch column c + kk is tap kw = KW-1-kk
            acc = fmaf(x_row[kk], w_row[(KW - 1 - kk) * kCoTile], acc);  // 2 loads, 1 FMA
        }
      }
    }
    // END SOLUTION
    if (chunk == chunks - 1) {  // the tile is complete: pool its in-range pixel, start afresh
      const int tile = tile_begin + step / chunks;
      const int th = tile / a.tiles_w, tw = tile - th * a.tiles_w;
      const int oh = th * kTileRows + r, ow = tw * kTileCols + c;
      if (oh < p.out_h && ow < p.out_w) pool += acc;
      acc = 0.0f;
    }
    __syncthreads();  // the buffer just read is refilled by the next iteration's load_step
  }

  // The channel sum of the block: one warp per channel, a shuffle tree (fixed order).
  pool = warp_allreduce_sum(pool);
  if (lane == 0 && warp_active) *out = pool;
}

// ---- stage 07 kernels: end -----------------------------------------------------------------

/// What the host half (lib/tiled_fp32_host.cuh: plan, workspace, opt-in, launches) takes from
/// this stage.
struct SmemTile {
  using Args = TiledArgs;
  static constexpr int threads = kThreads, tile_rows = kTileRows, tile_cols = kTileCols, pitch = kPitch,
                       co_tile = kCoTile, buffers = kBuffers, max_kernel_w = kMaxKernelW,
                       max_ci_chunk = kMaxCiChunk, smem_budget = kSmemBudget;
  static constexpr int64_t target_blocks = kTargetBlocks;
  static constexpr const char* name = "conv_pool_smem_tile";
  template <int KW>
  static auto kernel() { return conv_pool_smem_tile<KW>; }
};
using Host = TiledFp32Host<SmemTile>;

}  // namespace

LADDER_REGISTER_STAGE(d) {
  Host::describe(d);  // plan, workspace, opt-in, launches; deterministic
  d.changes = {Phase::Conv, Phase::Pool, Phase::Fused};  // "vs previous": conv + pool, fused or not
  d.idea = "shared-memory tiling: input patch and weights staged per block, one output per thread";
}

}  // namespace ladder
