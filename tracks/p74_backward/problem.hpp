// Problem 74 of KernelBench level 2, the third track's problem, and its backward pass:
//   x -> ConvTranspose3d -> LeakyReLU(negative_slope) -> * multiplier -> LeakyReLU(negative_slope)
//     -> MaxPool3d
// with multiplier a parameter of shape (out_channels, 1, 1, 1) drawn from N(0, 1). Parameters are
// named as in torch.nn.ConvTranspose3d, torch.nn.LeakyReLU and torch.nn.MaxPool3d; the rules
// validate() enforces are PyTorch's (problem.cpp names each).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "shared/geometry3d.hpp"  // Triple, ConvTranspose3dParams, InvalidProblem, Distribution

namespace ladder::p74 {

using tracks::checked_mul;
using tracks::ConvTranspose3dParams;
using tracks::Distribution;
using tracks::InvalidProblem;
using tracks::Triple;

/// torch.nn.MaxPool3d(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
/// ceil_mode=False). Padding counts as -inf: a padded position never wins.
struct MaxPool3dParams {
  Triple kernel_size = Triple::cube(2);
  std::optional<Triple> stride;  ///< None: PyTorch's default, stride = kernel_size
  Triple padding = Triple::cube(0);
  Triple dilation = Triple::cube(1);
  bool ceil_mode = false;
  Triple effective_stride() const { return stride.value_or(kernel_size); }
};

/// Sizes and parameters. Tensors (fp32, contiguous, NCDHW):
///   x          (batch, in_channels, in_size)
///   weight     (in_channels, out_channels/groups, conv.kernel_size)  ConvTranspose3d weight
///   bias       (out_channels)                                        ConvTranspose3d bias
///   multiplier (out_channels)                                        the (out_channels,1,1,1) parameter
///   y          (batch, out_channels, conv_size())                    ConvTranspose3d output + bias
///   z          (batch, out_channels, conv_size())   lrelu(multiplier * lrelu(y)): the pool's input
///   out        (batch, out_channels, out_size())                     MaxPool3d output
/// The defaults are KernelBench's sizes.
struct Problem74 {
  int64_t batch = 16;
  int64_t in_channels = 16;
  int64_t out_channels = 32;
  Triple in_size{16, 32, 32};  ///< (D, H, W) of x
  ConvTranspose3dParams conv;  ///< kernel_size 3, stride 2, padding 1, output_padding 1
  /// LeakyReLU's negative_slope, the same for both activations. PyTorch converts it to the
  /// tensor's dtype: the oracle uses float(negative_slope) too (oracle.hpp).
  double negative_slope = 0.2;
  MaxPool3dParams pool;
  Distribution distribution = Distribution::Uniform;
  uint64_t seed = 42;

  /// KernelBench's sizes: batch 16, 16 -> 32 channels, input 16x32x32, ConvTranspose3d(kernel_size
  /// 3, stride 2, padding 1, output_padding 1), LeakyReLU(0.2), MaxPool3d(2). Conv output
  /// 32x64x64, pooled 16x32x32.
  static Problem74 kernelbench();

  /// Throws InvalidProblem naming the first parameter PyTorch would reject, plus our own
  /// restrictions, each named in its message: batch and out_channels positive, negative_slope
  /// finite, element counts within int64, and every MaxPool3d window holding at least one
  /// position of its input (PyTorch would output -inf for a window of padding alone).
  void validate() const;

  Triple conv_size() const;  ///< ConvTranspose3d output size per axis (tracks::conv_transpose_out_size)
  Triple out_size() const;   ///< MaxPool3d output size per axis (max_pool_out_size)

  int64_t in_per_group() const { return in_channels / conv.groups; }
  int64_t out_per_group() const { return out_channels / conv.groups; }
  /// Element counts, int64; throw InvalidProblem when a product overflows.
  int64_t x_elems() const;
  int64_t weight_elems() const;
  int64_t conv_elems() const;   ///< batch*out_channels*prod(conv_size()): y and z
  int64_t out_elems() const;    ///< batch*out_channels*prod(out_size())
  int64_t pool_window() const;  ///< kD*kH*kW of the pool: the values one max compares
  int64_t conv_taps() const;    ///< kD*kH*kW of the convolution

  /// Multiply-adds of the convolution counting only taps that land inside its output.
  double conv_macs() const;

  std::string describe() const;  ///< one line, PyTorch's parameter names
};

/// PyTorch's MaxPool3d output size (MaxPool3d page, "Shape"): floor, or with ceil_mode ceil, of
/// (in + 2*padding - dilation*(kernel_size - 1) - 1)/stride, plus 1; with ceil_mode the last
/// window must start inside the input or the left padding ((out - 1)*stride < in + padding),
/// else it is dropped. Throws InvalidProblem on int64 overflow; may return <= 0.
int64_t max_pool_out_size(int64_t in, int64_t kernel_size, int64_t stride, int64_t padding, int64_t dilation,
                          bool ceil_mode);

}  // namespace ladder::p74
