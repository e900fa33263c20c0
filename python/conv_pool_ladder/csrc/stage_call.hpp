// Running one ladder stage on torch tensors: stage lookup, argument checks, the Problem, outputs
// and workspace from PyTorch's caching allocator, torch's current stream, and each stage's
// one-time prepare() hook. Shared by the pybind functions (binding.cpp) and the registered
// operator (stage_op.cpp); the math lives in the stages.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "problem.hpp"
#include "stage.hpp"

namespace cpl {

/// The non-tensor ConvTranspose2d parameters of one call, PyTorch's names.
struct Geometry {
  ladder::Pair stride = ladder::Pair::square(1);
  ladder::Pair padding = ladder::Pair::square(0);
  ladder::Pair output_padding = ladder::Pair::square(0);
  ladder::Pair dilation = ladder::Pair::square(1);
  int64_t groups = 1;
  double scale = 10.0;
};

/// Each spatial parameter is one value (both axes) or two (height, width), as PyTorch accepts;
/// anything else raises ValueError naming the parameter.
Geometry make_geometry(c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef output_padding,
                       c10::IntArrayRef dilation, int64_t groups, double scale);

/// A GPU stage of this build by number ("13"), folder name ("13_single_launch") or name
/// ("single_launch"); ValueError listing the built stages otherwise.
const ladder::StageDescriptor& find_gpu_stage(std::string_view key);

/// "13_single_launch, ..." for messages.
std::string built_stages();

struct StageOutputs {
  at::Tensor pooled;  ///< (N, Cout) float32
  at::Tensor y;       ///< (N, 1) float32
};

/// The conv bias the stages read when nn.ConvTranspose2d has none: zeros (Cout) like weight.
at::Tensor zero_conv_bias(const at::Tensor& weight, int64_t groups);

/// Runs `stage` on torch's current stream of x's device and returns its outputs, written into
/// pooled_out / y_out when given. x (N, Cin, H, W), weight (Cin, Cout/groups, kH, kW) as in
/// nn.ConvTranspose2d, conv_bias (Cout), bias (Cout, 1, 1) or (Cout):
/// float32, CUDA, one device, contiguous, 16-byte aligned. Raises ValueError / TypeError naming
/// the tensor or parameter that is wrong, RuntimeError for a CUDA or launch failure. Calls the
/// stage's prepare() once per (stage, device, geometry). Enqueues only: no synchronization.
/// The workspace and the outputs not given share one allocation (so y's storage is larger
/// than y, and holds pooled and the workspace too).
StageOutputs run_stage(const ladder::StageDescriptor& stage, const at::Tensor& x, const at::Tensor& weight,
                       const at::Tensor& conv_bias, const at::Tensor& bias, const Geometry& geometry,
                       const std::optional<at::Tensor>& pooled_out = std::nullopt,
                       const std::optional<at::Tensor>& y_out = std::nullopt);

}  // namespace cpl
