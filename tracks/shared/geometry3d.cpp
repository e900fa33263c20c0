#include "geometry3d.hpp"

#include <optional>

#include "common/toolkit/conv_shape.hpp"  // ladder::conv_transpose_out_size

namespace ladder::tracks {

namespace {

[[noreturn]] void reject(const std::string& what) { throw InvalidProblem("invalid problem: " + what); }

}  // namespace

void require(bool ok, const std::string& name, const Triple& v, const std::string& rule) {
  if (!ok) reject(name + " " + v.str() + ": " + rule);
}

std::string Triple::str() const {
  return "(" + std::to_string(d) + ", " + std::to_string(h) + ", " + std::to_string(w) + ")";
}

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) reject(std::string(what) + " overflows int64");
  return r;
}

int64_t conv_transpose_out_size(int64_t in, int64_t kernel_size, int64_t stride, int64_t padding,
                                int64_t output_padding, int64_t dilation) {
  const std::optional<int64_t> out =
      ladder::conv_transpose_out_size(in, kernel_size, stride, padding, output_padding, dilation);
  if (!out) reject("ConvTranspose3d output size overflows int64 (input size " + std::to_string(in) + ")");
  return *out;
}

void validate_conv_transpose3d(const ConvTranspose3dParams& conv, int64_t in_channels, int64_t out_channels) {
  // The module's constructor and ATen's transposed-convolution shape checks.
  if (conv.groups <= 0) reject("conv.groups must be a positive integer, got " + std::to_string(conv.groups));
  if (out_channels <= 0)
    reject("out_channels must be positive, got " + std::to_string(out_channels) + " (empty outputs are not modelled)");
  if (in_channels % conv.groups != 0)
    reject("in_channels " + std::to_string(in_channels) + " must be divisible by conv.groups " +
           std::to_string(conv.groups));
  if (out_channels % conv.groups != 0)
    reject("out_channels " + std::to_string(out_channels) + " must be divisible by conv.groups " +
           std::to_string(conv.groups));
  require(!any_of(conv.kernel_size, non_positive), "conv.kernel_size", conv.kernel_size,
          "must be positive (a zero kernel is an empty weight; not modelled)");
  require(!any_of(conv.stride, non_positive), "conv.stride", conv.stride, "non-positive stride is not supported");
  require(!any_of(conv.padding, negative), "conv.padding", conv.padding, "negative padding is not supported");
  require(!any_of(conv.output_padding, negative), "conv.output_padding", conv.output_padding,
          "negative output_padding is not supported");
  require(!any_of(conv.dilation, non_positive), "conv.dilation", conv.dilation, "dilation should be greater than zero");
  for (int a = 0; a < 3; ++a)
    if (!(conv.output_padding[a] < conv.stride[a] || conv.output_padding[a] < conv.dilation[a]))
      reject("conv.output_padding " + conv.output_padding.str() + " must be smaller than either conv.stride " +
             conv.stride.str() + " or conv.dilation " + conv.dilation.str());
}

const char* to_string(Distribution d) {
  switch (d) {
    case Distribution::Uniform: return "uniform";
    case Distribution::Exact: return "exact";
  }
  return "?";
}

Distribution distribution_from_string(const std::string& s) {
  if (s == "uniform") return Distribution::Uniform;
  if (s == "exact") return Distribution::Exact;
  throw InvalidProblem("invalid problem: distribution must be uniform or exact, got '" + s + "'");
}

}  // namespace ladder::tracks
