// The counter-based generator every input of the project comes from: uniform floats in [0, 1)
// for (seed, stream, index), the same bits on the host (common/model/inputs.cpp, ladder/pool_only.cpp)
// and on the device (grader/fresh_inputs.cuh).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LADDER_HOST_DEVICE __host__ __device__
#else
#define LADDER_HOST_DEVICE
#endif

namespace ladder {

/// SplitMix64's finalizer: a bijective mix, good enough to turn counters into random bits.
LADDER_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The counter-based generator: uniform float in [0, 1) for (seed, stream, index); stream < 256.
LADDER_HOST_DEVICE inline float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t bits = mix64(mix64(seed ^ (stream << 56)) + index);
  return float(bits >> 40) * (1.0f / 16777216.0f);  // 24 random bits: exact in fp32, < 1
}

}  // namespace ladder
