// Fresh inputs for every repetition of grade_timing: uniform [0, 1) values (like torch.rand) drawn
// on the device by the project's generator, common/toolkit/uniform01.hpp, from the seed the grader
// hands over for that repetition (grade_timing.cu, "Seeds"): the student's and the reference's
// processes draw the same values, and nothing before the hand-over can know them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.hpp"
#include "uniform01.hpp"

namespace ladder {
namespace {

/// The refills' generator stream, apart from make_inputs' (1-6) and the pool-only tensor's (80, 81).
constexpr uint64_t kFreshStream = 90;

/// Fills data[0..n) (device memory, fp32) with repetition `rep`'s values in [0, 1): the project's
/// counter-based generator (common/toolkit/uniform01.hpp) at indices rep*n + i of stream kFreshStream
/// under `seed` (the grader's seed of that repetition).
/// Grid-stride loop: any grid covers any n.
__global__ void fill_fresh(float* data, int64_t n, uint64_t seed, uint64_t rep) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    data[i] = uniform01(seed, kFreshStream, rep * uint64_t(n) + uint64_t(i));
}

/// Enqueues fill_fresh over data[0..n) on `stream`: repetition `rep`'s input. Throws CudaError.
inline void refill_fresh(float* data, int64_t n, uint64_t seed, uint64_t rep, cudaStream_t stream) {
  const unsigned grid = unsigned(std::clamp<int64_t>((n + 255) / 256, 1, 65535));
  fill_fresh<<<grid, 256, 0, stream>>>(data, n, seed, rep);
  CUDA_CHECK_LAUNCH("fill_fresh");
}

}  // namespace
}  // namespace ladder
