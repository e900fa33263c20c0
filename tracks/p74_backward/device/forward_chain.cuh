// The elementwise chain between the convolution and the pool, z = lrelu(multiplier[c] * lrelu(y)),
// as device functions every forward rung shares, and the grid size of the grid-stride kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/toolkit/cuda_check.hpp"
#include "geometry.hpp"

namespace ladder::p74 {

/// Blocks for a grid-stride loop over n elements: one thread per element up to 2^30 threads,
/// then each thread takes several. Throws InvalidProblem (grid_for) past CUDA's grid limit.
inline unsigned capped_grid(int64_t n, int block, const char* kernel) {
  const int64_t cap = int64_t(1) << 30;
  return grid_for(n < cap ? n : cap, block, kernel);
}

/// LeakyReLU as PyTorch computes it: v if v > 0, else slope*v (so lrelu(-0) = -0, NaN stays NaN).
/// `slope` is negative_slope rounded to fp32 (Geometry::slope).
__device__ __forceinline__ float lrelu(float v, float slope) { return v > 0.f ? v : slope * v; }

/// The model's chain from the convolution output y to the pool's input z for a channel whose
/// multiplier is `mult`: lrelu(mult * lrelu(y)), each step rounded to fp32 as PyTorch does.
__device__ __forceinline__ float chain(float y, float mult, float slope) {
  return lrelu(mult * lrelu(y, slope), slope);
}

}  // namespace ladder::p74
