// Stage 06: pool before conv. The convolution is linear, so its global mean needs only a few
// sums of x per input plane (docs/problem.md, "Pooling before convolving: the linearity
// identity"):
//
//   pooled[n,co] = cb[co] + 1/(Hout*Wout) * sum_{ci in group(co)} sum_{kh,kw}
//                                             w[ci, co mod Cout/g, kh, kw] * R[n,ci,kh,kw]
//   R[n,ci,kh,kw] = sum of x[n,ci] over input rows rows(kh) x columns cols(kw)
//
// where rows(kh) = valid_input_range(...) are the input rows whose tap kh lands inside the
// output. With padding 0 every tap sees the whole plane and R is the plane sum; with padding a
// few border rows and columns drop out, and R = plane sum - border frame (strips and corners).
//
// One launch does everything (its counters are left at zero by the launch before: no memset):
//  - every block streams one chunk of one (n, ci) plane with 16-byte loads and writes its sum;
//  - the last block to finish a plane adds the chunk sums in a fixed order, forms R for every
//    tap (re-reading only the border frames), and writes sum_taps w*R for each co of its group
//    to its own workspace slot (n, ci, co);
//  - the last plane of a sample adds those slots over ci in a fixed order and runs the
//    epilogue: + conv bias, mean, + bias, log-sum-exp over co, x scale.
// No floating-point atomics: every sum has an order fixed by the problem alone (not by which
// block finishes when), so two runs give the same bits.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/aligned_split.cuh"
#include "lib/register_stage.hpp"
#include "lib/warp_reduce.cuh"
#include "logsumexp.hpp"
#include "stage.hpp"

