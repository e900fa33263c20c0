// Stage 12: pool before conv. The convolution is linear, so its global mean needs only sums of
// x, one window per tap (docs/problem.md, "Pooling before convolving: the linearity identity"):
//
//   pooled[n,co] = cb[co] + 1/(Hout*Wout) * sum_{ci in group(co)} sum_{kh,kw}
//                                             w[ci, co mod Cout/g, kh, kw] * R[n,ci,kh,kw]
//   R[n,ci,kh,kw] = sum of x[n,ci] over the rows and columns that tap reaches
//                 = the plane sum S[n,ci], minus a border frame where there is padding
//
// No convT output and no convT arithmetic; four short launches, every sum in an order fixed by
// the problem (no floating-point atomics: two runs give the same bits):
//  - pool:     plane_chunk_sums streams x once with 16-byte loads: one fp32 sum per chunk of
//              each (n, ci) plane;
//  - conv:     what is left of the convolution. plane_contract, one block per plane: S from the
//              chunk sums, R for every tap (lib/tap_window.cuh), and sum_taps w*R in fp64 for
//              each output channel of the plane's group, into a slot (n, ci, co) of its own;
//              sum_input_channels adds the slots over ci for each (n, co): pooled;
//  - epilogue: one warp per sample (lib/bias_logsumexp_warp.cuh).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/chunk_sum.cuh"
#include "lib/bias_logsumexp_warp.cuh"
#include "lib/register_stage.hpp"
#include "lib/tap_window.cuh"
#include "todo.cuh"
#include "lib/warp_reduce.cuh"
#include "stage.hpp"

