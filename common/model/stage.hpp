// The contract between a stage and the programs that run it (ladder, stage_NN, tests).
// A stage is one folder stages/NN_name/ whose sources register it with LADDER_REGISTER_STAGE
// (stages/lib/register_stage.hpp); its number and name come from the folder name alone. CMake
// finds the folders and generates the registry, so adding a stage adds nothing else.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "inputs.hpp"
#include "problem.hpp"
#include "tolerance.hpp"

namespace ladder {

/// The phases that times are reported for. Fused stages report one Fused phase.
enum class Phase { Conv, Pool, Epilogue, Fused };
const char* to_string(Phase p);

/// Device pointers to the inputs, fp32, layouts as in Problem.
struct DeviceInputs {
  const float* x = nullptr;
  const float* weight = nullptr;
  const float* conv_bias = nullptr;
  const float* bias = nullptr;
};

/// A GPU stage calls begin(phase) before launching each phase's kernels. The runner records a
/// CUDA event there and one after the stage returns; a phase's time is the gap to the next mark.
class PhaseMarks {
 public:
  virtual ~PhaseMarks() = default;
  virtual void begin(Phase phase) = 0;
};

/// Everything a GPU stage's run function gets. Outputs are device buffers the runner has
/// poisoned with NaN: the stage must write every element of pooled (batch*out_channels) and
/// y (batch). The workspace has the size the stage's workspace_bytes asked for (zeroed once
/// and reused if the stage sets self_resetting_workspace).
struct GpuStageArgs {
  const Problem& problem;
  DeviceInputs in;
  float* pooled;
  float* y;
  void* workspace;
  cudaStream_t stream;
  PhaseMarks& marks;
};

/// What a stage's pool phase gets when it runs on its own (StageDescriptor::run_pool): the
/// stage's full run calls it with its own convT output, `ladder --pool-only` with a generated
/// tensor of that shape. run_pool calls marks.begin(Phase::Pool) before its first enqueue and
/// must write every element of pooled (the runner poisons it with NaN).
struct PoolArgs {
  const Problem& problem;
  const float* conv_out;  ///< (batch, out_channels, out_h(), out_w()) fp32, contiguous NCHW
  float* pooled;          ///< (batch, out_channels): pooled[n, co] = mean of plane (n, co)
  void* workspace;        ///< pool_workspace_bytes(problem) bytes (may hold anything), 256-byte aligned
  cudaStream_t stream;
  PhaseMarks& marks;
};

/// A CPU stage returns its outputs and the wall time of each phase in ms.
struct CpuStageResult {
  std::vector<double> pooled;
  std::vector<double> y;
  std::vector<std::pair<Phase, double>> phase_ms;
};

struct StageDescriptor {
  std::string id;    ///< "01": the folder's number
  std::string name;  ///< "per_thread_loop"
  std::string idea;  ///< one line for tables
  /// CPU stages set this.
  CpuStageResult (*run_cpu)(const Problem&, const HostInputs&) = nullptr;
  /// GPU stages set these two. run_gpu only enqueues work on args.stream (no synchronization)
  /// and throws CudaError or std::runtime_error on a bad launch configuration.
  size_t (*workspace_bytes)(const Problem&) = nullptr;
  void (*run_gpu)(const GpuStageArgs&) = nullptr;
  /// False for stages that never perform the convT arithmetic (12, 13): the ladder then does
  /// not quote convT TFLOP/s for them.
  bool computes_conv = true;
  /// True if the stage's convolution runs on tensor cores (10, 11): the ladder then quotes no
  /// share of the FP32 FMA peak for it (mma_peak measures the ceiling that applies).
  bool tensor_cores = false;
  /// How the stage forms its products; a Tf32 stage is checked at tf32_tolerance (wider) on
  /// inputs that are not exact (stage_tolerance).
  Precision precision = Precision::Fp32;
  /// True if two runs on the same inputs give bitwise-equal outputs (no order-dependent
  /// floating-point atomics); the tests hold a stage that claims it to that.
  bool deterministic = false;
  /// Optional one-time host-side setup for a problem (cudaFuncSetAttribute and the like), run
  /// before warm-up and outside every timed region. Throws like run_gpu.
  void (*prepare)(const Problem&) = nullptr;
  /// True if the stage needs its workspace zeroed before its first run on a problem and leaves
  /// it ready for the next run of the same problem (counters reset by the block that reads their
  /// final value): the caller zeroes the workspace once and keeps it for later runs of that
  /// problem on the same stream, which saves a memset per run; for another problem (another
  /// layout) it zeroes it again. False: the workspace may hold anything.
  bool self_resetting_workspace = false;
  /// The handout's stubs (ladder_todo calls) still in the stage's sources, counted by the build:
  /// a run without a GPU says the rung is still a stub instead of only "skipped".
  int stubs = 0;
  /// Optional: the stage's pool phase alone, the same function its run_gpu calls for that phase
  /// (`ladder --pool-only` times it on a generated tensor). Enqueues only, throws like run_gpu.
  void (*run_pool)(const PoolArgs&) = nullptr;
  /// Bytes of PoolArgs::workspace that run_pool needs; nullptr: none.
  size_t (*pool_workspace_bytes)(const Problem&) = nullptr;
  /// Optional: the dynamic shared memory per block that the stage's plan for a problem takes on
  /// the current device, in bytes (0: a path without dynamic shared memory). Plans fit the
  /// device's opt-in limit (shared_memory_per_block_limit); the tests hold them to it.
  size_t (*shared_memory_bytes)(const Problem&) = nullptr;
  /// Optional: how the stage departs from its idea on the current device, in one sentence (stage
  /// 09 below sm_80: no cp.async); empty where it does not. The ladder prints it and keeps it as
  /// the stage's note. Throws CudaError.
  std::string (*device_note)() = nullptr;
  /// The phases this stage changes from the one before it. The ladder's "speedup" (vs previous)
  /// compares the sum of these phases in both stages, so a rung that changes only the pool is
  /// not drowned by an unchanged convolution. Empty: the whole run (total time).
  std::vector<Phase> changes;

  bool is_gpu() const { return run_gpu != nullptr; }
  std::string label() const { return id + " " + name; }
};

/// The stages linked into this program, in ladder order (generated by CMake).
const std::vector<const StageDescriptor*>& registered_stages();

/// Blocks for `threads` threads of `block_size`, or a std::runtime_error naming the kernel when
/// the grid would exceed CUDA's limit of 2^31 - 1 blocks in x.
unsigned int blocks_for(long long threads, int block_size, const char* kernel);

}  // namespace ladder
