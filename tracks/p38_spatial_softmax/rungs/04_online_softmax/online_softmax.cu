// Rung 04: warp shuffles and the online softmax. What changed from rung 03: one pass over the row
// finds both the max and the sum. Each thread carries a pair (m, s), the largest value it has
// seen and the sum of exp(v - m) so far; a new value larger than m rescales s by exp(m_old -
// m_new). Pairs merge the same way, first across the warp by __shfl_xor_sync (no shared memory,
// no barrier), then across the block's warps through 32 slots of shared memory. The row is read
// twice (the pass, then the write) instead of three times.
#include "../../device/geometry.hpp"
#include "../../device/pool_conv.cuh"
#include "../../device/warp.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "todo.cuh"     // ladder_todo: the handout's stubs

namespace ladder::p38 {
namespace {

constexpr int kBlock = 256;  // a multiple of 32, at most 1024 (32 warps: the slots below)

/// One block per row of z (in place): z <- softmax(z) * scale.
__global__ void softmax_online(Geometry g, const float* __restrict__ scale, float* __restrict__ z) {
  // BEGIN SOLUTION
  // STUB: // (what the merge across the block's warps needs: yours to declare)
  __shared__ MaxSum slots[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // END SOLUTION
  for (int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    float* v = z + row * g.spatial;
    // BEGIN SOLUTION
    // STUB: ladder_todo("p38-04.1", "softmax_online: one pass carrying (max, sum), merged into b");
    // STUB: const MaxSum b{0.f, 1.f};
    MaxSum t{-INFINITY, 0.f};
    for (int64_t i = threadIdx.x; i < g.spatial; i += blockDim.x) {
      const float x = v[i];
      if (x > t.m) {
        t.s = t.s * expf(t.m - x) + 1.f;  // exp(-inf) = 0 on the first value
        t.m = x;
      } else {
        t.s += expf(x - t.m);
      }
    }
    t = warp_merge(t);
    if (lane == 0) slots[warp] = t;
    __syncthreads();
    MaxSum b = lane < warps ? slots[lane] : MaxSum{-INFINITY, 0.f};
    b = warp_merge(b);  // every warp merges the slots itself: no second barrier to broadcast
    // END SOLUTION
    const float factor = scale[row % g.out_channels] / b.s;
    for (int64_t i = threadIdx.x; i < g.spatial; i += blockDim.x) v[i] = expf(v[i] - b.m) * factor;
    __syncthreads();  // slots are rewritten for the next row
  }
}

size_t workspace(const Problem38& p) { return pooled_bytes(make_geometry(p)); }

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  a.mark("conv");
  launch_pool_conv_clamp(g, a.in.x, a.in.weight, a.in.bias, static_cast<float*>(a.workspace), a.out, a.stream);
  a.mark("softmax");
  const unsigned grid = unsigned(g.rows < 65536 ? g.rows : 65536);
  softmax_online<<<grid, kBlock, 0, a.stream>>>(g, a.in.scale, a.out);
  CUDA_CHECK_LAUNCH("softmax_online");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "warp shuffles, online (max, sum): one pass finds both",
                      nullptr, workspace, run};
  return r;
}

}  // namespace ladder::p38