namespace ladder {
namespace {

// ---- stage 12 kernels: begin ---------------------------------------------------------------

constexpr int kBlock = 256;  // threads per block, every kernel
constexpr int kWarps = kBlock / 32;
constexpr int kUnroll = 8;   // 16-byte loads per thread per loop trip, all issued before their adds
constexpr int64_t kChunkTile = int64_t(kBlock) * kUnroll * 4;  // floats one pass of a block reads
constexpr int64_t kMinChunkElems = 2 * kChunkTile;              // 16384 floats = 64 KiB
constexpr int kMaxChunksPerPlane = 64;  // bounds the chunk-sum workspace; larger planes, larger chunks
static_assert(kMaxChunksPerPlane <= kBlock, "plane_contract adds one chunk sum per thread");

/// Sizes (no compile-time shapes) and the chunking chosen on the host.
struct Params {
  ConvParams conv;
  int64_t plane_elems;   // H*W
  int64_t chunk_elems;   // floats per chunk (the last chunk of a plane may be shorter)
  int chunks_per_plane;  // <= kMaxChunksPerPlane
  int taps;              // kH*kW
  bool has_border;       // some tap's window is not the whole plane (taps_have_border)
  double inv_out_plane;  // 1 / (Hout*Wout)
};

/// Workspace arrays; each element is written before it is read, so it may hold anything.
struct Workspace {
  float* chunk_sum;  // (N*Cin, chunks_per_plane)
  float* tap_sum;    // (N*Cin, kH*kW)  R
  double* contrib;   // (N*Cin, Cout/g) sum_taps w*R of plane (n, ci) for each co of its group
};

/// Pool: the sum of one chunk of one plane of x, returned to every thread of the block.
__device__ inline float chunk_sum_of(const Params& p, const float* __restrict__ x, int plane, int chunk,
                                     float* scratch) {
  // BEGIN SOLUTION
  // STUB: ladder_todo("12.1", "chunk_sum_of: the block's sum of one chunk of a plane, to every thread");
  // STUB: ladder_unused(p, x, plane, chunk, scratch);
  // STUB: return 0.0f;
  const int64_t begin = int64_t(chunk) * p.chunk_elems;
  const int64_t left = p.plane_elems - begin;
  const int len = int(left < p.chunk_elems ? left : p.chunk_elems);
  const float mine = chunk_partial_sum<kBlock, kUnroll>(x + int64_t(plane) * p.plane_elems + begin, len);
  return block_allreduce_sum<kBlock>(mine, scratch);
  // END SOLUTION
}

/// Conv, for one (n, ci) plane with sum S, by one block: R for every tap (lib/tap_window.cuh;
/// re-reads x only for border frames and small windows), then
/// contrib[n, ci, j] = sum_taps w[ci, j, tap]*R[tap] in fp64 for the Cout/g outputs j of the group.
__device__ inline void contract_plane(const Params& p, const float* __restrict__ x,
                                      const float* __restrict__ weight, int plane, float S,
                                      const Workspace& ws, float* scratch) {
  const ConvParams& c = p.conv;
  // BEGIN SOLUTION
  // STUB: ladder_todo("12.2", "contract_plane: R of every tap, then contrib in fp64");
  // STUB: ladder_unused(c, p, x, weight, plane, S, ws, scratch);
  float* R = ws.tap_sum + int64_t(plane) * p.taps;
  plane_tap_sums(c, p.has_border, x + int64_t(plane) * p.plane_elems, S, R,
                 [&](float v) { return block_allreduce_sum<kBlock>(v, scratch); });
  __syncthreads();  // R (global, written by this block) is visible to the whole block

  const int ci = plane % c.in_channels;
  const float* w_ci = weight + int64_t(ci) * c.out_per_group * p.taps;
  double* contrib = ws.contrib + int64_t(plane) * c.out_per_group;  // plane = n*Cin + ci
  for (int j = threadIdx.x; j < c.out_per_group; j += kBlock) {
    const float* w = w_ci + j * p.taps;  // (Cout/g)*taps < 2^31: Problem::validate
    double a = 0.0;
    for (int t = 0; t < p.taps; ++t) a += double(__ldg(w + t)) * double(R[t]);
    contrib[j] = a;
  }
  // END SOLUTION
}

/// Conv, the sum over input channels for the 32 channels co = base + lane of sample n:
/// pooled = cb[co] + (sum of the Cin/g slots of co's group) / (Hout*Wout), in fp64 with one
/// fp32 rounding at the end. Warp w adds the slots ci = w, w + kWarps, ... (consecutive lanes
/// read consecutive co: coalesced), then warp 0 adds the kWarps partial sums in warp order: a
/// fixed order. All threads must call it (two barriers); the result is valid in warp 0 for
/// co < Cout.
__device__ inline float channel_tile_pooled(const Params& p, const double* contrib,
                                            const float* __restrict__ conv_bias, int n, int base,
                                            double (*slice)[32]) {
  const ConvParams& c = p.conv;
  // BEGIN SOLUTION
  // STUB: ladder_todo("12.3", "channel_tile_pooled: pooled of channel base + lane, fp64, fixed order");
  // STUB: ladder_unused(c, p, contrib, conv_bias, n, base, slice);
  // STUB: return 0.0f;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32, co = base + lane;
  double part = 0.0;
  if (co < c.out_channels) {
    const int g = co / c.out_per_group;
    const double* src = contrib + (int64_t(n) * c.in_channels + int64_t(g) * c.in_per_group) * c.out_per_group +
                        (co - g * c.out_per_group);
#pragma unroll 4
    for (int k = warp; k < c.in_per_group; k += kWarps) part += src[int64_t(k) * c.out_per_group];
  }
  slice[warp][lane] = part;
  __syncthreads();
  float pooled = 0.0f;
  if (warp == 0 && co < c.out_channels) {
    double acc = 0.0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) acc += slice[w][lane];
    pooled = float(double(__ldg(conv_bias + co)) + acc * p.inv_out_plane);
  }
  __syncthreads();  // slice may be rewritten at once
  return pooled;
  // END SOLUTION
}

/// Pool. x (N, Cin, H, W) fp32 NCHW; chunk_sum (N*Cin, chunks_per_plane). Grid: one block of
/// kBlock threads per (plane, chunk), blockIdx.x = plane*chunks_per_plane + chunk, plane =
/// n*Cin + ci; offsets into x are 64-bit.
__global__ void __launch_bounds__(kBlock)
    plane_chunk_sums(Params p, const float* __restrict__ x, Workspace ws) {
  __shared__ float scratch[kWarps];
  // 32-bit block arithmetic: blockIdx.x < 2^31, so plane < 2^31 too.
  const int plane = int(blockIdx.x / unsigned(p.chunks_per_plane));
  const int chunk = int(blockIdx.x) - plane * p.chunks_per_plane;
  const float sum = chunk_sum_of(p, x, plane, chunk, scratch);
  if (threadIdx.x == 0) ws.chunk_sum[blockIdx.x] = sum;
}

/// Conv, per plane. weight (Cin, Cout/g, kH, kW) fp32. Grid: one block of kBlock threads per
/// plane = n*Cin + ci. S is the chunk sums added in block_allreduce_sum's fixed tree
/// (lib/warp_reduce.cuh) (thread t takes chunk t); writes the plane's R (tap_sum) and its Cout/g
/// slots (contrib).
__global__ void __launch_bounds__(kBlock)
    plane_contract(Params p, const float* __restrict__ x, const float* __restrict__ weight, Workspace ws) {
  __shared__ float scratch[kWarps];
  const int plane = int(blockIdx.x);
  const float* sums = ws.chunk_sum + int64_t(plane) * p.chunks_per_plane;
  const float chunk = int(threadIdx.x) < p.chunks_per_plane ? sums[threadIdx.x] : 0.0f;
  const float S = block_allreduce_sum<kBlock>(chunk, scratch);
  contract_plane(p, x, weight, plane, S, ws, scratch);
}

/// Conv, per (n, 32 output channels): pooled (N, Cout) from the slots. conv_bias (Cout) fp32.
/// Grid: one block of kBlock threads per (n, tile), blockIdx.x = n*tiles + tile.
__global__ void __launch_bounds__(kBlock)
    sum_input_channels(Params p, const float* __restrict__ conv_bias, Workspace ws, float* __restrict__ pooled) {
  __shared__ double slice[kWarps][32];
  const int tiles = (p.conv.out_channels + 31) / 32;
  const int n = int(blockIdx.x) / tiles, base = (int(blockIdx.x) - n * tiles) * 32;
  const float pv = channel_tile_pooled(p, ws.contrib, conv_bias, n, base, slice);
  const int co = base + int(threadIdx.x);
  if (threadIdx.x < 32 && co < p.conv.out_channels) pooled[int64_t(n) * p.conv.out_channels + co] = pv;
}

// ---- stage 12 kernels: end -----------------------------------------------------------------

/// Chunking: at least kMinChunkElems floats a block (so the fixed cost of a block is small next
/// to its loads) and at most kMaxChunksPerPlane chunks a plane (so the workspace stays small).
Params make_params(const Problem& p) {
  Params f{};
  f.conv = conv_params(p);
  f.plane_elems = p.in_h * p.in_w;
  f.chunk_elems = kMinChunkElems;
  if ((f.plane_elems + f.chunk_elems - 1) / f.chunk_elems > kMaxChunksPerPlane) {
    const int64_t needed = (f.plane_elems + kMaxChunksPerPlane - 1) / kMaxChunksPerPlane;
    f.chunk_elems = (needed + kChunkTile - 1) / kChunkTile * kChunkTile;  // whole tiles
  }
  f.chunks_per_plane = int((f.plane_elems + f.chunk_elems - 1) / f.chunk_elems);
  f.taps = int(p.taps());
  f.has_border = taps_have_border(p);
  f.inv_out_plane = 1.0 / (double(p.out_h()) * double(p.out_w()));
  return f;
}

/// Byte offsets of the workspace arrays, 16-byte aligned.
struct Layout {
  size_t chunk_sum, tap_sum, contrib, total;
};
size_t align16(size_t b) { return (b + 15) / 16 * 16; }
Layout make_layout(const Problem& p) {
  const size_t planes = size_t(p.batch * p.in_channels);
  Layout l{};
  l.chunk_sum = 0;
  l.tap_sum = align16(planes * size_t(make_params(p).chunks_per_plane) * sizeof(float));
  l.contrib = align16(l.tap_sum + planes * size_t(p.taps()) * sizeof(float));
  l.total = l.contrib + planes * size_t(p.out_per_group()) * sizeof(double);
  return l;
}

/// O(N*Cin*(chunks_per_plane + taps + Cout/g)): independent of the image size.
size_t workspace_bytes(const Problem& p) { return make_layout(p).total; }

/// A grid of `blocks` blocks, or a std::runtime_error naming the kernel past CUDA's limit.
unsigned grid_of(int64_t blocks, const char* kernel) {
  if (blocks > 2147483647LL)
    throw std::runtime_error(std::string("launch configuration of ") + kernel + ": " + std::to_string(blocks) +
                             " blocks exceed CUDA's grid limit of 2^31 - 1");
  return unsigned(blocks);
}

void run(const GpuStageArgs& a) {
  const Problem& p = a.problem;
  p.validate();
  const Params f = make_params(p);
  const Layout l = make_layout(p);
  char* base = static_cast<char*>(a.workspace);
  const Workspace ws{reinterpret_cast<float*>(base + l.chunk_sum), reinterpret_cast<float*>(base + l.tap_sum),
                     reinterpret_cast<double*>(base + l.contrib)};
  const int64_t planes = p.batch * p.in_channels;

  a.marks.begin(Phase::Pool);
  plane_chunk_sums<<<grid_of(planes * f.chunks_per_plane, "plane_chunk_sums"), kBlock, 0, a.stream>>>(f, a.in.x, ws);
  CUDA_CHECK_LAUNCH("plane_chunk_sums");

  a.marks.begin(Phase::Conv);
  plane_contract<<<grid_of(planes, "plane_contract"), kBlock, 0, a.stream>>>(f, a.in.x, a.in.weight, ws);
  CUDA_CHECK_LAUNCH("plane_contract");
  const int64_t tiles = (p.out_channels + 31) / 32;
  sum_input_channels<<<grid_of(p.batch * tiles, "sum_input_channels"), kBlock, 0, a.stream>>>(
      f, a.in.conv_bias, ws, a.pooled);
  CUDA_CHECK_LAUNCH("sum_input_channels");

  a.marks.begin(Phase::Epilogue);
  launch_bias_logsumexp_warp(p, a.pooled, a.in.bias, a.y, a.stream);
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "linearity: sum each input plane (minus border frames), contract with the weights";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.computes_conv = false;  // sums of x and a contraction of the weights' size, no convT arithmetic
  d.deterministic = true;   // every sum in a fixed order: no floating-point atomics
}

}  // namespace ladder
