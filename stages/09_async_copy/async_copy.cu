// Stage 05: conv-pool fusion. The whole pipeline in one kernel launch:
//  - each block computes tiles of the convT output in registers (never in HBM): the 2.16 GB
//    intermediate of stages 01-04 is neither written nor read back;
//  - each tile is pooled the moment it is complete, into a per-block partial sum per channel;
//  - the last block of each sample (an atomic counter and a memory fence) sums the partials in
//    a fixed order and runs the bias + log-sum-exp + scale epilogue.
// What remains is the arithmetic: 2*conv_macs() flops, so this stage is compute-bound and the
// kernel is a register-tiled direct convolution (the SGEMM ideas applied to a stencil).
//
// Two kernels, one chosen per problem (the same for every run of that problem):
//  - conv_pool_stride1_tiled: stride 1, dilation_w 1, kernel_w <= 5 (the KernelBench case);
//    shared-memory tiles, 8x8 register tiles, cp.async double buffering;
//  - conv_pool_general: every other ConvTranspose2d parameter set; a direct gather per pixel.
// Both write the same per-block partials and finish through the same epilogue.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/register_stage.hpp"
#include "lib/warp_reduce.cuh"
#include "logsumexp.hpp"
#include "stage.hpp"

namespace ladder {
namespace {

// ---- stage 05 kernels: begin ---------------------------------------------------------------

constexpr int kThreads = 256;               // both kernels
constexpr int kWarps = kThreads / 32;

// Fast path geometry. A warp owns a 16x16 output tile for 8 output channels: lane l computes
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
constexpr int kStageBytesBudget = 48 * 1024; // per pipeline stage; two stages per block
static_assert(kThreads % kCoTile == 0 && kThreads >= kPitch, "fixed per-thread copy roles");
static_assert(kTileRows * (kTileCols / kPix) == 32, "one warp covers one tile");

// General path: a block owns 8 output channels of one group and a range of pixels.
constexpr int kGeneralCo = 8;

/// Everything both kernels need, by value. Layouts (fp32, contiguous):
///   x (N, Cin, H, W); weight (Cin, Cout/g, kH, kW); conv_bias, bias (Cout); pooled (N, Cout);
///   y (N); counters (N) arrival counts, zero at launch; partials (N, blocks_per_plane, Cout).
/// The grid is N * blocks_per_plane * co_tiles blocks, co tile fastest, then plane part, then n.
struct FusedArgs {
  ConvParams p;
  const float* x;
  const float* weight;
  const float* conv_bias;
  const float* bias;
  float* pooled;
  float* y;
  unsigned* counters;
  float* partials;
  float scale;
  int units;               ///< work units per plane: fast path pixel tiles, general path pixels
  int units_per_part;      ///< units / blocks_per_plane: part b gets this many units, plus one
  int units_rem;           ///< if b < units % blocks_per_plane = units_rem (no 64-bit division)
  double inv_plane;        ///< 1 / (Hout * Wout)
  int tiles_w;             ///< fast path: tiles per output row of tiles
  int blocks_per_plane;    ///< blocks sharing one (n, co tile); units split evenly among them
  int co_tiles_per_group;  ///< ceil((Cout/g) / channels per block)
  int co_tiles;            ///< groups * co_tiles_per_group
  int ci_chunk;            ///< fast path: input channels per pipeline step
  int patch_rows;          ///< fast path: 16 + (kernel_h - 1) * dilation_h
};

/// The work units [begin, end) of plane part `part`: an even split, sizes differ by at most one.
__device__ inline int part_begin(const FusedArgs& a, int part) {
  return part * a.units_per_part + min(part, a.units_rem);
}

/// Which (n, plane part, co tile) block `bid` is: co tile fastest, so the blocks that read the
/// same input patch run at the same time and share it through L2.
struct BlockCoords {
  int64_t n;
  int part;     // 0 .. blocks_per_plane-1
  int group;    // convolution group of the co tile
  int co_base;  // first output channel of the tile, within the group
};
__device__ inline BlockCoords block_coords(const FusedArgs& a, int co_per_tile) {
  const unsigned bid = blockIdx.x;
  const unsigned ct = bid % unsigned(a.co_tiles);
  const unsigned rest = bid / unsigned(a.co_tiles);
  BlockCoords c;
  c.part = int(rest % unsigned(a.blocks_per_plane));
  c.n = int64_t(rest / unsigned(a.blocks_per_plane));
  c.group = int(ct) / a.co_tiles_per_group;
  c.co_base = (int(ct) % a.co_tiles_per_group) * co_per_tile;
  return c;
}

/// 4-byte asynchronous global -> shared copy (sm_80+); src_valid false writes 0.0f without
/// reading global memory, which is how the zero padding of the input patch is filled.
__device__ inline void cp_async_f32(float* smem_dst, const float* gmem_src, bool src_valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_valid ? 4 : 0)
               : "memory");
#else
  *smem_dst = src_valid ? *gmem_src : 0.0f;
#endif
}
__device__ inline void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/// Waits until at most `kPending` of this thread's committed copy groups are still in flight.
template <int kPending>
__device__ inline void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

