// The contract between a rung of the problem-38 track and the programs that run it (p38_ladder,
// the tests, the Python binding). A rung is a folder under rungs/, NN_name/, whose one source (.cu, or
// .cpp for the CPU rung) defines one descriptor function, LADDER_RUNG_SYMBOL()
// (common/toolkit/rung_id.hpp); the build derives its number and name from the folder's name and
// generates the list in ladder order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "oracle.hpp"
#include "problem.hpp"
#include "tolerance.hpp"  // Precision

namespace ladder::p38 {

/// Device pointers to the inputs, fp32, contiguous, layouts as in Problem38.
struct DeviceInputs {
  const float* x = nullptr;       ///< (batch, in_channels, D, H, W)
  const float* weight = nullptr;  ///< (in_channels, out_channels/groups, kD, kH, kW)
  const float* bias = nullptr;    ///< (out_channels): the ConvTranspose3d bias
  const float* scale = nullptr;   ///< (out_channels): the (1, out_channels, 1, 1, 1) parameter
};

/// Receives the phases a rung marks: begin(name) before the phase's first launch. The runner
/// records a CUDA event there and times each phase to the next mark (or the end).
class PhaseMarks {
 public:
  virtual ~PhaseMarks() = default;
  virtual void begin(const char* phase) = 0;
};

/// What a GPU rung's run function gets. `out` is (batch, out_channels, out_size()), poisoned with
/// NaN by the caller: the rung must write every element. The workspace has workspace_bytes(p)
/// bytes, 256-byte aligned, and may hold anything. run_gpu only enqueues work on `stream`.
struct RungArgs {
  const Problem38& problem;
  DeviceInputs in;
  float* out;
  void* workspace;
  cudaStream_t stream;
  PhaseMarks* marks = nullptr;  ///< may be null (tests, bindings)
  /// Rungs 01-04 mark "conv" (pool, convolution, clamp) and "softmax"; fused rungs one "fused".
  void mark(const char* phase) const {
    if (marks) marks->begin(phase);
  }
};

struct Rung {
  std::string id;    ///< "03": the file's number
  std::string name;  ///< "block_tree"
  std::string idea;  ///< one line for tables
  /// The CPU rung sets this: the whole output, fp32 arithmetic, (batch, out_channels, S).
  std::vector<float> (*run_cpu)(const Problem38&, const Inputs&) = nullptr;
  /// GPU rungs set these two. run_gpu throws CudaError (ladder/cuda_check.hpp) on a failed launch.
  size_t (*workspace_bytes)(const Problem38&) = nullptr;
  void (*run_gpu)(const RungArgs&) = nullptr;
  /// Optional: why this rung cannot run problem p (one sentence), or "" when it can.
  std::string (*unsupported)(const Problem38&) = nullptr;
  /// True if two runs give bitwise-equal outputs (no order-dependent floating-point atomics).
  bool deterministic = true;
  /// How many times the rung computes the convolution (the recompute rung: 2), for throughput.
  int conv_passes = 1;
  /// How the rung forms the convolution's products; a Tf32 rung is checked at the TF32 bound
  /// (tolerance.hpp) wherever it takes its tensor-core path.
  Precision precision = Precision::Fp32;

  bool is_gpu() const { return run_gpu != nullptr; }
  std::string label() const { return id + " " + name; }
  std::string why_unsupported(const Problem38& p) const { return unsupported ? unsupported(p) : std::string(); }
};

/// The track's rungs, in ladder order (registry.cpp).
const std::vector<const Rung*>& rungs();

/// The rung with this id ("03") or name ("block_tree"); throws std::invalid_argument listing the
/// rungs when there is none.
const Rung& find_rung(const std::string& id_or_name);

}  // namespace ladder::p38
