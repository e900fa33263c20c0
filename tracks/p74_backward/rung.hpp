// The contract between a rung of the problem-74 track and the programs that run it (p74_ladder,
// the tests, the Python binding). A rung is a folder under rungs/, NN_name/, whose one source (.cu, or
// .cpp for the CPU rung) defines one descriptor function, LADDER_RUNG_SYMBOL()
// (common/toolkit/rung_id.hpp); the build derives its number and name from the folder's name and
// generates the list in ladder order.
// Forward rungs (01-04, 10) compute out and save what the backward needs; backward rungs (05-09,
// 11) compute the four gradients from that saved state; rung 00 does both on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "oracle.hpp"
#include "problem.hpp"
#include "tolerance.hpp"  // Precision

namespace ladder::p74 {

/// Device pointers to the inputs, fp32, contiguous, layouts as in Problem74.
struct DeviceInputs {
  const float* x = nullptr;           ///< (batch, in_channels, D, H, W)
  const float* weight = nullptr;      ///< (in_channels, out_channels/groups, kD, kH, kW)
  const float* bias = nullptr;        ///< (out_channels)
  const float* multiplier = nullptr;  ///< (out_channels)
};

/// Receives the phases a rung marks: begin(name) before the phase's first launch; the runner
/// records a CUDA event there and times each phase to the next mark (or the end).
class PhaseMarks {
 public:
  virtual ~PhaseMarks() = default;
  virtual void begin(const char* phase) = 0;
};

/// What a forward rung gets. out, argmax and y_saved are (batch, out_channels, out_size()),
/// poisoned by the caller (NaN, and -1 for argmax): the rung must write every element.
/// argmax holds window offsets (oracle.hpp), y_saved the ConvTranspose3d output (bias included)
/// at that position. The workspace has forward_workspace(p) bytes, 256-byte aligned. The rung only
/// enqueues work on `stream`.
struct ForwardArgs {
  const Problem74& problem;
  DeviceInputs in;
  float* out;
  int32_t* argmax;
  float* y_saved;
  void* workspace;
  cudaStream_t stream;
  PhaseMarks* marks = nullptr;  ///< may be null
  void mark(const char* phase) const {
    if (marks) marks->begin(phase);
  }
};

/// What a backward rung gets: the inputs, the upstream gradient grad_out and the saved state
/// (all three (batch, out_channels, out_size())), and the four gradients to write, shaped as x,
/// weight, bias and multiplier, poisoned with NaN by the caller: the rung writes every element
/// (zeroing first where it accumulates).
struct BackwardArgs {
  const Problem74& problem;
  DeviceInputs in;
  const float* grad_out;
  const int32_t* argmax;
  const float* y_saved;
  float* grad_x;
  float* grad_weight;
  float* grad_bias;
  float* grad_multiplier;
  void* workspace;
  cudaStream_t stream;
  PhaseMarks* marks = nullptr;
  void mark(const char* phase) const {
    if (marks) marks->begin(phase);
  }
};

struct Rung {
  std::string id;    ///< "03": the file's number
  std::string name;  ///< "fused_forward"
  std::string idea;  ///< one line for tables
  /// The CPU rung sets these two: fp32 arithmetic, the whole result.
  ForwardResult (*cpu_forward)(const Problem74&, const Inputs&) = nullptr;
  GradResult (*cpu_backward)(const Problem74&, const Inputs&, const Saved&, const std::vector<float>& grad_out) =
      nullptr;
  /// A forward GPU rung sets these two. forward throws CudaError on a failed CUDA call or launch,
  /// and InvalidProblem for a problem it does not support (see unsupported).
  size_t (*forward_workspace)(const Problem74&) = nullptr;
  void (*forward)(const ForwardArgs&) = nullptr;
  /// A backward GPU rung sets these two; backward throws as forward does.
  size_t (*backward_workspace)(const Problem74&) = nullptr;
  void (*backward)(const BackwardArgs&) = nullptr;
  /// Optional: why this rung cannot run problem p (one sentence), or "" when it can.
  std::string (*unsupported)(const Problem74&) = nullptr;
  /// True if two runs give bitwise-equal results (no order-dependent floating-point atomics).
  bool deterministic = true;
  /// How the rung forms the convolution's products; the runner and the tests hold a forward rung
  /// to forward_tolerance of this precision and a backward rung to grad_tolerance of it (Tf32:
  /// tensor cores on TF32-rounded operands).
  Precision precision = Precision::Fp32;

  bool is_cpu() const { return cpu_forward != nullptr; }
  bool has_forward() const { return forward != nullptr || cpu_forward != nullptr; }
  bool has_backward() const { return backward != nullptr || cpu_backward != nullptr; }
  std::string label() const { return id + " " + name; }
  std::string why_unsupported(const Problem74& p) const { return unsupported ? unsupported(p) : std::string(); }
};

/// The track's rungs, in ladder order (registry.cpp).
const std::vector<const Rung*>& rungs();

/// The rung with this id ("03") or name; throws std::invalid_argument listing the rungs when
/// there is none.
const Rung& find_rung(const std::string& id_or_name);

}  // namespace ladder::p74