/// Counts this block in for sample n; true in every thread of the block that arrives last.
/// The fence before the count publishes this block's partials device-wide; the fence after
/// it orders the last block's reads of the other blocks' partials after their publication.
__device__ inline bool arrive_last(unsigned* counter, unsigned blocks_per_sample) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == blocks_per_sample - 1;
  __syncthreads();
  if (last) __threadfence();
  return last;
}

/// The epilogue, run by the last block of sample n (kThreads threads):
///   pooled[n,co] = conv_bias[co] + (sum over parts of partials[n, part, co]) / (Hout*Wout)
///   y[n] = scale * logsumexp_co(pooled[n,co] + bias[co])       (torch.logsumexp semantics)
/// Lane l of every warp takes channel base + l; warp w sums parts w, w + 8, ...; the 8 slices
/// are added in warp order: a fixed order, so the result is the same bits every run. Partials
/// written by other blocks are read with __ldcg (L2, not this SM's possibly stale L1).
/// Warp 0 keeps an online (max, sum) pair per lane and merges the lanes with shuffles.
__device__ void finish_sample(const FusedArgs& a, int64_t n) {
  __shared__ float slice[kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int cout = a.p.out_channels;
  const float* part = a.partials + n * a.blocks_per_plane * int64_t(cout);
  float m = -INFINITY, l = 0.0f;
  for (int base = 0; base < cout; base += 32) {
    const int co = base + lane;
    float s = 0.0f;
    if (co < cout) {
#pragma unroll 4
      for (int b = warp; b < a.blocks_per_plane; b += kWarps) s += __ldcg(part + int64_t(b) * cout + co);
    }
    slice[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && co < cout) {
      float total = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += slice[w][lane];
      const float v = a.conv_bias[co] + float(double(total) * a.inv_plane);  // mean(cb + conv) = cb + mean(conv)
      a.pooled[n * cout + co] = v;
      lse_push(m, l, v + a.bias[co]);
    }
    __syncthreads();  // slice is rewritten by the next 32 channels
  }
  if (warp == 0) {
    warp_allreduce_lse(m, l);
    if (lane == 0) a.y[n] = a.scale * lse_finish(m, l);
  }
}

/// Fast path: stride (1, 1), dilation_w 1, kernel_w == KW (1..5); any kernel_h, dilation_h,
/// padding, output_padding, groups, sizes. With stride 1 the gather form is a correlation with
/// the flipped kernel:  out[oh, ow] = sum_{ci,kh,kw} x[oh + ph - kh*dh, ow + pw - kw] w[kh, kw]
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
/// 64 FMAs, so each value read from shared memory feeds 8 FMAs (KW = 3: 192 FFMA among 212
/// instructions of the inner loop in the sm_90 SASS).
/// When a tile's last chunk is done, the thread adds its in-range outputs to 8 running channel
/// sums (pool) and clears the accumulators; at the end each warp reduces pool with shuffles and
/// lane 0 writes partials[n, part, co]. Shared memory: 2 * ci_chunk * (patch_rows*20 +
/// kh*KW*64) floats, sized by the tile and at most 96 KB (2 blocks per SM); 0 bytes of stack.
template <int KW>
__global__ void __launch_bounds__(kThreads, 2) conv_pool_stride1_tiled(FusedArgs a) {
  extern __shared__ __align__(16) float smem[];
  constexpr int kWindow = (kPix + KW - 1 + 3) / 4 * 4;  // floats per row window, whole float4s
  static_assert(kTileCols - kPix + kWindow <= kPitch, "the last column group's window stays in the row");
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int r = lane % kTileRows, t = lane / kTileRows;
  const BlockCoords bc = block_coords(a, kCoTile);
  const int co_count = min(kCoTile, p.out_per_group - bc.co_base);  // valid channels of the tile
  const bool warp_active = warp * kCo < co_count;                    // warp-uniform
  const int tile_begin = part_begin(a, bc.part), tile_end = part_begin(a, bc.part + 1);
  const int ci_group = bc.group * p.in_per_group;
  const int chunks = (p.in_per_group + a.ci_chunk - 1) / a.ci_chunk;
  const int steps = (tile_end - tile_begin) * chunks;
  const int taps = p.kernel_h * KW;
  const int patch_floats = a.patch_rows * kPitch;
  const int weight_floats = taps * kCoTile;
  const int stage_floats = a.ci_chunk * (patch_floats + weight_floats);
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const float* x_n = a.x + bc.n * p.in_channels * in_plane;

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
  };

  float acc[kPix][kCo];
  float pool[kCo];
#pragma unroll
  for (int c = 0; c < kCo; ++c) {
    pool[c] = 0.0f;
#pragma unroll
    for (int m = 0; m < kPix; ++m) acc[m][c] = 0.0f;
  }

  load_step(0);
  cp_async_commit();
  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) load_step(step + 1);  // overlaps with this step's math
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies for `step` have landed ...
    __syncthreads();     // ... and everyone else's
    const int chunk = step % chunks;
    const int nci = min(a.ci_chunk, p.in_per_group - chunk * a.ci_chunk);
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
    float* out = a.partials + (bc.n * a.blocks_per_plane + bc.part) * int64_t(p.out_channels) +
                 bc.group * p.out_per_group + bc.co_base + warp * kCo;
