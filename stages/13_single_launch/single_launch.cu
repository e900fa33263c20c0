// Stage 13: one launch. Stage 12's pieces, the same arithmetic in the same order, in a single
// kernel that waits for nothing: instead of a kernel boundary between the phases, a counter
// per plane and a counter per sample find the block that finishes last (the last-block
// pattern), and that block carries on with the next phase:
//  - every block:                 its chunk of one (n, ci) plane (stage 12's plane_chunk_sums);
//  - the plane's last block:      S from the chunk sums, R for every tap (lib/tap_window.cuh),
//                                 the slots sum_taps w*R (stage 12's plane_contract);
//  - the sample's last plane's:   the slots over ci (stage 12's sum_input_channels) and the
//                                 epilogue, + bias, log-sum-exp over co, x scale.
// The counters start at zero and every launch leaves them at zero (the block that reads a
// counter's final value resets it), so the runner zeroes the workspace once, not per launch.
// Two runs give the same bits: which block finishes last changes from run to run, but no sum
// depends on it.
#include <cuda/atomic>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "lib/chunk_sum.cuh"
#include "lib/register_stage.hpp"
#include "lib/tap_window.cuh"
#include "todo.cuh"
#include "lib/warp_reduce.cuh"
#include "logsumexp.hpp"
#include "stage.hpp"

