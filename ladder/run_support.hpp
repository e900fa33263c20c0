// Pieces the two ways of running the ladder share (runner.cpp: the full pipeline;
// pool_only.cpp: the pool phase alone). Internal to ladder/.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "gpu_session.hpp"
#include "run_loop.hpp"  // sticky_error_after
#include "runner.hpp"

namespace ladder {

/// Throws std::invalid_argument unless --reps >= 1 and --warmup >= 0, naming both values.
void check_timing_options(const LadderOptions& opt);

/// The provenance of this run and the timing settings `opt` asks for.
RunRecord record_run(const LadderOptions& opt);

/// Prints `msg` on stderr unless --quiet.
void note(const LadderOptions& o, const std::string& msg);

/// The stages --stages names (by number, name or "NN name"), in order; all when empty. Throws
/// std::invalid_argument naming an unknown stage and the ones this program has, or a stage named
/// twice ("--stages: stage 03 is listed twice").
std::vector<const StageDescriptor*> selected_stages(const LadderOptions& opt);

/// A progress callback (repetition k of n) that rewrites one stderr line on a terminal; empty
/// with --quiet.
Progress progress_printer(const LadderOptions& opt, const std::string& label);

/// The note for the GPU stages not run after `culprit` lost the CUDA context.
std::string context_lost_message(const std::string& culprit, cudaError_t code);

}  // namespace ladder