#pragma unroll
    for (int c = 0; c < kCo; ++c)
      if (warp * kCo + c < co_count) out[c] = pool[c];
  }
  if (arrive_last(a.counters + bc.n, unsigned(a.blocks_per_plane * a.co_tiles))) finish_sample(a, bc.n);
}

/// General path: every ConvTranspose2d parameter set (any stride, padding, output_padding,
/// dilation, groups, kernel size). Block: (n, a contiguous range of the plane's output pixels,
/// 8 channels of one group). Thread: one output pixel at a time (grid-stride over the range),
/// all 8 channels, by the gather form: tap (kh, kw) contributes x[ih, iw] with
/// ih = (oh + ph - kh*dh) / sh when exact and 0 <= ih < H (same for iw). Each x value loaded
/// (through the read-only cache) feeds 8 FMAs; the 8 weights are the same address for the
/// whole warp (a broadcast). Outputs are summed per channel in registers, then reduced by
/// shuffles and one shared slot per warp in a fixed order into partials[n, part, co].
__global__ void __launch_bounds__(kThreads) conv_pool_general(FusedArgs a) {
  __shared__ float warp_sums[kWarps][kGeneralCo];
  const ConvParams& p = a.p;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const BlockCoords bc = block_coords(a, kGeneralCo);
  const int co_count = min(kGeneralCo, p.out_per_group - bc.co_base);
  const int pix_begin = part_begin(a, bc.part), pix_end = part_begin(a, bc.part + 1);
  const int taps = p.kernel_h * p.kernel_w;
  const int64_t in_plane = int64_t(p.in_h) * p.in_w;
  const int ci_group = bc.group * p.in_per_group;
  const float* x_g = a.x + (bc.n * p.in_channels + ci_group) * in_plane;
  const float* w_g = a.weight + (int64_t(ci_group) * p.out_per_group + bc.co_base) * taps;
  const int64_t w_ci_stride = int64_t(p.out_per_group) * taps;

  float pool[kGeneralCo];
#pragma unroll
  for (int c = 0; c < kGeneralCo; ++c) pool[c] = 0.0f;
  // Pixel indices fit in 31 bits (validate() bounds the plane); unsigned so i + kThreads cannot wrap.
  const unsigned count = unsigned(pix_end - pix_begin);
  for (unsigned i = tid; i < count; i += kThreads) {
    const int pix = pix_begin + int(i);
    const int oh = pix / p.out_w, ow = pix - oh * p.out_w;
    float acc[kGeneralCo];
#pragma unroll
    for (int c = 0; c < kGeneralCo; ++c) acc[c] = 0.0f;
    for (int kh = 0; kh < p.kernel_h; ++kh) {
      const int ih_num = oh + p.padding_h - kh * p.dilation_h;
      if (ih_num < 0 || ih_num % p.stride_h != 0) continue;
      const int ih = ih_num / p.stride_h;
      if (ih >= p.in_h) continue;
      for (int kw = 0; kw < p.kernel_w; ++kw) {
        const int iw_num = ow + p.padding_w - kw * p.dilation_w;
        if (iw_num < 0 || iw_num % p.stride_w != 0) continue;
        const int iw = iw_num / p.stride_w;
        if (iw >= p.in_w) continue;
        const float* x_tap = x_g + (ih * p.in_w + iw);
        const float* w_tap = w_g + (kh * p.kernel_w + kw);
        for (int ci = 0; ci < p.in_per_group; ++ci) {
          const float xv = __ldg(x_tap + ci * in_plane);
          const float* w_ci = w_tap + ci * w_ci_stride;
#pragma unroll
          for (int c = 0; c < kGeneralCo; ++c)  // channels past co_count repeat the last one;
            acc[c] = fmaf(xv, __ldg(w_ci + min(c, co_count - 1) * taps), acc[c]);  // never written
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kGeneralCo; ++c) pool[c] += acc[c];
  }

#pragma unroll
  for (int c = 0; c < kGeneralCo; ++c) {
    pool[c] = warp_allreduce_sum(pool[c]);
    if (lane == 0) warp_sums[warp][c] = pool[c];
  }
  __syncthreads();
  if (tid < co_count) {
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += warp_sums[w][tid];
    a.partials[(bc.n * a.blocks_per_plane + bc.part) * int64_t(p.out_channels) + bc.group * p.out_per_group +
               bc.co_base + tid] = s;
  }
  if (arrive_last(a.counters + bc.n, unsigned(a.blocks_per_plane * a.co_tiles))) finish_sample(a, bc.n);
}

// ---- stage 05 kernels: end -----------------------------------------------------------------

// Aim for this many blocks (about 15 waves of 2 blocks on 132 SMs) so that the last wave is a
// small fraction of the run, while each sample's partials stay few (blocks_per_plane <= 4096).
constexpr int64_t kTargetBlocks = 4096;

/// The launch plan of a problem: which kernel, how work is split, how much memory. A pure
/// function of the problem, so workspace_bytes and run always agree.
struct Plan {
  bool fast = false;
  int kernel_w = 0;
  int ci_chunk = 0;
  int patch_rows = 0;
  size_t smem_bytes = 0;
  int units = 0, tiles_w = 0;
  int blocks_per_plane = 0, co_tiles_per_group = 0, co_tiles = 0;
  unsigned blocks = 0;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Plan make_plan(const Problem& pr) {
  pr.validate();
  Plan q;
  const int64_t out_h = pr.out_h(), out_w = pr.out_w();
  const int64_t rows = kTileRows + (pr.kernel_size.h - 1) * pr.dilation.h;
  const int64_t per_ci_bytes = int64_t(sizeof(float)) * (rows * kPitch + pr.kernel_size.h * pr.kernel_size.w * kCoTile);
  q.fast = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 && pr.kernel_size.w <= kMaxKernelW &&
           per_ci_bytes <= kStageBytesBudget;
  const int64_t limit = 2147483647;
  int64_t units = 0, co_per_tile = 0, min_units_per_block = 1, min_parts = 1;
  if (q.fast) {
    q.kernel_w = int(pr.kernel_size.w);
    q.patch_rows = int(rows);
    q.ci_chunk = int(std::min<int64_t>({kMaxCiChunk, pr.in_per_group(), kStageBytesBudget / per_ci_bytes}));
    q.smem_bytes = size_t(2 * q.ci_chunk) * size_t(per_ci_bytes);
    q.tiles_w = int(ceil_div(out_w, kTileCols));
    units = ceil_div(out_h, kTileRows) * q.tiles_w;
    co_per_tile = kCoTile;
    // A block walks (its tiles) x (input-channel chunks) pipeline steps, counted in 32 bits.
    min_parts = ceil_div(units * ceil_div(pr.in_per_group(), q.ci_chunk), limit);
  } else {
    units = out_h * out_w;
    co_per_tile = kGeneralCo;
    min_units_per_block = kThreads;  // at least a pixel per thread where the plane allows
  }
  q.units = int(units);  // < 2^31: validate() bounds out_h * out_w
  q.co_tiles_per_group = int(ceil_div(pr.out_per_group(), co_per_tile));
  const int64_t co_tiles = pr.groups * q.co_tiles_per_group;
  if (co_tiles > limit || pr.batch > limit / co_tiles)
    throw std::runtime_error("launch configuration of stage 05: batch " + std::to_string(pr.batch) + " x " +
                             std::to_string(co_tiles) + " channel tiles exceeds CUDA's grid limit 2^31 - 1");
  q.co_tiles = int(co_tiles);
  const int64_t max_parts = std::max<int64_t>(1, ceil_div(units, min_units_per_block));
  const int64_t parts =
      std::clamp<int64_t>(std::max(ceil_div(kTargetBlocks, pr.batch * co_tiles), min_parts), 1, max_parts);
  q.blocks_per_plane = int(parts);
  const int64_t blocks = pr.batch * co_tiles * parts;
  if (blocks > limit)
    throw std::runtime_error("launch configuration of stage 05: " + std::to_string(blocks) +
                             " blocks exceed CUDA's grid limit 2^31 - 1");
  q.blocks = unsigned(blocks);
  return q;
}

constexpr size_t kCounterAlign = 256;

size_t counters_bytes(const Problem& p) {
  return (size_t(p.batch) * sizeof(unsigned) + kCounterAlign - 1) / kCounterAlign * kCounterAlign;
}

/// Workspace: N arrival counters, then partials (N, blocks_per_plane, Cout) fp32:
/// O(N * Cout * blocks_per_plane), deterministic (each partial written once, summed in order).
size_t workspace_bytes(const Problem& p) {
  const Plan q = make_plan(p);
  return counters_bytes(p) + size_t(p.batch) * size_t(q.blocks_per_plane) * size_t(p.out_channels) * sizeof(float);
}

template <int KW>
void launch_tiled(const Plan& q, const FusedArgs& f, cudaStream_t stream) {
  conv_pool_stride1_tiled<KW><<<q.blocks, kThreads, q.smem_bytes, stream>>>(f);
  CUDA_CHECK_LAUNCH("conv_pool_stride1_tiled");
}

/// The descriptor's prepare hook, called once per problem before any run: above 48 KB of
/// dynamic shared memory a kernel must opt in (cudaFuncSetAttribute, a host call kept out of the
/// timed region). Throws CudaError if the device cannot give the plan's shared memory.
void prepare(const Problem& p) {
  const Plan q = make_plan(p);
  if (!q.fast) return;  // the general kernel uses static shared memory only
  const auto set = [&](auto kernel) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(q.smem_bytes)));
  };
  switch (q.kernel_w) {
    case 1: set(conv_pool_stride1_tiled<1>); break;
    case 2: set(conv_pool_stride1_tiled<2>); break;
    case 3: set(conv_pool_stride1_tiled<3>); break;
    case 4: set(conv_pool_stride1_tiled<4>); break;
    case 5: set(conv_pool_stride1_tiled<5>); break;
    default: throw std::logic_error("stage 05: no tiled kernel for kernel_w " + std::to_string(q.kernel_w));
  }
}

