// The problem every stage solves: ConvTranspose2d -> global average pool -> + bias ->
// log-sum-exp over channels -> sum -> x scale (KernelBench level 2, problem 42).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ladder {

/// A (height, width) pair, as PyTorch accepts for every spatial ConvTranspose2d parameter.
struct Pair {
  int64_t h = 0;
  int64_t w = 0;
  static Pair square(int64_t v) { return {v, v}; }
  bool operator==(const Pair& o) const { return h == o.h && w == o.w; }
};

/// How inputs are drawn (see inputs.hpp).
enum class Distribution {
  Uniform,     ///< x ~ U[0,1): torch.rand, KernelBench's current inputs
  Normal,      ///< x ~ N(0,1): torch.randn, the first published version
  Structured,  ///< each (n, ci) plane has its own mean and gradient: for tests
  Exact,       ///< small integers on which every fp32 sum the stages form is exact (inputs.hpp)
};

/// Thrown for parameter sets PyTorch would reject; the message names the parameter and value.
class InvalidProblem : public std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Sizes and parameters, named as in torch.nn.ConvTranspose2d.
/// Tensors (all fp32, contiguous NCHW):
///   x         (batch, in_channels, in_h, in_w)
///   weight    (in_channels, out_channels/groups, kernel_size.h, kernel_size.w)
///   conv_bias (out_channels)
///   bias      (out_channels, 1, 1)
///   convT out (batch, out_channels, out_h(), out_w())
///   pooled    (batch, out_channels);  y (batch, 1)
struct Problem {
  int64_t batch = 16;
  int64_t in_channels = 64;
  int64_t out_channels = 128;
  int64_t in_h = 512;
  int64_t in_w = 512;
  Pair kernel_size = Pair::square(3);
  Pair stride = Pair::square(1);
  Pair padding = Pair::square(0);
  Pair output_padding = Pair::square(0);
  Pair dilation = Pair::square(1);
  int64_t groups = 1;
  double scale = 10.0;
  /// Multiplies the drawn bias (bias ~ bias_scale * N(0,1)); large values make exp overflow
  /// in a log-sum-exp that does not subtract the max. 1 in KernelBench.
  double bias_scale = 1.0;
  Distribution distribution = Distribution::Uniform;
  uint64_t seed = 42;

  /// KernelBench's current sizes: batch 16, 64 -> 128 channels, 512x512, kernel 3, x ~ U[0,1).
  static Problem kernelbench();
  /// The first published sizes: batch 128, 3 -> 16 channels, 32x32, kernel 3, x ~ N(0,1).
  static Problem kernelbench_v1();

  /// Throws InvalidProblem naming the first parameter that PyTorch would reject.
  void validate() const;

  /// PyTorch's formula: (in - 1)*stride - 2*padding + dilation*(kernel - 1) + output_padding + 1.
  int64_t out_h() const;
  int64_t out_w() const;

  int64_t in_per_group() const { return in_channels / groups; }
  int64_t out_per_group() const { return out_channels / groups; }
  int64_t taps() const { return kernel_size.h * kernel_size.w; }

  int64_t x_elems() const { return batch * in_channels * in_h * in_w; }
  int64_t weight_elems() const { return in_channels * out_per_group() * taps(); }
  int64_t out_elems() const { return batch * out_channels * out_h() * out_w(); }
  int64_t pooled_elems() const { return batch * out_channels; }

  /// Multiply-adds of the convolution counting only taps that land inside the output
  /// (the scatter view: each input element times each tap that hits the output).
  double conv_macs() const;

  std::string describe() const;  ///< one line, PyTorch's parameter names
};

/// Bytes that must move and flops that must be done, per phase (fp32 = 4 bytes).
struct PhaseCost {
  double bytes = 0;  ///< each input read once, each output written once
  double flops = 0;  ///< a multiply-add counts 2
};
struct ProblemCost {
  PhaseCost conv;      ///< x, weight, conv_bias -> convT output (written out); flops = 2 * conv_macs()
  PhaseCost pool;      ///< convT output -> pooled
  PhaseCost epilogue;  ///< pooled, bias -> y
  PhaseCost fused;     ///< the whole pipeline with nothing materialized: x, weight, biases -> y
};
ProblemCost cost_of(const Problem& p);

/// The input rows ih in [lo, hi) whose tap k lands inside the output:
/// 0 <= ih*stride - padding + k*dilation < out (the scatter view of the gather form).
/// Shared by the cost model and the linearity oracle; empty ranges have lo == hi.
struct InputRange {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t count() const { return hi - lo; }
};
InputRange valid_input_range(int64_t in, int64_t out, int64_t stride, int64_t padding,
                             int64_t dilation, int64_t k);

const char* to_string(Distribution d);
/// Parses "uniform", "normal", "structured" or "exact"; throws InvalidProblem otherwise.
Distribution distribution_from_string(const std::string& s);

}  // namespace ladder
