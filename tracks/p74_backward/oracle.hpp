// Inputs and fp64 oracles of problem 74: the forward pass (with the argmax of every pooling
// window) and every gradient of the backward pass. The oracles widen the fp32 inputs to double
// and compute each step with straightforward loops; they cost about conv_macs() multiply-adds
// each (3.6e9 at the KernelBench size: seconds, so tests use small problems).
//
// The backward pass, for the upstream gradient g = dL/d out (batch, out_channels, out_size()):
//   routed gradient  g_z[n,c,o] = sum of g[n,c,q] over the windows q whose argmax is o (MaxPool3d
//                    sends each window's gradient to its first maximum; overlapping windows add)
//   a = lrelu(y), m = multiplier[c]*a, with lrelu'(v) = 1 if v > 0 else negative_slope (PyTorch's
//   leaky_relu_backward: the slope at exactly 0 is negative_slope)
//   g_m = g_z * lrelu'(m)            grad_multiplier[c] = sum over n, o of g_m * a
//   g_y = g_m * multiplier[c] * lrelu'(y)
//   grad_bias[c]      = sum over n, o of g_y
//   grad_weight[ci, co', k] = sum over n, o of x[n, ci, i] * g_y[n, co, o], o = i*stride - padding + k*dilation
//   grad_x[n, ci, i]  = sum over co in ci's group and taps k of weight[ci, co', k] * g_y[n, co, o]
// (co' = co mod out_channels/groups). g_y is zero except at argmax positions: at most one
// position in eight carries gradient at the KernelBench size.
#pragma once

#include <cstdint>
#include <vector>

#include "problem.hpp"

namespace ladder::p74 {

/// Host copies of the inputs, fp32, layouts as in Problem74.
struct Inputs {
  std::vector<float> x;           ///< (batch, in_channels, D, H, W)
  std::vector<float> weight;      ///< (in_channels, out_channels/groups, kD, kH, kW)
  std::vector<float> bias;        ///< (out_channels)
  std::vector<float> multiplier;  ///< (out_channels)
};

/// Draws inputs from p.seed (common/toolkit/uniform01.hpp's counter-based generator):
///  - Uniform: x ~ U[0,1); weight, bias ~ U(-b, b), b = 1/sqrt(fan_in), fan_in =
///    (out_channels/groups)*kD*kH*kW (PyTorch's default ConvTranspose3d initialization);
///    multiplier ~ N(0, 1) (Box-Muller);
///  - Exact: x in {0..3}, weight = j/16 (j in -2..2), bias = j/16 (j in -4..4), multiplier =
///    j/4 (j in -4..4, not 0): with a power-of-two negative_slope every value of the forward and
///    backward passes is a dyadic number that fp32 holds exactly (exact_check), so results are
///    exact in any summation order, and ties in the pool are real ties.
/// Throws InvalidProblem if p is invalid, or for Exact if exact_check() fails.
Inputs make_inputs(const Problem74& p);

/// The upstream gradient, (batch, out_channels, out_size()), from p.seed + 1: U(-1, 1), or for
/// Exact, integers in -3..3.
std::vector<float> make_grad_out(const Problem74& p);

/// Throws InvalidProblem (naming the cause) unless, for Exact inputs, negative_slope is a power
/// of two and every sum of the forward and backward passes stays below 2^24 units of its grid.
void exact_check(const Problem74& p);

/// negative_slope as PyTorch applies it to an fp32 tensor: rounded to fp32.
double slope(const Problem74& p);

/// The window offset of conv position o in pooling window q is (jd*kH + jh)*kW + jw, where
/// (jd, jh, jw) indexes the window's kernel positions (position q*stride - padding + j*dilation
/// per axis); the argmax tensors below hold these offsets, int32.

/// The forward pass in fp64. Conv-sized tensors are (batch, out_channels, conv_size()),
/// pool-sized ones (batch, out_channels, out_size()).
struct Forward {
  std::vector<double> y;          ///< ConvTranspose3d output + bias (conv-sized)
  std::vector<double> magnitude;  ///< |bias| + sum |w*x| per y element: bounds its rounding (conv-sized)
  std::vector<double> z;          ///< lrelu(multiplier * lrelu(y)) (conv-sized)
  std::vector<double> out;        ///< max of z over each window (pool-sized)
  std::vector<int32_t> argmax;    ///< window offset of the first maximum in window order (pool-sized)
  std::vector<double> y_at_argmax;  ///< y at that position (pool-sized)
  std::vector<double> multiplier;   ///< (out_channels), from the inputs: the tolerances scale with it
};

/// Throws std::invalid_argument when the sizes of `in` do not match p.
Forward forward(const Problem74& p, const Inputs& in);

/// What a forward rung saves for the backward: the argmax offsets and y there, rounded to fp32.
/// Both (batch, out_channels, out_size()).
struct Saved {
  std::vector<int32_t> argmax;
  std::vector<float> y;
};
Saved saved_from(const Forward& f);

/// A rung's results, fp32, the same layouts: what the checks below compare with the oracle.
struct ForwardResult {
  std::vector<float> out;       ///< (batch, out_channels, out_size())
  std::vector<int32_t> argmax;  ///< window offsets, same shape
  std::vector<float> y;         ///< y at the argmax, same shape
  Saved saved() const { return {argmax, y}; }
};
struct GradResult {
  std::vector<float> grad_x, grad_weight, grad_bias, grad_multiplier;
};

/// The flat conv-sized index of the position window `q` (flat pool-sized index) points at with
/// window offset `offset`, or -1 when that position is padding. Throws std::out_of_range for an
/// offset outside [0, pool_window()).
int64_t argmax_position(const Problem74& p, int64_t q, int32_t offset);

/// Gradients in fp64, each with the sum of the absolute values of its terms (the magnitude its
/// rounding error scales with) and the number of its nonzero terms.
struct Grads {
  std::vector<double> grad_x, grad_weight, grad_bias, grad_multiplier;  ///< shapes of x, weight, bias, multiplier
  std::vector<double> mag_x, mag_weight, mag_bias, mag_multiplier;      ///< sum |term|, same shapes
  std::vector<int64_t> terms_x, terms_weight, terms_bias, terms_multiplier;  ///< nonzero terms, same shapes
};

/// The backward pass from the saved state (as the forward rung saved it, so rung and oracle route
/// the gradient through the same windows and the same y) and the upstream gradient. Throws
/// std::invalid_argument on mismatched sizes or an argmax offset outside the window.
Grads backward(const Problem74& p, const Inputs& in, const Saved& saved, const std::vector<float>& grad_out);

}  // namespace ladder::p74