/// Enqueues the stage; prepare(a.problem) must have run first (GpuSession::time_stage does),
/// or the tiled kernel's launch fails for want of its shared memory above 48 KB.
void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  const Plan q = make_plan(p);
  auto* counters = static_cast<unsigned*>(a.workspace);
  auto* partials = reinterpret_cast<float*>(static_cast<unsigned char*>(a.workspace) + counters_bytes(p));
  const FusedArgs f{conv_params(p), a.in.x,     a.in.weight,  a.in.conv_bias,    a.in.bias,
                    a.pooled,       a.y,        counters,     partials,          float(p.scale),
                    q.units,        q.units / q.blocks_per_plane, q.units % q.blocks_per_plane,
                    1.0 / (double(p.out_h()) * double(p.out_w())), q.tiles_w,  q.blocks_per_plane, q.co_tiles_per_group, q.co_tiles,
                    q.ci_chunk,     q.patch_rows};

  a.marks.begin(Phase::Fused);
  // The workspace comes uninitialized; the arrival counters must start at 0 every run.
  CUDA_CHECK(cudaMemsetAsync(counters, 0, size_t(p.batch) * sizeof(unsigned), a.stream));
  if (!q.fast) {
    conv_pool_general<<<q.blocks, kThreads, 0, a.stream>>>(f);
    CUDA_CHECK_LAUNCH("conv_pool_general");
    return;
  }
  switch (q.kernel_w) {
    case 1: launch_tiled<1>(q, f, a.stream); break;
    case 2: launch_tiled<2>(q, f, a.stream); break;
    case 3: launch_tiled<3>(q, f, a.stream); break;
    case 4: launch_tiled<4>(q, f, a.stream); break;
    case 5: launch_tiled<5>(q, f, a.stream); break;
    default: throw std::logic_error("stage 05: no tiled kernel for kernel_w " + std::to_string(q.kernel_w));
  }
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "one launch: register-tiled convT pooled on chip, last block runs the epilogue";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.prepare = prepare;  // cudaFuncSetAttribute, once per problem, outside the timed region
  d.deterministic = true;  // partials written once, summed in a fixed order: no float atomics
}

}  // namespace ladder
