// The problem-74 track's ladder: runs the forward rungs (01-04, 10) and the backward rungs (05-09, 11),
// and rung 00 on the CPU, on one problem; checks each against the fp64 oracles and times it
// against floors measured in the same run; reports a table and JSON (p74_ladder, the tests).
//
// How results are checked (all elementwise, tolerances from tolerance.hpp):
//  - forward: against oracle::forward on the whole problem when conv_macs() <= oracle_max_macs;
//    above that on `max_samples` samples of the batch (first, last, evenly between), each checked
//    in full by the oracle run on that sample alone. That is the same check, not an
//    approximation: one sample's out, argmax and y depend only on that sample's x.
//  - backward: every backward rung gets the same saved state (argmax, y) from one forward rung
//    (forward_for_backward; by default the fastest GPU forward rung that passed) and the same
//    grad_out (make_grad_out), and is checked against oracle::backward from that saved state
//    when the backward's multiply-adds (backward_macs) are <= oracle_max_macs. The parameter
//    gradients sum over the whole batch, so there is no per-sample check: above the limit the
//    backward is reported "unchecked" (raise --oracle-max-macs), never as passed by default.
//    At KernelBench's size both passes are checked (forward on samples, backward in full).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "timing.hpp"  // Spread
#include "oracle.hpp"
#include "problem.hpp"
#include "provenance.hpp"
#include "run_options.hpp"
#include "rung.hpp"
#include "tolerance.hpp"

