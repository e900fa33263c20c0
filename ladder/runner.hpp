// The ladder: run stages on one problem, check each against the fp64 oracle and the stage
// before it, time them against the streaming-read floor, and report (table, JSON, .npy).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "inputs.hpp"
#include "problem.hpp"
#include "stage.hpp"
#include "tolerance.hpp"

namespace ladder {

struct LadderOptions {
  std::vector<std::string> stage_ids;  ///< empty: every registered stage
  int warmup = 2;
  int reps = 10;
  bool flush_l2 = true;
  bool force_cpu = false;          ///< run stage 00 even when its literal cost is large
  double cpu_max_macs = 2e9;       ///< stage 00 is skipped above this many multiply-adds
  std::string inputs_dir;          ///< read x, weight, conv_bias, bias .npy from here
  std::string dump_dir;            ///< write inputs, oracle and every stage's outputs here
  std::string json_path;           ///< write machine-readable results here
  bool progress = true;            ///< progress lines on stderr
  bool cub_baseline = true;        ///< time CUB's segmented sum as the pool-phase baseline
};

struct StageReport {
  std::string id, name, idea;
  bool gpu = false;
  bool computes_conv = true;  ///< see StageDescriptor::computes_conv
  bool ran = false;
  bool failed = false;  ///< an error stopped it (the note says which); fails the ladder
  std::string note;     ///< why it was skipped, or the error that stopped it
  std::vector<std::pair<Phase, double>> phase_ms;
  double total_ms = 0;
  Agreement vs_oracle;
  std::optional<Agreement> vs_previous;  ///< absent for the first stage that ran
  std::string previous_id;
  std::vector<double> pooled, y;
};

struct LadderReport {
  Problem problem;
  std::string device;  ///< empty without a GPU
  std::string gpu_skip_reason;
  double floor_ms = 0;  ///< streaming read of x; 0 without a GPU
  double fp32_peak_tflops = 0;  ///< FP32 FMA peak of the device (device.hpp)
  std::string fp32_peak_formula;
  double cub_pool_ms = 0;  ///< cub::DeviceSegmentedReduce::Sum over a convT-sized tensor; 0 if not run
  std::string cub_note;    ///< why the CUB baseline did not run
  std::vector<StageReport> stages;
  bool all_passed() const;
};

/// Runs the ladder. Throws InvalidProblem, npy::NpyError, DeviceMemoryError or CudaError with a
/// message that names the problem; a stage that fails to launch is reported, not thrown.
LadderReport run_ladder(const Problem& p, const LadderOptions& opt);

/// The results table (times in ms, bandwidth in GB/s, throughput in TFLOP/s).
std::string format_table(const LadderReport& r);

/// Writes `r` as JSON to `path`; throws std::runtime_error if the file cannot be written.
void write_json(const LadderReport& r, const std::string& path);

}  // namespace ladder
