// The ladder: run stages on one problem, check each against the fp64 oracle and the stage
// before it, time them against the streaming-read floor, and report (table, JSON, .npy).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpu_session.hpp"
#include "inputs.hpp"
#include "problem.hpp"
#include "provenance.hpp"
#include "run_options.hpp"
#include "stage.hpp"
#include "tolerance.hpp"

namespace ladder {

/// RunOptions (harness/run_options.hpp): rung_ids are stages here; refill_check runs a stage once
/// more as a first run on a fresh workspace.
struct LadderOptions : RunOptions {
  std::string inputs_dir;          ///< read x, weight, conv_bias, bias .npy from here
  std::string dump_dir;            ///< write inputs, oracle and every stage's outputs here
  bool cub_baseline = true;        ///< time CUB's segmented sum as the pool-phase baseline
  /// The grader's rules, set by its command line and never by a stage (and refill_check):
  /// check every GPU stage at this precision's tolerance, whatever its descriptor declares;
  std::optional<Precision> check_precision;
  /// x and weight placed 3/4 of the way between two TF32 values, so that rounding them to
  /// nearest and truncating them differ by one TF32 step in every operand; a TF32 stage is
  /// then checked at the FP32 tolerance against the oracle of its operands rounded to nearest.
  bool tf32_midpoints = false;
};

struct StageReport {
  std::string id, name, idea;
  bool gpu = false;
  bool computes_conv = true;  ///< see StageDescriptor::computes_conv
  bool tensor_cores = false;  ///< see StageDescriptor::tensor_cores
  std::vector<Phase> changes;  ///< see StageDescriptor::changes (empty: the total)
  bool ran = false;
  bool failed = false;  ///< an error stopped it (the note says which); fails the ladder
  std::string note;     ///< why it was skipped or not run, or the error that stopped it
  std::vector<std::pair<Phase, double>> phase_ms;  ///< medians (a CPU stage: its one run)
  std::vector<Spread> phase_spread;                ///< min, median, max of the same phases
  double total_ms = 0;                             ///< median
  Spread total_spread;
  Agreement vs_oracle;
  /// Against the previous stage that ran; absent for the first. With exact inputs both sides
  /// are roundings of the same exact values, so it is checked at 1x the exact tolerance
  /// (tighter than the 2x the two oracle checks imply); otherwise the oracle checks already
  /// bound it and it is information only (vs_previous_checked false: no PASS/FAIL).
  std::optional<Agreement> vs_previous;
  bool vs_previous_checked = false;
  std::string previous_id;
  std::vector<double> pooled, y;
};

/// How and where a run was made: what a results JSON records as "provenance" and "timing".
struct RunRecord {
  Provenance provenance;  ///< commit, toolchain, driver, host CPU, date
  int warmup = 0, reps = 0;
  bool flush_l2 = true;
};

struct LadderReport {
  Problem problem;
  RunRecord run;
  std::string tolerance;  ///< what fp32 stages are held to: "exact" or "fp32" (tolerance.hpp)
  std::string device;  ///< empty without a GPU
  std::string gpu_skip_reason;
  /// Set when a stage left the CUDA context in a sticky error: names the stage and the error;
  /// the GPU stages after it were not run.
  std::string cuda_context_lost;
  double floor_ms = 0;  ///< streaming read of x (median); 0 without a GPU
  Spread floor_spread;  ///< all zero where the floor's spread is unknown
  double fp32_peak_tflops = 0;  ///< FP32 FMA peak of the device (device.hpp)
  std::string fp32_peak_formula;
  double dram_peak_gbps = 0;  ///< specified DRAM bandwidth of the device (device.hpp); 0 without a GPU
  std::string dram_peak_formula;
  double cub_pool_ms = 0;  ///< cub::DeviceSegmentedReduce::Sum over a convT-sized tensor; 0 if not run
  Spread cub_spread;
  std::string cub_note;    ///< why the CUB baseline did not run
  std::vector<StageReport> stages;
  /// No stage failed, every check that judges (the oracle; the previous stage on exact inputs)
  /// passed, and the CUDA context survived.
  bool all_passed() const;
};

/// Runs the ladder. Throws InvalidProblem, HostMemoryError (checked before anything large is
/// allocated), npy::NpyError, DeviceMemoryError or CudaError with a message that names the
/// problem; a stage that fails is reported, not thrown. After a sticky CUDA error (see
/// cuda_context.hpp) the remaining GPU stages are reported as not run.
LadderReport run_ladder(const Problem& p, const LadderOptions& opt);

/// The results table (times in ms, bandwidth in GB/s, throughput in TFLOP/s).
std::string format_table(const LadderReport& r);

/// Writes `r` as JSON to `path`; throws std::runtime_error if the file cannot be written.
void write_json(const LadderReport& r, const std::string& path);

}  // namespace ladder
