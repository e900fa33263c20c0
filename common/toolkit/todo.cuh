// What a handout's stubs call where a solution was taken out (scripts/assignment.py handout), in
// the ladder's stages and the tracks' rungs alike. The instructor's copy includes it too and
// never calls it.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

// The label of the stub messages: "stage NN name" for a stage (compiled with LADDER_STAGE_ID and
// LADDER_STAGE_NAME), "stage pNN-NN name" for a track rung (LADDER_RUNG_TRACK, _ID, _NAME); both
// come from the file's name (cmake/Stages.cmake). LADDER_TODO_CHAPTER: where the hints of the
// stage's (or the track's) own stubs are, under "TODO hints".
#if defined(LADDER_STAGE_ID) && defined(LADDER_STAGE_NAME)
#define LADDER_TODO_LABEL "stage " LADDER_STAGE_ID " " LADDER_STAGE_NAME
#define LADDER_TODO_RUNG LADDER_STAGE_ID
#define LADDER_TODO_CHAPTER "stages/" LADDER_STAGE_ID "_" LADDER_STAGE_NAME "/README.md"
#elif defined(LADDER_RUNG_TRACK) && defined(LADDER_RUNG_ID) && defined(LADDER_RUNG_NAME)
#define LADDER_TODO_LABEL "stage " LADDER_RUNG_TRACK "-" LADDER_RUNG_ID " " LADDER_RUNG_NAME
#define LADDER_TODO_RUNG LADDER_RUNG_TRACK
#define LADDER_TODO_CHAPTER "the track's README.md"
#else
#error "todo.cuh: compile a stage or a track rung with the definitions cmake/Stages.cmake gives it"
#endif

namespace ladder {
namespace {

/// Whether the hint id `hint` (NN.k of stage NN, TRACK-NN.k of a track's rung) is written in
/// LADDER_TODO_CHAPTER: a hint of this stage, or of any rung of this track (one chapter). A stub
/// of a stages/lib/ file carries the id of the earlier stage whose chapter holds its hint.
__host__ __device__ inline bool ladder_todo_hint_is_here(const char* hint) {
  const char* here = LADDER_TODO_RUNG;
  int i = 0;
  for (; here[i] != '\0'; ++i)
    if (hint[i] != here[i]) return false;
  return hint[i] == '.' || hint[i] == '-';
}

/// Marks code a student has still to write. `hint` is the stub's id: its full hint is the entry
/// of that id under "TODO hints" in the chapter of the id's rung (stages/NN_name/README.md for
/// NN.k, the track's README.md for TRACK-NN.k); `what` is the short summary the kernel file shows.
/// In device code, thread 0 of block 0 prints "TODO(<label>): <what> [hint <id>: ...where...]"
/// once per launch and the kernel goes on without the missing work, so the stage's outputs stay
/// wrong (the runner poisons them with NaN) and the oracle check fails with that line above it.
/// In host code it throws std::logic_error with the same text.
__host__ __device__ inline void ladder_todo(const char* hint, const char* what) {
  const bool here = ladder_todo_hint_is_here(hint);
#ifdef __CUDA_ARCH__
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0 &&
      threadIdx.z == 0) {
    if (here)
      printf("TODO(%s): %s [hint %s: \"TODO hints\" in %s]\n", LADDER_TODO_LABEL, what, hint, LADDER_TODO_CHAPTER);
    else  // a stage's id: two digits
      printf("TODO(%s): %s [hint %s: \"TODO hints\" in the chapter of stage %c%c]\n", LADDER_TODO_LABEL, what, hint,
             hint[0], hint[1]);
  }
#else
  const std::string where = here ? std::string(LADDER_TODO_CHAPTER)
                                 : "the chapter of stage " + std::string(hint, 2);
  throw std::logic_error(std::string("TODO(" LADDER_TODO_LABEL "): ") + what + " [hint " + hint +
                         ": \"TODO hints\" in " + where + "]");
#endif
}

/// Uses its arguments (by value: a constexpr host constant may be passed from device code), so a
/// stub that leaves variables untouched compiles without warnings.
template <typename... Ts>
__host__ __device__ inline void ladder_unused(Ts...) {}

}  // namespace
}  // namespace ladder
