// The registered operator <extension module name>::stage_forward (see stage_op.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace cpl {

/// The operator's name as the dispatcher knows it, e.g. "conv_pool_ladder_s06::stage_forward":
/// one namespace per extension module, so several stage sets can be loaded in one process.
const char* stage_forward_op_name();

/// Calls the registered operator through the dispatcher (autograd included), without Python's
/// torch.ops argument parsing: what the pybind function stage_forward and ModelNew use.
at::Tensor call_stage_forward(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& conv_bias, const at::Tensor& bias,
                              std::string_view stage, c10::IntArrayRef stride, c10::IntArrayRef padding,
                              c10::IntArrayRef output_padding, c10::IntArrayRef dilation, int64_t groups,
                              double scale);

}  // namespace cpl