namespace ladder {
namespace {

// ---- stage 13 kernels: begin ---------------------------------------------------------------

constexpr int kBlock = 256;  // threads per block
constexpr int kWarps = kBlock / 32;
constexpr int kUnroll = 8;   // 16-byte loads per thread per loop trip, all issued before their adds
constexpr int64_t kChunkTile = int64_t(kBlock) * kUnroll * 4;  // floats one pass of a block reads
constexpr int64_t kMinChunkElems = 2 * kChunkTile;              // 16384 floats = 64 KiB
constexpr int kMaxChunksPerPlane = 64;  // bounds the chunk-sum workspace; larger planes, larger chunks
static_assert(kMaxChunksPerPlane <= kBlock, "the plane's last block adds one chunk sum per thread");

/// Sizes (no compile-time shapes) and the chunking chosen on the host.
struct Params {
  ConvParams conv;
  int64_t plane_elems;   // H*W
  int64_t chunk_elems;   // floats per chunk (the last chunk of a plane may be shorter)
  int chunks_per_plane;  // <= kMaxChunksPerPlane
  int taps;              // kH*kW
  bool has_border;       // some tap's window is not the whole plane (taps_have_border)
  double inv_out_plane;  // 1 / (Hout*Wout)
  float scale;
};

/// Workspace arrays. The two counters are zero between launches; every other element is
/// written before it is read.
struct Workspace {
  float* chunk_sum;       // (N*Cin, chunks_per_plane)
  float* tap_sum;         // (N*Cin, kH*kW)  R
  double* contrib;        // (N*Cin, Cout/g) sum_taps w*R of plane (n, ci) for each co of its group
  unsigned* plane_done;   // (N*Cin)  chunks of the plane finished
  unsigned* sample_done;  // (N)      planes of the sample finished
};

/// Pool: the sum of one chunk of one plane of x, returned to every thread of the block.
__device__ inline float chunk_sum_of(const Params& p, const float* __restrict__ x, int plane, int chunk,
                                     float* scratch) {
  // BEGIN SOLUTION 12
  // STUB: ladder_todo("13.1", "chunk_sum_of (as in stage 12): the block's sum of one chunk, to every thread");
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
  // BEGIN SOLUTION 12
  // STUB: ladder_todo("13.2", "contract_plane (as in stage 12): R of every tap, then contrib in fp64");
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
/// co < Cout. The slots were written by other blocks of this launch: read through L2 (__ldcg),
/// never from this SM's L1, which may hold a stale copy of their line.
__device__ inline float channel_tile_pooled(const Params& p, const double* contrib,
                                            const float* __restrict__ conv_bias, int n, int base,
                                            double (*slice)[32]) {
  const ConvParams& c = p.conv;
  // BEGIN SOLUTION 12 13
  // STUB: ladder_todo("13.3", "channel_tile_pooled (stage 12's), the slots read with __ldcg");
  // STUB: ladder_unused(c, p, contrib, conv_bias, n, base, slice);
  // STUB: return 0.0f;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) / 32, co = base + lane;
  double part = 0.0;
  if (co < c.out_channels) {
    const int g = co / c.out_per_group;
    const double* src = contrib + (int64_t(n) * c.in_channels + int64_t(g) * c.in_per_group) * c.out_per_group +
                        (co - g * c.out_per_group);
    // 4 loads in flight: 8 take more registers, which this one kernel's streaming part pays for
    // in resident blocks.
#pragma unroll 4
    for (int k = warp; k < c.in_per_group; k += kWarps) part += __ldcg(src + int64_t(k) * c.out_per_group);
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

/// The last-block pattern. Every thread of a block calls this once the block has written what
/// it publishes; it counts the block in `counter`, which `expected` blocks share, and returns
/// true in every thread of the block that arrives last. Ordering: the first barrier puts the
/// block's writes before thread 0's atomic add, whose release makes them visible device-wide
/// before the count does; the block that reads the final count issues an acquire fence, after
/// which (and after the second barrier) every other block's published writes are visible to it.
/// Only the last block pays for the acquire. It also resets the counter: no other block touches
/// it again in this launch, and the next launch runs after this one in stream order, so it
/// finds the counter at zero with no memset.
__device__ inline bool arrive_last(unsigned* counter, unsigned expected, bool* last) {
  // BEGIN SOLUTION
  // STUB: ladder_todo("13.4", "arrive_last: count the block (release); the last acquires, resets, returns true");
  // STUB: ladder_unused(counter, expected, last);
  // STUB: return false;
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(*counter);
    *last = count.fetch_add(1u, cuda::memory_order_release) == expected - 1u;
    if (*last) {
      cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_device);
      count.store(0u, cuda::memory_order_relaxed);  // ready for the next launch
    }
  }
  __syncthreads();
  return *last;
  // END SOLUTION
}

/// The whole pipeline in one launch: x -> pooled, y.
///
/// x (N, Cin, H, W), weight (Cin, Cout/g, kH, kW), conv_bias (Cout), bias (Cout): fp32, NCHW.
/// Outputs pooled (N, Cout) and y (N). Grid: one block of kBlock threads per (plane, chunk),
/// blockIdx.x = plane*chunks_per_plane + chunk, plane = n*Cin + ci; offsets into x are 64-bit.
/// The counters must be zero at launch; they are zero again when it ends.
__global__ void __launch_bounds__(kBlock)
    pool_before_conv_fused(Params p, const float* __restrict__ x, const float* __restrict__ weight,
                           const float* __restrict__ conv_bias, const float* __restrict__ bias, Workspace ws,
                           float* __restrict__ pooled, float* __restrict__ y) {
  __shared__ float scratch[kWarps];
  __shared__ double slice[kWarps][32];
  __shared__ bool last;
  const ConvParams& c = p.conv;
  // 32-bit block arithmetic: blockIdx.x < 2^31, so plane < 2^31 too.
  const int plane = int(blockIdx.x / unsigned(p.chunks_per_plane));
  const int chunk = int(blockIdx.x) - plane * p.chunks_per_plane;

  // 1. Pool: this block's chunk.
  float S = chunk_sum_of(p, x, plane, chunk, scratch);
  if (p.chunks_per_plane > 1) {  // else S is the plane sum already
    if (threadIdx.x == 0) ws.chunk_sum[blockIdx.x] = S;
    if (!arrive_last(ws.plane_done + plane, unsigned(p.chunks_per_plane), &last)) return;
    const float* sums = ws.chunk_sum + int64_t(plane) * p.chunks_per_plane;
    const float chunk = int(threadIdx.x) < p.chunks_per_plane ? __ldcg(sums + threadIdx.x) : 0.0f;
    S = block_allreduce_sum<kBlock>(chunk, scratch);
  }

  // 2. Conv, by the plane's last block: R and the plane's slots.
  contract_plane(p, x, weight, plane, S, ws, scratch);
  const int n = plane / c.in_channels;
  if (!arrive_last(ws.sample_done + n, unsigned(c.in_channels), &last)) return;

  // 3. By the sample's last plane's block: pooled, 32 channels at a time, each folded into
  //    warp 0's online log-sum-exp pair (lane l takes channels l, l + 32, ...); then the epilogue.
  const int lane = int(threadIdx.x) & 31;
  float m = -INFINITY, s = 0.0f;
  for (int base = 0; base < c.out_channels; base += 32) {
    const float pv = channel_tile_pooled(p, ws.contrib, conv_bias, n, base, slice);
    const int co = base + lane;
    if (threadIdx.x < 32 && co < c.out_channels) {
      pooled[int64_t(n) * c.out_channels + co] = pv;
      lse_push(m, s, pv + __ldg(bias + co));
    }
  }
  if (threadIdx.x < 32) {
    warp_allreduce_lse(m, s);
    if (lane == 0) y[n] = p.scale * lse_finish(m, s);
  }
}

// ---- stage 13 kernels: end -----------------------------------------------------------------

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
  f.scale = float(p.scale);
  return f;
}

/// Byte offsets of the workspace arrays, 16-byte aligned; the counters last.
struct Layout {
  size_t chunk_sum, tap_sum, contrib, plane_done, sample_done, total;
};
size_t align16(size_t b) { return (b + 15) / 16 * 16; }
Layout make_layout(const Problem& p) {
  const size_t planes = size_t(p.batch * p.in_channels);
  Layout l{};
  l.chunk_sum = 0;
  l.tap_sum = align16(planes * size_t(make_params(p).chunks_per_plane) * sizeof(float));
  l.contrib = align16(l.tap_sum + planes * size_t(p.taps()) * sizeof(float));
  l.plane_done = align16(l.contrib + planes * size_t(p.out_per_group()) * sizeof(double));
  l.sample_done = align16(l.plane_done + planes * sizeof(unsigned));
  l.total = l.sample_done + size_t(p.batch) * sizeof(unsigned);
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
                     reinterpret_cast<double*>(base + l.contrib), reinterpret_cast<unsigned*>(base + l.plane_done),
                     reinterpret_cast<unsigned*>(base + l.sample_done)};
  const int64_t planes = p.batch * p.in_channels;

  a.marks.begin(Phase::Fused);  // the counters are zero from the previous launch: no memset
  pool_before_conv_fused<<<grid_of(planes * f.chunks_per_plane, "pool_before_conv_fused"), kBlock, 0, a.stream>>>(
      f, a.in.x, a.in.weight, a.in.conv_bias, a.in.bias, ws, a.pooled, a.y);
  CUDA_CHECK_LAUNCH("pool_before_conv_fused");
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "stage 12 in one launch: the last block of each plane and of each sample goes on";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
  d.computes_conv = false;             // sums of x and a contraction of the weights' size, no convT arithmetic
  d.deterministic = true;              // every sum in a fixed order: no floating-point atomics
  d.self_resetting_workspace = true;   // the counters are reset by the blocks that read their final value
}

}  // namespace ladder
