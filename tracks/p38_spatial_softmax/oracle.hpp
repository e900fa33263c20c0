// Inputs and the fp64 oracle of problem 38. The oracle widens the fp32 inputs to double and
// computes every step in double with straightforward loops, so its own rounding (~1e-16
// relative) is invisible next to fp32's. It is serial and costs about conv_macs() multiply-adds:
// 2.78e10 at the KernelBench size (Problem38::kernelbench), far too slow for a test; the test
// suite runs small problems, and nothing runs the oracle at that size by default.
#pragma once

#include <cstdint>
#include <vector>

#include "problem.hpp"

namespace ladder::p38 {

/// Host copies of the inputs, fp32, layouts as in Problem38.
struct Inputs {
  std::vector<float> x;       ///< (batch, in_channels, D, H, W)
  std::vector<float> weight;  ///< (in_channels, out_channels/groups, kD, kH, kW)
  std::vector<float> bias;    ///< (out_channels): the ConvTranspose3d bias
  std::vector<float> scale;   ///< (out_channels): the (1, out_channels, 1, 1, 1) parameter
};

/// Draws inputs from p.seed with the counter-based generator of common/toolkit/uniform01.hpp:
///  - weight, bias ~ U(-b, b), b = 1/sqrt(fan_in), fan_in = (out_channels/groups)*kD*kH*kW:
///    PyTorch's default ConvTranspose3d initialization (kaiming_uniform_ with a = sqrt(5) gives
///    bound 1/sqrt(fan_in), and fan_in is weight.size(1) times the kernel volume); scale = 1;
///  - x ~ U[0,1) (Distribution::Uniform), or for Distribution::Exact
///      x in {0, 1, 2, 3},  weight = j/16 with j in {-2..2},  bias = j/16 with j in {-4..4}.
///    Why that is exact: a pooled value is an integer sum S <= 3*kD*kH*kW divided by its divisor
///    q; when every q is a power of two, 2^t, S/q is a dyadic number. Every product pooled*w is
///    then an integer multiple of 2^-(t_max+4), and so is every partial sum of the convolution,
///    in any order or grouping (pool first, or the pool folded into the weights as w/q times x).
///    Such a multiple is exact in fp32 while its magnitude is below 2^24 * 2^-(t_max+4), and no
///    partial sum exceeds sum|terms| <= 1/4 + (in_channels/groups)*kD*kH*kW * 3 * 1/8.
///    exact_check() verifies both conditions.
/// Throws InvalidProblem if p is invalid, or for Exact if exact_check() fails.
Inputs make_inputs(const Problem38& p);

/// Throws InvalidProblem (naming the pool window or the size) unless every AvgPool3d divisor of
/// p is a power of two and the bound of make_inputs stays below 2^24 units of 2^-(t_max+4).
void exact_check(const Problem38& p);

/// AvgPool3d in fp64: (batch, in_channels, pooled_size()), PyTorch's divisor: with
/// count_include_pad the window clipped to the padded input (a ceil_mode window that runs past
/// the right padding counts only up to it), else the window clipped to the input. With
/// `absolute`, averages |x| instead (the magnitude the tolerance needs).
std::vector<double> avg_pool3d(const Problem38& p, const std::vector<float>& x, bool absolute = false);

/// The divisor AvgPool3d uses for window `o` of one axis (a per-axis factor of PyTorch's
/// divisor, which is the product over the three axes).
int64_t pool_divisor(const Problem38& p, int axis, int64_t o);

/// ConvTranspose3d in fp64, gather form: out[n,co,o] = bias[co] + sum over ci in co's group and
/// taps k of in[n,ci,i] * weight[ci, co mod (out_channels/groups), k], with, per axis,
/// i = (o + padding - k*dilation)/stride where that division is exact and 0 <= i < pooled size.
/// in: (batch, in_channels, pooled_size()); returns (batch, out_channels, out_size()).
std::vector<double> conv_transpose3d(const Problem38& p, const std::vector<double>& in,
                                     const std::vector<double>& weight, const std::vector<double>& bias);

/// For each output position (out_size(), row-major), how many taps land on an input element:
/// the product over the axes of the per-axis counts. The convolution sum there has
/// (in_channels/groups) times that many terms (plus the bias).
std::vector<int64_t> taps_per_position(const Problem38& p);

/// clamp bounds as torch.clamp applies them to an fp32 tensor: rounded to fp32.
double clamp_lo(const Problem38& p);
double clamp_hi(const Problem38& p);
/// torch.clamp semantics: min(max(v, lo), hi), so hi wins when lo > hi; NaN stays NaN.
double clamp_value(double v, double lo, double hi);

/// The pipeline's intermediates and output. All (batch, out_channels, S) unless noted.
struct Reference {
  std::vector<double> pooled;      ///< (batch, in_channels, pooled_size())
  std::vector<double> pooled_abs;  ///< the same pool of |x|
  std::vector<double> conv;        ///< ConvTranspose3d output, before the clamp
  std::vector<double> magnitude;   ///< |bias| + sum |w| * pooled_abs: bounds sum |terms| of conv
  std::vector<double> z;           ///< the clamped conv output: the softmax's input
  std::vector<double> row_max;     ///< (batch, out_channels): max over S of z
  std::vector<double> row_sum;     ///< (batch, out_channels): sum over S of exp(z - row_max)
  std::vector<double> scale;       ///< (out_channels), from the inputs
  std::vector<double> out;         ///< exp(z - row_max) / row_sum * scale[c]
};

/// Softmax over S per (n, c) in fp64 with max subtraction, times scale: fills ref.row_max,
/// ref.row_sum and ref.out from ref.z and ref.scale (tests call it again on a perturbed z).
/// Throws std::invalid_argument when z or scale does not match p's sizes.
void softmax_scale(const Problem38& p, Reference& ref);

/// The whole pipeline on `in` (sizes must match p: throws std::invalid_argument otherwise).
Reference reference(const Problem38& p, const Inputs& in);

}  // namespace ladder::p38
