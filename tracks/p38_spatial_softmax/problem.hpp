// Problem 38 of KernelBench level 2, the second track's problem:
//   x -> AvgPool3d -> ConvTranspose3d -> clamp(clamp_min, clamp_max)
//     -> softmax over the flattened spatial dimensions (D*H*W), per sample and channel -> * scale
// with scale a parameter of shape (1, out_channels, 1, 1, 1) initialized to ones.
// Parameters are named as in torch.nn.AvgPool3d and torch.nn.ConvTranspose3d (PyTorch's
// documentation pages of those names); the rules validate() enforces are listed there.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "shared/geometry3d.hpp"  // Triple, ConvTranspose3dParams, InvalidProblem, Distribution

namespace ladder::p38 {

using tracks::checked_mul;
using tracks::conv_transpose_out_size;
using tracks::ConvTranspose3dParams;
using tracks::Distribution;
using tracks::distribution_from_string;
using tracks::InvalidProblem;
using tracks::to_string;
using tracks::Triple;
using tracks::validate_conv_transpose3d;

/// torch.nn.AvgPool3d(kernel_size, stride=None, padding=0, ceil_mode=False,
/// count_include_pad=True); divisor_override is not part of the model (always None).
struct AvgPool3dParams {
  Triple kernel_size = Triple::cube(2);
  std::optional<Triple> stride;  ///< None: PyTorch's default, stride = kernel_size
  Triple padding = Triple::cube(0);
  bool ceil_mode = false;
  bool count_include_pad = true;
  Triple effective_stride() const { return stride.value_or(kernel_size); }
};

/// Sizes and parameters. Tensors (fp32, contiguous, NCDHW):
///   x       (batch, in_channels, in_size.d, in_size.h, in_size.w)
///   pooled  (batch, in_channels, pooled_size())                      AvgPool3d output
///   weight  (in_channels, out_channels/groups, conv.kernel_size)      ConvTranspose3d weight
///   bias    (out_channels)                                            ConvTranspose3d bias
///   z       (batch, out_channels, out_size())                         convT output, clamped
///   scale   (1, out_channels, 1, 1, 1)
///   out     (batch, out_channels, out_size())
/// The defaults are KernelBench's sizes.
struct Problem38 {
  int64_t batch = 32;
  int64_t in_channels = 32;
  int64_t out_channels = 64;
  Triple in_size{32, 64, 64};  ///< (D, H, W) of x
  AvgPool3dParams pool;
  ConvTranspose3dParams conv;
  /// torch.clamp(z, clamp_min, clamp_max) = min(max(z, clamp_min), clamp_max) elementwise: when
  /// clamp_min > clamp_max every element becomes clamp_max (torch.clamp allows that, so we do).
  /// On an fp32 tensor torch rounds both bounds to fp32 first; the oracle does the same.
  double clamp_min = 0.0;
  double clamp_max = 1.0;
  Distribution distribution = Distribution::Uniform;
  uint64_t seed = 42;
  /// false: scale is all ones, as PyTorch initializes the parameter (KernelBench); true: each
  /// channel's scale is drawn from [1/2, 3/2), so that a rung that leaves it out fails (the
  /// grader's problems set it).
  bool random_scale = false;

  /// KernelBench's sizes: batch 32, 32 -> 64 channels, input 32x64x64, AvgPool3d(2),
  /// ConvTranspose3d(kernel_size 3, stride 2, padding 1, output_padding 1), clamp [0, 1],
  /// x ~ U[0,1). Pooled 16x32x32, output 32x64x64.
  static Problem38 kernelbench();

  /// Throws InvalidProblem naming the first parameter that PyTorch would reject (the rules are
  /// in problem.cpp, each with its PyTorch message), plus three restrictions of our own, each
  /// named in its message: batch and out_channels must be positive (PyTorch returns an empty
  /// tensor for 0), clamp bounds must not be NaN, and element counts must fit in int64.
  void validate() const;

  /// AvgPool3d output size per axis (pool_out_size); call validate() first.
  Triple pooled_size() const;
  /// ConvTranspose3d output size per axis, of the pooled input (conv_transpose_out_size).
  Triple out_size() const;

  int64_t in_per_group() const { return in_channels / conv.groups; }
  int64_t out_per_group() const { return out_channels / conv.groups; }
  /// Element counts, in int64; throw InvalidProblem when a product overflows.
  int64_t x_elems() const;
  int64_t pooled_elems() const;
  int64_t weight_elems() const;
  int64_t out_elems() const;
  int64_t spatial() const;       ///< S = D*H*W of the output: the length of one softmax
  int64_t pool_window() const;   ///< kD*kH*kW of the pool: the most terms a pooled value sums
  int64_t conv_taps() const;     ///< kD*kH*kW of the convolution

  /// Multiply-adds of the convolution counting only taps that land inside the output.
  double conv_macs() const;

  std::string describe() const;  ///< one line, PyTorch's parameter names
};

/// PyTorch's pooled size (AvgPool3d page, "Shape"): floor or, with ceil_mode, ceil of
/// (in + 2*padding - kernel_size)/stride, plus 1; with ceil_mode the last window must start
/// inside the input or the left padding, else it is dropped ((out - 1)*stride >= in + padding).
/// Throws InvalidProblem on int64 overflow. May return <= 0 for invalid parameters.
int64_t pool_out_size(int64_t in, int64_t kernel_size, int64_t stride, int64_t padding, bool ceil_mode);

}  // namespace ladder::p38
