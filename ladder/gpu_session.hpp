// The GPU half of the ladder: device copies of the inputs, the streaming-read floor, and timing
// of one stage with CUDA events (prepare once, warm-up, then L2 flushed and outputs poisoned
// before every repetition; median, minimum and maximum over the timed repetitions).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device.hpp"
#include "stage.hpp"
#include "timing.hpp"  // Spread, spread_of, L2Flush

namespace ladder {

/// Times in ms of one timed GPU stage, per phase and in total, plus its outputs.
struct GpuTiming {
  std::vector<std::pair<Phase, double>> phase_ms;  ///< medians, in the order the stage marked them
  std::vector<Spread> phase_spread;                ///< the same phases' min, median, max
  double total_ms = 0;                             ///< median
  Spread total_spread;
  std::vector<double> pooled;  ///< from the last repetition, widened to double
  std::vector<double> y;
};

/// Called after each repetition with (done, total) for progress output.
using Progress = std::function<void(int done, int total)>;

class GpuSession {
 public:
  /// Copies the inputs to the device (throws DeviceMemoryError if they do not fit).
  GpuSession(const Problem& p, const HostInputs& in);
  /// A session without inputs (ladder --pool-only): pooled, y, the L2 flush buffer and the
  /// stream; for the floor, the CUB baseline and pool phases over a tensor the caller owns.
  explicit GpuSession(const Problem& p);
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  /// Copies new inputs of the session's problem into the same device buffers (same addresses).
  /// Throws std::invalid_argument on a size mismatch, CudaError.
  void refill(const HostInputs& in);

  /// Median ms of a plain streaming read of x (16-byte loads, grid-stride loop): the floor.
  double time_streaming_read(int warmup, int reps, bool flush_l2);
  /// The same read over data[0..n), device memory, 16-byte aligned (ladder --pool-only: the
  /// convT-sized tensor). Throws std::invalid_argument if data is misaligned.
  double time_streaming_read(const float* data, int64_t n, int warmup, int reps, bool flush_l2);

  /// Min, median and max of the most recent timing loop of the floor or the CUB baseline (the
  /// one whose median those functions return); all zero before the first.
  const Spread& last_launch_spread() const { return last_launch_spread_; }

  /// Median ms of cub::DeviceSegmentedReduce::Sum over a (batch*out_channels, Hout*Wout) fp32
  /// tensor the size of the convT output (filled with pseudo-random values, never zeros): the
  /// library baseline for the pool phase. Throws DeviceMemoryError if the tensor does not fit.
  double time_cub_segmented_sum(int warmup, int reps, bool flush_l2);
  /// The same over `data`, a device tensor (batch, out_channels, Hout, Wout) fp32 the caller
  /// owns. If `sums` is set, it receives the plane sums of the last repetition.
  double time_cub_segmented_sum(const float* data, int warmup, int reps, bool flush_l2,
                                std::vector<double>* sums = nullptr);

  /// Calls stage.prepare (if any) once, then runs `stage` warmup + reps times and returns the
  /// median phase and total times with their spread. Host-side setup stays outside the timed
  /// region: the first phase mark is the stage's first marks.begin().
  GpuTiming time_stage(const StageDescriptor& stage, int warmup, int reps, bool flush_l2,
                       const Progress& progress = {});

  /// For tests: prepares `stage`, runs it twice on one workspace (outputs poisoned before each
  /// run) and returns the second run's outputs, so a stage that relies on what its previous run
  /// left in the workspace (self_resetting_workspace) is checked too.
  GpuTiming run_once(const StageDescriptor& stage) { return time_stage(stage, 1, 1, false); }
  /// Prepares `stage` (a fresh workspace, zeroed for a self-resetting stage) and runs it once:
  /// the stage's first run, which run_once's second run never shows (the grader's refill run).
  GpuTiming run_first(const StageDescriptor& stage) { return time_stage(stage, 0, 1, false); }

  /// Times stage.run_pool over `conv_out`, a device tensor (batch, out_channels, Hout, Wout) fp32,
  /// as time_stage times a whole stage: prepare once, warm-up, L2 flushed and pooled poisoned
  /// with NaN before every repetition; one Pool phase. The workspace has
  /// stage.pool_workspace_bytes (zeroed once if self_resetting_workspace). Throws
  /// std::logic_error if the stage has no run_pool; CudaError, DeviceMemoryError as time_stage.
  GpuTiming time_pool(const StageDescriptor& stage, const float* conv_out, int warmup, int reps,
                      bool flush_l2, const Progress& progress = {});

 private:
  void init_timing();  ///< the L2 flush and the stream (both constructors)
  /// The workspace of `stage` (`ws_bytes`, named `what` in errors), zeroed once if the stage is
  /// self-resetting, and the stage's prepare hook run: what time_stage and time_pool do first.
  DeviceBuffer<unsigned char> prepare_stage(const StageDescriptor& stage, size_t ws_bytes, const std::string& what);
  /// The timing loop of time_stage and time_pool: `run` enqueues one repetition, marking its
  /// phases; `what` names it in errors.
  GpuTiming time_marked(const std::string& what, int warmup, int reps, bool flush, const Progress& progress,
                        const std::function<void(PhaseMarks&)>& run);
  void flush_l2();
  /// Median ms of `launch` (one enqueue on stream_), warmup + reps times, L2 flushed first.
  double time_launch(int warmup, int reps, bool flush, const std::function<void()>& launch);
  Spread last_launch_spread_;
  const Problem problem_;
  DeviceBuffer<float> x_, weight_, conv_bias_, bias_, pooled_, y_;
  std::unique_ptr<L2Flush> l2_flush_;
  cudaStream_t stream_ = nullptr;
};


}  // namespace ladder
