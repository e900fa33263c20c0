// Rung 03: a block-wide tree in shared memory. What changed from rung 02: one block per row
// instead of one atomic per element. Each thread first folds a strided slice of the row (a
// block-stride loop), then the block halves its partials in shared memory (sequential
// addressing: thread t adds t + stride, so active threads stay contiguous and banks distinct),
// once for the max and once for the sum. The shared memory holds one float per thread: it is
// sized by the block (blockDim.x floats, dynamic), never by the row, so any S fits.
#include "../../device/geometry.hpp"
#include "../../device/pool_conv.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL
#include "todo.cuh"     // ladder_todo: the handout's stubs

namespace ladder::p38 {
namespace {

constexpr int kBlock = 256;  // a power of two: the tree halves it

enum class Op { Max, Sum };

/// Combines one value per thread over the block through `partial` (blockDim.x floats); every
/// thread gets the result.
template <Op op>
__device__ float block_tree(float v, float* partial) {
  // BEGIN SOLUTION
  // STUB: ladder_todo("p38-03.1", "block_tree: combine v over the block, a tree in shared memory");
  // STUB: (void)partial;
  // STUB: return v;
  partial[threadIdx.x] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      const float o = partial[threadIdx.x + stride];
      partial[threadIdx.x] = op == Op::Max ? fmaxf(partial[threadIdx.x], o) : partial[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const float result = partial[0];
  __syncthreads();  // before the next call overwrites partial
  return result;
  // END SOLUTION
}

/// One block per row of z (in place): z <- softmax(z) * scale.
__global__ void softmax_block_per_row(Geometry g, const float* __restrict__ scale, float* __restrict__ z) {
  extern __shared__ float partial[];  // blockDim.x floats
  for (int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    float* v = z + row * g.spatial;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < g.spatial; i += blockDim.x) m = fmaxf(m, v[i]);
    m = block_tree<Op::Max>(m, partial);
    float sum = 0.f;
    for (int64_t i = threadIdx.x; i < g.spatial; i += blockDim.x) sum += expf(v[i] - m);
    sum = block_tree<Op::Sum>(sum, partial);
    const float factor = scale[row % g.out_channels] / sum;
    for (int64_t i = threadIdx.x; i < g.spatial; i += blockDim.x) v[i] = expf(v[i] - m) * factor;
  }
}

size_t workspace(const Problem38& p) { return pooled_bytes(make_geometry(p)); }

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  a.mark("conv");
  launch_pool_conv_clamp(g, a.in.x, a.in.weight, a.in.bias, static_cast<float*>(a.workspace), a.out, a.stream);
  a.mark("softmax");
  const unsigned grid = unsigned(g.rows < 65536 ? g.rows : 65536);  // a block-stride loop takes the rest
  softmax_block_per_row<<<grid, kBlock, kBlock * sizeof(float), a.stream>>>(g, a.in.scale, a.out);
  CUDA_CHECK_LAUNCH("softmax_block_per_row");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "one block per row, shared-memory tree sized by the block",
                      nullptr, workspace, run};
  return r;
}

}  // namespace ladder::p38