namespace ladder {
namespace {

// ---- stage 06 kernels: begin ---------------------------------------------------------------

constexpr int kBlock = 256;           // threads per block, every phase
constexpr int kWarps = kBlock / 32;
constexpr int kUnroll = 8;            // 16-byte loads each thread has in flight
constexpr int64_t kChunkTile = int64_t(kBlock) * kUnroll * 4;  // floats one pass of a block reads
constexpr int64_t kMinChunkElems = 2 * kChunkTile;              // 16384 floats = 64 KiB
constexpr int kMaxChunksPerPlane = 64;  // bounds the chunk-sum workspace; larger planes, larger chunks
static_assert(kMaxChunksPerPlane <= kBlock, "the plane's last block reads one chunk sum per thread");

/// Input rows [lo, hi) whose tap k lands in the output: 0 <= ih*stride - padding + k*dilation
/// < out. The device copy of valid_input_range (problem.cpp); run() checks that they agree on
/// every tap and that out + padding + k*dilation fits in 32 bits, so this can use 32-bit
/// arithmetic (64-bit division is a subroutine call on the GPU). Empty ranges are {0, 0}.
struct Span {
  int lo, hi;
};
__host__ __device__ inline Span tap_span(int in, int out, int stride, int padding, int dilation, int k) {
  auto ceil_div = [](int a, int b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  const int lo_num = padding - k * dilation;
  const int hi_num = out + padding - k * dilation;  // exclusive
  int lo = ceil_div(lo_num, stride), hi = ceil_div(hi_num, stride);
  lo = lo < 0 ? 0 : lo;
  hi = hi > in ? in : hi;
  return hi > lo ? Span{lo, hi} : Span{0, 0};
}

/// Rows [r0, r1) x columns [c0, c1) of a plane; empty when either side is.
struct Rect {
  int r0, r1, c0, c1;
};

/// How R for one tap is formed from the plane sum S and at most four disjoint rectangles:
/// Zero (the tap sees no input), Whole (R = S, no border), Direct (R = sum of rect[0]) or
/// Frame (R = S - sum of the four rects: the top and bottom strips over full rows, the left
/// and right strips over the rows in between, so every corner is counted exactly once).
/// Direct is chosen when the window is at most half the plane, so no tap re-reads more than
/// half a plane however large the padding is.
enum class TapMode { Zero, Whole, Direct, Frame };
struct TapPlan {
  TapMode mode;
  Rect rect[4];
};
__host__ __device__ inline TapPlan plan_tap(Span rows, Span cols, int H, int W) {
  TapPlan t{TapMode::Zero, {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}};
  if (rows.hi == rows.lo || cols.hi == cols.lo) return t;
  if (rows.lo == 0 && rows.hi == H && cols.lo == 0 && cols.hi == W) {
    t.mode = TapMode::Whole;
    return t;
  }
  const int64_t window = int64_t(rows.hi - rows.lo) * (cols.hi - cols.lo);
  if (window <= int64_t(H) * W - window) {
    t.mode = TapMode::Direct;
    t.rect[0] = {rows.lo, rows.hi, cols.lo, cols.hi};
    return t;
  }
  t.mode = TapMode::Frame;
  t.rect[0] = {0, rows.lo, 0, W};             // top strip, corners included
  t.rect[1] = {rows.hi, H, 0, W};             // bottom strip, corners included
  t.rect[2] = {rows.lo, rows.hi, 0, cols.lo};  // left strip
  t.rect[3] = {rows.lo, rows.hi, cols.hi, W};  // right strip
  return t;
}

/// Kernel parameters: sizes (no compile-time shapes) and the chunking chosen on the host.
struct FusedParams {
  ConvParams conv;
  int64_t plane_elems;    // H*W
  int64_t chunk_elems;    // floats per chunk (the last chunk of a plane may be shorter)
  int chunks_per_plane;   // <= kMaxChunksPerPlane
  int taps;               // kH*kW
  int has_border;         // some tap's window is not the whole plane
  double inv_out_plane;   // 1 / (Hout*Wout)
  float scale;
};

/// Workspace arrays (layout in make_layout). The two counters start at zero and every launch
/// leaves them at zero (the block that sees a counter's final value resets it), so the runner
/// zeroes the workspace once, not before each launch; every other slot is written before it is
/// read.
struct Workspace {
  unsigned* plane_done;   // (N*Cin)        chunks of the plane finished
  unsigned* sample_done;  // (N)            planes of the sample finished
  double* contrib;        // (N*Cin, Cout/g) sum_taps w*R of plane (n, ci) for each co of its group
  float* chunk_sum;       // (N*Cin, chunks_per_plane)
  float* tap_sum;         // (N*Cin, kH*kW) R
};

/// Sum of v over the block, returned to every thread. Fixed tree, so the result is the same on
/// every run. All threads must call it (it has two barriers).
__device__ inline float block_sum(float v, float* scratch) {
  v = warp_allreduce_sum(v);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += scratch[w];
  __syncthreads();  // scratch may be reused at once
  return total;
}

/// This thread's share of the sum of src[0, len): 16-byte loads for the aligned body, kUnroll of
/// them issued before any is used (whole tiles), then the rest one at a time; head and tail
/// (< 4 floats each) by the first threads. The whole-tile loop has no predicates, so the
/// compiler keeps all kUnroll loads in flight instead of consuming each one before the next.
__device__ inline float chunk_partial(const float* __restrict__ src, int len) {
  const ChunkSplit s = split_chunk(reinterpret_cast<uintptr_t>(src), len);
  float acc = 0.0f;
  if (int(threadIdx.x) < s.head) acc += __ldg(src + threadIdx.x);
  if (int(threadIdx.x) < len - s.tail_begin) acc += __ldg(src + s.tail_begin + threadIdx.x);
  const float4* body = reinterpret_cast<const float4*>(src + s.head);
  int i = threadIdx.x;
  for (; i + (kUnroll - 1) * kBlock < s.body4; i += kUnroll * kBlock) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(body + i + u * kBlock);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  for (; i < s.body4; i += kBlock) {
    const float4 v = __ldg(body + i);
    acc += (v.x + v.y) + (v.z + v.w);
  }
  return acc;
}

/// This thread's share of the sum of plane[r0:r1, c0:c1] (row length W). Only border strips
/// and small windows come here, so the scattered column reads do not matter.
__device__ inline float rect_partial(const float* __restrict__ plane, int W, Rect r) {
  const int cols = r.c1 - r.c0;
  const int n = (r.r1 - r.r0) * cols;  // <= H*W < 2^31
  float acc = 0.0f;
  for (int e = threadIdx.x; e < n; e += kBlock)
    acc += __ldg(plane + (r.r0 + e / cols) * W + (r.c0 + e % cols));
  return acc;
}

/// The whole pipeline in one launch: x -> pooled, y.
///
/// x (N, Cin, H, W), weight (Cin, Cout/g, kH, kW), conv_bias (Cout), bias (Cout): fp32, NCHW.
/// Outputs pooled (N, Cout) and y (N). Grid: one block of kBlock threads per (plane, chunk),
/// plane = n*Cin + ci, blockIdx.x = plane*chunks_per_plane + chunk; offsets into x are 64-bit.
///
/// The formula is the linearity identity of docs/problem.md (see the top of this file):
///  1. every block sums its chunk of x (the only pass over x: one read of every element) and
///     writes the sum to chunk_sum; a counter per plane finds the block that finishes last;
///  2. that block adds the chunk sums in chunk order (S, the plane sum), then per tap forms
///     R = S (no border), 0 (no input), the window sum, or S - the border frame (plan_tap),
///     re-reading only the rectangles involved, and stores R in tap_sum;
///  3. it contracts: contrib[n, ci, j] = sum_taps w[ci, j, tap] * R[tap] (fp64) for the Cout/g
///     outputs j of its group: a plain store to a slot of its own, no atomics;
///  4. a counter per sample finds the last plane of sample n; that block sums, per co, the
///     Cin/g slots of its group in a fixed order (warp w adds ci = w, w + 8, ... in turn, then
///     the 8 warp sums are added in warp order), writes
///     pooled[n, co] = cb[co] + acc[n, co] / (Hout*Wout) and
///     y[n] = scale * logsumexp_co(pooled[n, co] + bias[co]) (stable online log-sum-exp with
///     torch's inf/NaN rules, a pair per lane of warp 0 merged with shuffles).
/// Why slots and not fp64 atomics (one per (plane, co)): atomics add in arrival order, which
/// changes from run to run, and so do the low bits of pooled. The slots cost 8 bytes per
/// (n, ci, co) of workspace (1 MiB at the KernelBench size) and, in the last block of each
/// sample, a read of Cin/g slots per channel (64 KiB there) instead of one accumulator.
/// Publishing follows the classic last-block pattern: write, __threadfence, atomicAdd; the
/// block that sees the final count fences again and reads the others' results through L2
/// (__ldcg). The counters are reset by the blocks that read their final values, so one launch
/// follows another with no memset in between (StageDescriptor::self_resetting_workspace).
__global__ void __launch_bounds__(kBlock)
    pool_before_conv_fused(FusedParams p, const float* __restrict__ x, const float* __restrict__ weight,
                           const float* __restrict__ conv_bias, const float* __restrict__ bias,
                           Workspace ws, float* __restrict__ pooled, float* __restrict__ y) {
  __shared__ float scratch[kWarps];
  __shared__ double slice[kWarps][32];
  __shared__ int last_of_plane, last_of_sample;

  const ConvParams& c = p.conv;
  // 32-bit block arithmetic: blockIdx.x < 2^31, so plane < 2^31 too.
  const int plane = int(blockIdx.x / unsigned(p.chunks_per_plane));
  const int chunk = int(blockIdx.x) - plane * p.chunks_per_plane;
  const float* plane_x = x + int64_t(plane) * p.plane_elems;

  // 1. Stream this chunk.
  const int64_t begin = int64_t(chunk) * p.chunk_elems;
  const int64_t left = p.plane_elems - begin;
  const int len = int(left < p.chunk_elems ? left : p.chunk_elems);
  const float part = block_sum(chunk_partial(plane_x + begin, len), scratch);

  float S = part;  // the plane sum, once every chunk is in
  if (p.chunks_per_plane > 1) {
    if (threadIdx.x == 0) {
      ws.chunk_sum[int64_t(plane) * p.chunks_per_plane + chunk] = part;
      __threadfence();  // the sum is visible device-wide before the count says so
      const unsigned done = atomicAdd(&ws.plane_done[plane], 1u);
      last_of_plane = done == unsigned(p.chunks_per_plane - 1);
      // Every other block of the plane has counted: reset for the next launch, which runs after
      // this one in stream order, so no extra memset is needed before it.
      if (last_of_plane) {
        ws.plane_done[plane] = 0u;
        __threadfence();
      }
    }
    __syncthreads();
    if (!last_of_plane) return;
    // 2a. S in chunk order (a fixed tree: the same value on every run).
    const float mine = int(threadIdx.x) < p.chunks_per_plane
                           ? __ldcg(ws.chunk_sum + int64_t(plane) * p.chunks_per_plane + threadIdx.x)
                           : 0.0f;
    S = block_sum(mine, scratch);
  }

  // 2b. R for every tap.
  float* R = ws.tap_sum + int64_t(plane) * p.taps;
  if (!p.has_border) {
    for (int t = threadIdx.x; t < p.taps; t += kBlock) R[t] = S;
  } else {
    for (int t = 0; t < p.taps; ++t) {  // uniform over the block
      const int kh = t / c.kernel_w, kw = t % c.kernel_w;
      const Span rows = tap_span(c.in_h, c.out_h, c.stride_h, c.padding_h, c.dilation_h, kh);
      const Span cols = tap_span(c.in_w, c.out_w, c.stride_w, c.padding_w, c.dilation_w, kw);
      const TapPlan tp = plan_tap(rows, cols, c.in_h, c.in_w);
      float r = tp.mode == TapMode::Whole ? S : 0.0f;
      if (tp.mode == TapMode::Direct || tp.mode == TapMode::Frame) {
        float mine = 0.0f;
#pragma unroll
        for (int i = 0; i < 4; ++i) mine += rect_partial(plane_x, c.in_w, tp.rect[i]);
        const float v = block_sum(mine, scratch);
        r = tp.mode == TapMode::Direct ? v : S - v;
      }
      if (threadIdx.x == 0) R[t] = r;
    }
  }
  __syncthreads();  // R (global, written by this block) is visible to the whole block

  // 3. Contract with the weights of this input channel.
  const int ci = plane % c.in_channels;
  const int n = plane / c.in_channels;
  const float* w_ci = weight + int64_t(ci) * c.out_per_group * p.taps;
  double* contrib = ws.contrib + int64_t(plane) * c.out_per_group;  // plane = n*Cin + ci
  for (int j = threadIdx.x; j < c.out_per_group; j += kBlock) {
    const float* w = w_ci + int64_t(j) * p.taps;
    double a = 0.0;
    for (int t = 0; t < p.taps; ++t) a += double(__ldg(w + t)) * double(R[t]);
    contrib[j] = a;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned done = atomicAdd(&ws.sample_done[n], 1u);
    last_of_sample = done == unsigned(c.in_channels - 1);
    if (last_of_sample) ws.sample_done[n] = 0u;  // as for plane_done: ready for the next launch
  }
  __syncthreads();
  if (!last_of_sample) return;
  __threadfence();

  // 4. Epilogue for sample n, 32 channels at a time: lane l takes channel base + l, warp w
  //    sums its slots ci = w, w + kWarps, ... (coalesced: consecutive lanes, consecutive co),
  //    warp 0 adds the kWarps slices in warp order and folds the channel into its lse pair.
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32;
  float m = -INFINITY, s = 0.0f;
  for (int base = 0; base < c.out_channels; base += 32) {
    const int co = base + lane;
    double slot_sum = 0.0;
    if (co < c.out_channels) {
      const int gco = co / c.out_per_group;
      const double* src = ws.contrib + (int64_t(n) * c.in_channels + int64_t(gco) * c.in_per_group) * c.out_per_group +
                          (co - gco * c.out_per_group);
      // 4 loads in flight: 8 would take 42 registers instead of 40, 5 resident blocks per SM
      // instead of 6 for the streaming pass.
#pragma unroll 4
      for (int k = warp; k < c.in_per_group; k += kWarps) slot_sum += __ldcg(src + int64_t(k) * c.out_per_group);
    }
    slice[warp][lane] = slot_sum;
    __syncthreads();
    if (warp == 0 && co < c.out_channels) {
      double acc = 0.0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) acc += slice[w][lane];
      const float pv = float(double(__ldg(conv_bias + co)) + acc * p.inv_out_plane);
      pooled[int64_t(n) * c.out_channels + co] = pv;
      lse_push(m, s, pv + __ldg(bias + co));
    }
    __syncthreads();  // slice is rewritten for the next 32 channels
  }
  if (warp == 0) {
    warp_allreduce_lse(m, s);
    if (lane == 0) y[n] = p.scale * lse_finish(m, s);
  }
}

// ---- stage 06 kernels: end -----------------------------------------------------------------

/// Chunking: at least kMinChunkElems floats a block (so the fixed cost of a block is small next
/// to its loads) and at most kMaxChunksPerPlane chunks a plane (so the workspace stays small).
struct Chunking {
  int64_t chunk_elems;
  int chunks_per_plane;
};
Chunking chunking(const Problem& p) {
  const int64_t hw = p.in_h * p.in_w;
  int64_t chunk = kMinChunkElems;
  if ((hw + chunk - 1) / chunk > kMaxChunksPerPlane) {
    const int64_t needed = (hw + kMaxChunksPerPlane - 1) / kMaxChunksPerPlane;
    chunk = (needed + kChunkTile - 1) / kChunkTile * kChunkTile;  // whole tiles
  }
  return {chunk, int((hw + chunk - 1) / chunk)};
}

/// Byte offsets of the workspace arrays; [0, zeroed) holds the counters (zero between launches).
struct Layout {
  size_t plane_done, sample_done, contrib, chunk_sum, tap_sum, zeroed, total;
};
size_t align16(size_t b) { return (b + 15) / 16 * 16; }
Layout make_layout(const Problem& p) {
  const size_t planes = size_t(p.batch * p.in_channels);
  Layout l{};
  l.plane_done = 0;
  l.sample_done = align16(l.plane_done + planes * sizeof(unsigned));
  l.zeroed = l.sample_done + size_t(p.batch) * sizeof(unsigned);
  l.contrib = align16(l.zeroed);
  l.chunk_sum = align16(l.contrib + planes * size_t(p.out_per_group()) * sizeof(double));
  l.tap_sum = align16(l.chunk_sum + planes * size_t(chunking(p).chunks_per_plane) * sizeof(float));
  l.total = l.tap_sum + planes * size_t(p.taps()) * sizeof(float);
  return l;
}

/// O(N*Cin*(taps + chunks_per_plane + Cout/g)): independent of the image size.
size_t workspace_bytes(const Problem& p) { return make_layout(p).total; }

/// Host-side parameters; checks tap_span against valid_input_range (the oracle's) on every tap.
FusedParams fused_params(const Problem& p) {
  FusedParams f{};
  f.conv = conv_params(p);
  const Chunking ch = chunking(p);
  f.plane_elems = p.in_h * p.in_w;
  f.chunk_elems = ch.chunk_elems;
  f.chunks_per_plane = ch.chunks_per_plane;
  f.taps = int(p.taps());
  f.inv_out_plane = 1.0 / (double(p.out_h()) * double(p.out_w()));
  f.scale = float(p.scale);
  const ConvParams& c = f.conv;
  // tap_span's 32-bit arithmetic: |padding| + out + (kernel - 1)*dilation + stride must fit.
  const auto fits32 = [](int64_t out, int64_t pad, int64_t k, int64_t dil, int64_t stride) {
    return out + pad + (k - 1) * dil + stride <= int64_t(2147483647);
  };
  if (!fits32(p.out_h(), p.padding.h, p.kernel_size.h, p.dilation.h, p.stride.h) ||
      !fits32(p.out_w(), p.padding.w, p.kernel_size.w, p.dilation.w, p.stride.w))
    throw std::runtime_error("stage 06: padding + output size + (kernel - 1)*dilation exceeds 2^31 - 1 (" +
                             p.describe() + ")");
  bool border = false;
  for (int k = 0; k < c.kernel_h; ++k) {
    const Span s = tap_span(c.in_h, c.out_h, c.stride_h, c.padding_h, c.dilation_h, k);
    const InputRange r = valid_input_range(p.in_h, p.out_h(), p.stride.h, p.padding.h, p.dilation.h, k);
    if (s.lo != r.lo || s.hi != r.hi) throw std::logic_error("stage 06: tap_span disagrees with valid_input_range (rows)");
    border |= s.lo != 0 || s.hi != c.in_h;
  }
  for (int k = 0; k < c.kernel_w; ++k) {
    const Span s = tap_span(c.in_w, c.out_w, c.stride_w, c.padding_w, c.dilation_w, k);
    const InputRange r = valid_input_range(p.in_w, p.out_w(), p.stride.w, p.padding.w, p.dilation.w, k);
    if (s.lo != r.lo || s.hi != r.hi) throw std::logic_error("stage 06: tap_span disagrees with valid_input_range (columns)");
    border |= s.lo != 0 || s.hi != c.in_w;
  }
  f.has_border = border ? 1 : 0;
  return f;
}

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  p.validate();
  const FusedParams f = fused_params(p);
  const Layout l = make_layout(p);
  char* base = static_cast<char*>(a.workspace);
  const Workspace ws{reinterpret_cast<unsigned*>(base + l.plane_done),
                     reinterpret_cast<unsigned*>(base + l.sample_done),
                     reinterpret_cast<double*>(base + l.contrib),
                     reinterpret_cast<float*>(base + l.chunk_sum), reinterpret_cast<float*>(base + l.tap_sum)};
  const long long blocks = (long long)p.batch * p.in_channels * f.chunks_per_plane;
  const unsigned grid = blocks_for(blocks * kBlock, kBlock, "pool_before_conv_fused");

  a.marks.begin(Phase::Fused);  // the counters are zero from the previous launch: no memset
  pool_before_conv_fused<<<grid, kBlock, 0, a.stream>>>(f, a.in.x, a.in.weight, a.in.conv_bias,
                                                       a.in.bias, ws, a.pooled, a.y);
  CUDA_CHECK_LAUNCH("pool_before_conv_fused");
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "linearity: pool x first (border strips), tiny contraction, one launch";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.computes_conv = false;             // only sums of x and a tiny contraction, no convT arithmetic
  d.deterministic = true;              // every sum in a fixed order: no floating-point atomics
  d.self_resetting_workspace = true;   // the counters are reset by the blocks that read them
}

}  // namespace ladder
