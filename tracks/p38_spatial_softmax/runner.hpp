// The problem-38 track's ladder: runs rungs on one problem, checks each against the fp64 oracle
// (every row on small problems, sampled rows on large ones) and times it against the memory and
// compute floors; reports a table and JSON (p38_ladder, python bindings, tests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "timing.hpp"  // Spread
#include "oracle.hpp"
#include "problem.hpp"
#include "provenance.hpp"
#include "run_options.hpp"
#include "rung.hpp"
#include "tolerance.hpp"

namespace ladder::p38 {

/// RunOptions (harness/run_options.hpp), and how much of the output the oracle checks.
struct TrackOptions : RunOptions {
  int64_t full_check_elems = int64_t(1) << 22;  ///< check every row up to this many outputs
  int sample_rows = 8;                          ///< else this many rows
};

struct RungResult {
  std::string id, name, idea;
  bool gpu = false, ran = false, failed = false, deterministic = true;
  int conv_passes = 1;
  std::string note;  ///< why it was skipped, or the error that stopped it
  Spread ms;         ///< min, median, max over the timed repetitions (a CPU rung: one run)
  /// Median time of each phase the rung marked (RungArgs::mark), in the order marked.
  std::vector<std::pair<std::string, double>> phase_ms;
  double device_bytes = 0;  ///< inputs + output + workspace on the GPU
  Agreement vs_oracle;      ///< over the checked rows
  int64_t rows_checked = 0;
  std::string previous_id;      ///< the rung compared against, "" for the first that ran
  double max_rel_vs_previous = 0;  ///< max |a - b| / max |b| over the whole output (information)
};

struct TrackReport {
  Problem38 problem;
  Provenance provenance;
  int warmup = 0, reps = 0;
  bool flush_l2 = true;
  std::string device;           ///< empty without a GPU
  std::string gpu_skip_reason;
  double read_x_ms = 0;         ///< streaming read of x, median (measured)
  double write_out_ms = 0;      ///< cudaMemset of the output, median (measured)
  double fp32_peak_tflops = 0;  ///< spec FMA peak of this GPU (common/toolkit/device.hpp)
  double memory_floor_ms() const { return read_x_ms + write_out_ms; }
  /// The convolution's multiply-adds (taps inside the output) at the FP32 FMA peak.
  double compute_floor_ms() const;
  std::vector<RungResult> rungs;
  bool all_passed() const;
};

/// Runs the rungs. Throws InvalidProblem, DeviceMemoryError or CudaError (before the rungs run);
/// a rung that fails is reported, not thrown.
TrackReport run_track(const Problem38& p, const TrackOptions& opt);

std::string format_table(const TrackReport& r);
/// Throws std::runtime_error when the file cannot be written.
void write_json(const TrackReport& r, const std::string& path);

/// Runs a GPU rung once on `in` and returns its output (tests, bindings): uploads, poisons the
/// output with NaN, runs, synchronizes, downloads. Throws CudaError, DeviceMemoryError, or
/// std::invalid_argument when the rung cannot run p (its reason).
std::vector<float> run_rung_once(const Rung& rung, const Problem38& p, const Inputs& in);

/// Checks `out` (the whole output) against the fp64 oracle on `rows` (flat n*out_channels + c), at
/// the bound of `precision` (tolerance.hpp).
Agreement check_rows(const Problem38& p, const Inputs& in, const std::vector<float>& out,
                     const std::vector<int64_t>& rows, Precision precision = Precision::Fp32);

}  // namespace ladder::p38
