// Rung 02: atomics for the softmax's two reductions. What changed from rung 01: the softmax now
// has one thread per element, as the rest of the pipeline does. Each element does atomicMax on
// its row's max (fp32 mapped to an int that orders the same way), then, in a second kernel,
// atomicAdd of exp(z - max) into its row's sum. Every thread of a row hits the same address, so
// the atomics serialize in L2, and the sum's order (and its rounding) changes from run to run.
#include <climits>

#include "../../device/geometry.hpp"
#include "../../device/pool_conv.cuh"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p38 {
namespace {

/// An int that orders as the float does (for non-NaN floats): non-negative floats keep their
/// bits, negative ones have their magnitude bits flipped.
__device__ __forceinline__ int ordered(float v) {
  const int i = __float_as_int(v);
  return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float unordered(int i) { return __int_as_float(i >= 0 ? i : i ^ 0x7fffffff); }

__global__ void init_rows(int64_t rows, int* row_max, float* row_sum) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x) {
    row_max[r] = INT_MIN;
    row_sum[r] = 0.f;
  }
}

__global__ void atomic_row_max(Geometry g, const float* __restrict__ z, int* row_max) {
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    atomicMax(&row_max[i / g.spatial], ordered(z[i]));
}

__global__ void atomic_row_sum(Geometry g, const float* __restrict__ z, const int* __restrict__ row_max,
                               float* row_sum) {
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / g.spatial;
    atomicAdd(&row_sum[row], expf(z[i] - unordered(row_max[row])));
  }
}

__global__ void normalize(Geometry g, const int* __restrict__ row_max, const float* __restrict__ row_sum,
                          const float* __restrict__ scale, float* z) {
  const int64_t total = g.rows * g.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / g.spatial;
    z[i] = expf(z[i] - unordered(row_max[row])) * (scale[row % g.out_channels] / row_sum[row]);
  }
}

size_t workspace(const Problem38& p) {
  const Geometry g = make_geometry(p);
  return pooled_bytes(g) + 2 * aligned_bytes(size_t(g.rows) * 4);
}

void run(const RungArgs& a) {
  const Geometry g = make_geometry(a.problem);
  char* ws = static_cast<char*>(a.workspace);
  float* pooled = reinterpret_cast<float*>(ws);
  int* row_max = reinterpret_cast<int*>(ws + pooled_bytes(g));
  float* row_sum = reinterpret_cast<float*>(ws + pooled_bytes(g) + aligned_bytes(size_t(g.rows) * 4));
  a.mark("conv");
  launch_pool_conv_clamp(g, a.in.x, a.in.weight, a.in.bias, pooled, a.out, a.stream);
  a.mark("softmax");
  init_rows<<<grid_for(g.rows, 256, "init_rows"), 256, 0, a.stream>>>(g.rows, row_max, row_sum);
  CUDA_CHECK_LAUNCH("init_rows");
  const int64_t total = g.rows * g.spatial;
  const unsigned grid = grid_for(total < (int64_t(1) << 30) ? total : (int64_t(1) << 30), 256, "atomic softmax");
  atomic_row_max<<<grid, 256, 0, a.stream>>>(g, a.out, row_max);
  CUDA_CHECK_LAUNCH("atomic_row_max");
  atomic_row_sum<<<grid, 256, 0, a.stream>>>(g, a.out, row_max, row_sum);
  CUDA_CHECK_LAUNCH("atomic_row_sum");
  normalize<<<grid, 256, 0, a.stream>>>(g, row_max, row_sum, a.in.scale, a.out);
  CUDA_CHECK_LAUNCH("normalize");
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "softmax max and sum by one atomic per element", nullptr,
                      workspace, run, nullptr, /*deterministic=*/false};
  return r;
}

}  // namespace ladder::p38