namespace ladder::p74 {

/// RunOptions (harness/run_options.hpp; rung 00 runs a pass only below cpu_max_macs, and
/// refill_check refills grad_out's buffer for each checked GPU backward), and the oracles' limits.
struct TrackOptions : RunOptions {
  double oracle_max_macs = 2e9;  ///< the fp64 oracles run only below this many (see above)
  int max_samples = 2;         ///< samples checked when the forward oracle would cost too much
  std::string forward_for_backward;  ///< rung whose saved state the backward rungs use; "": see above
};

/// One pass (forward or backward) of one rung: rung 00 gives two.
struct RungResult {
  std::string id, name, idea;
  std::string pass;  ///< "forward" or "backward" (JSON: "direction")
  bool gpu = false, ran = false, failed = false, deterministic = true;
  Precision precision = Precision::Fp32;  ///< the rung's: its forward is checked at that bound
  int repeatable = -1;  ///< two runs bitwise equal: 1, 0, or -1 not measured (CPU)
  std::string note;     ///< why it did not run, or the error that stopped it
  Spread ms;            ///< min, median, max over the timed repetitions (CPU: one run)
  std::vector<std::pair<std::string, double>> phase_ms;  ///< median per marked phase, in order
  double device_bytes = 0;  ///< inputs, outputs and workspace on the GPU
  bool checked = false;     ///< false: "unchecked" (too large for the oracle)
  std::string checked_on;   ///< "every element", "samples 0, 15"
  std::optional<ForwardCheck> forward_check;
  std::optional<GradCheck> grad_check;
  bool check_passed() const;  ///< checked and within every tolerance (false when unchecked)
  double worst_ratio() const;  ///< largest |diff|/tolerance over every checked tensor
};

struct TrackReport {
  Problem74 problem;
  Provenance provenance;
  int warmup = 0, reps = 0;
  bool flush_l2 = true;
  double oracle_max_macs = 0;
  std::string device;  ///< empty without a GPU
  std::string gpu_skip_reason;
  double fp32_peak_tflops = 0;
  // Floors, measured (medians): streaming reads and cudaMemset of buffers of the pass's size.
  double fwd_read_ms = 0;   ///< read x
  double fwd_write_ms = 0;  ///< write out, argmax and y_saved
  double bwd_read_ms = 0;   ///< read grad_out, argmax, y_saved, x and weight
  double bwd_write_ms = 0;  ///< write grad_x and grad_weight
  double backward_macs = 0;  ///< sparse count from the saved state (backward_macs below)
  std::string saved_from;    ///< the forward rung that supplied the backward's saved state
  double fastest_forward_ms = 0;  ///< median of the fastest forward GPU rung that passed (0: none)
  std::vector<RungResult> rungs;
  double fwd_memory_floor_ms() const { return fwd_read_ms + fwd_write_ms; }
  double bwd_memory_floor_ms() const { return bwd_read_ms + bwd_write_ms; }
  double fwd_compute_floor_ms() const;  ///< 2*conv_macs() flops at the FP32 FMA peak
  double bwd_compute_floor_ms() const;  ///< 2*backward_macs flops at the FP32 FMA peak
  bool all_passed() const;  ///< no failure and no check that failed (unchecked rungs are not failures)
};

/// Runs the rungs. Throws InvalidProblem, DeviceMemoryError or CudaError (before the rungs run);
/// a rung that fails is reported, not thrown.
TrackReport run_track(const Problem74& p, const TrackOptions& opt);

std::string format_table(const TrackReport& r);
/// Throws std::runtime_error when the file cannot be written.
void write_json(const TrackReport& r, const std::string& path);

/// Runs a forward rung once (tests, bindings): the CPU rung calls cpu_forward; a GPU rung gets
/// the inputs uploaded, out/y_saved poisoned with NaN and argmax with -1, a 256-byte aligned
/// workspace, and its results downloaded after a synchronize. Throws std::invalid_argument
/// (the rung's reason) when the rung cannot run p or has no forward pass; CudaError,
/// DeviceMemoryError.
ForwardResult run_forward_once(const Rung& rung, const Problem74& p, const Inputs& in);

/// Runs a backward rung once from `saved` and `grad_out` ((batch, out_channels, out_size())),
/// the four gradients poisoned with NaN first. Errors as run_forward_once.
GradResult run_backward_once(const Rung& rung, const Problem74& p, const Inputs& in, const Saved& saved,
                             const std::vector<float>& grad_out);

/// The backward's multiply-adds, counting only what the gradient touches: each distinct conv
/// position that is some window's argmax carries gradient to in_per_group * (taps landing there)
/// products for grad_x and as many for grad_weight: 2 * that sum. (A dense backward that
/// ignores the sparsity does 2 * conv_macs().) Throws std::invalid_argument on bad sizes.
double backward_macs(const Problem74& p, const Saved& saved);

/// The samples the forward is checked on: all of them when conv_macs() <= oracle_max_macs, else
/// up to max_samples (first, last, evenly between) as long as their oracle runs stay within
/// oracle_max_macs; empty when not even one sample does (the forward is then unchecked).
std::vector<int64_t> samples_to_check(const Problem74& p, double oracle_max_macs, int max_samples);

/// The oracle's forward and tolerances for one checked sample (sample -1: the whole problem),
/// kept so that every rung is checked against one oracle run: each precision's bound is made the
/// first time a rung of that precision is checked.
struct ForwardOracle {
  int64_t sample = -1;
  Forward ref;
  std::map<Precision, ForwardTolerance> tols = {};
  /// The bound of `precision`, made on first use (p: the problem this oracle ran).
  const ForwardTolerance& tolerance(const Problem74& p, Precision precision);
};

/// Checks a forward result against oracle::forward on `samples` (every sample: the whole problem
/// at once; else each a batch-1 problem of that sample's x), at the bound of `precision` (the
/// rung's Rung::precision); indices in the result are flat indices of the whole problem. With
/// `cache`, the oracle runs are taken from it, or made and stored there when it is empty (the
/// same p, inputs and samples every call). Throws std::invalid_argument on mismatched sizes or a
/// sample outside the batch.
ForwardCheck check_forward_samples(const Problem74& p, const Inputs& in, const ForwardResult& got,
                                   const std::vector<int64_t>& samples, std::vector<ForwardOracle>* cache = nullptr,
                                   Precision precision = Precision::Fp32);

/// Bitwise equality (NaN payloads included): a deterministic rung repeats exactly.
bool bitwise_equal(const ForwardResult& a, const ForwardResult& b);
bool bitwise_equal(const GradResult& a, const GradResult& b);

}  // namespace ladder::p74
