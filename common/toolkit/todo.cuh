// What a handout's stubs call where a solution was taken out (scripts/assignment.py handout), in
// the ladder's stages and the tracks' rungs alike. The instructor's copy includes it too and
// never calls it.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

// The label of the stub messages: "stage NN name" for a stage (compiled with LADDER_STAGE_ID and
// LADDER_STAGE_NAME), "stage pNN-NN name" for a track rung (LADDER_RUNG_TRACK, _ID, _NAME); both
// come from the file's name (cmake/Stages.cmake).
#if defined(LADDER_STAGE_ID) && defined(LADDER_STAGE_NAME)
#define LADDER_TODO_LABEL "stage " LADDER_STAGE_ID " " LADDER_STAGE_NAME
#elif defined(LADDER_RUNG_TRACK) && defined(LADDER_RUNG_ID) && defined(LADDER_RUNG_NAME)
#define LADDER_TODO_LABEL "stage " LADDER_RUNG_TRACK "-" LADDER_RUNG_ID " " LADDER_RUNG_NAME
#else
#error "todo.cuh: compile a stage or a track rung with the definitions cmake/Stages.cmake gives it"
#endif

namespace ladder {
namespace {

/// Marks code a student has still to write. In device code, thread 0 of block 0 prints
/// "TODO(<label>): <what>" once per launch and the kernel goes on without the missing work,
/// so the stage's outputs stay wrong (the runner poisons them with NaN) and the oracle check fails
/// with that line above it. In host code it throws std::logic_error with the same text.
__host__ __device__ inline void ladder_todo(const char* what) {
#ifdef __CUDA_ARCH__
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0 &&
      threadIdx.z == 0)
    printf("TODO(%s): %s\n", LADDER_TODO_LABEL, what);
#else
  throw std::logic_error(std::string("TODO(" LADDER_TODO_LABEL "): ") + what);
#endif
}

/// Uses its arguments (by value: a constexpr host constant may be passed from device code), so a
/// stub that leaves variables untouched compiles without warnings.
template <typename... Ts>
__host__ __device__ inline void ladder_unused(Ts...) {}

}  // namespace
}  // namespace ladder
