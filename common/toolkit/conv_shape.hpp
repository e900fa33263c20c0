// The one C++ statement of a transposed convolution's output size, for problem 42's model and
// the tracks' 3-D problems alike. The Python side's one is tooling/checks/compare_common.py's
// conv_transpose_out_size; scripts/test_output_size.py checks both against each other and PyTorch.
#pragma once

#include <cstdint>
#include <optional>

namespace ladder {

/// PyTorch's ConvTranspose1d/2d/3d output size along one axis (the modules' "Shape" section):
///   (in - 1)*stride - 2*padding + dilation*(kernel_size - 1) + output_padding + 1.
/// std::nullopt where an intermediate overflows int64. May be <= 0 for invalid parameters; the
/// callers' validation rejects those with its own message.
constexpr std::optional<int64_t> conv_transpose_out_size(int64_t in, int64_t kernel_size, int64_t stride,
                                                         int64_t padding, int64_t output_padding,
                                                         int64_t dilation) {
  int64_t a = 0, b = 0, out = 0;
  if (__builtin_mul_overflow(in - 1, stride, &a) || __builtin_mul_overflow(int64_t(2), padding, &b) ||
      __builtin_sub_overflow(a, b, &out) || __builtin_mul_overflow(dilation, kernel_size - 1, &a) ||
      __builtin_add_overflow(out, a, &out) || __builtin_add_overflow(out, output_padding, &out) ||
      __builtin_add_overflow(out, int64_t(1), &out))
    return std::nullopt;
  return out;
}

}  // namespace ladder
