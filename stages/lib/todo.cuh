// What a handout's stubs call where a solution was taken out (scripts/assignment.py handout).
// The instructor's copy includes it too and never calls it.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

namespace ladder {
namespace {

/// Marks code a student has still to write. In device code, thread 0 of block 0 prints
/// "TODO(stage NN name): <what>" once per launch and the kernel goes on without the missing work,
/// so the stage's outputs stay wrong (the runner poisons them with NaN) and the oracle check fails
/// with that line above it. In host code it throws std::logic_error with the same text.
__host__ __device__ inline void ladder_todo(const char* what) {
#ifdef __CUDA_ARCH__
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0 &&
      threadIdx.z == 0)
    printf("TODO(stage %s %s): %s\n", LADDER_STAGE_ID, LADDER_STAGE_NAME, what);
#else
  throw std::logic_error(std::string("TODO(stage " LADDER_STAGE_ID " " LADDER_STAGE_NAME "): ") + what);
#endif
}

/// Uses its arguments (by value: a constexpr host constant may be passed from device code), so a
/// stub that leaves variables untouched compiles without warnings.
template <typename... Ts>
__host__ __device__ inline void ladder_unused(Ts...) {}

}  // namespace
}  // namespace ladder
