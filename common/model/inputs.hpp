// Deterministic host-side inputs, drawn from a seed with a counter-based generator so that
// any element can be computed independently (in parallel) and every platform agrees.
#pragma once

#include <vector>

#include "problem.hpp"
#include "uniform01.hpp"  // uniform01(seed, stream, index), mix64

namespace ladder {

/// Host copies of the four inputs, fp32, layouts as in Problem.
struct HostInputs {
  std::vector<float> x;          ///< (batch, in_channels, in_h, in_w)
  std::vector<float> weight;     ///< (in_channels, out_channels/groups, kH, kW)
  std::vector<float> conv_bias;  ///< (out_channels)
  std::vector<float> bias;       ///< (out_channels, 1, 1)
};

/// Draws the inputs for `p` (p.distribution, p.seed):
///  - weight, conv_bias ~ U(-b, b), b = 1/sqrt(fan_in), fan_in = (out_channels/groups)*kH*kW
///    (PyTorch's default ConvTranspose2d initialization; fan_in is weight.size(1)*kH*kW),
///    except for exact inputs (below);
///  - bias ~ bias_scale * N(0, 1) (torch.randn in the KernelBench model, bias_scale 1);
///  - x ~ U[0,1) (uniform), N(0,1) (normal), or structured: plane (n, ci) is
///    mean[n,ci] + a*(row ramp) + b*(column ramp) + U(-0.1, 0.1), with plane means spread
///    evenly over [-2, 2] in a seeded random order, so every plane has a clearly different mean
///    and a wrong row or column mapping changes the pooled value;
///  - exact: small integers on which every fp32 sum any stage forms is exact (see below).
/// Throws InvalidProblem if p is invalid, or for exact inputs if p is too large for them.
HostInputs make_inputs(const Problem& p);

/// Exact inputs. A sum of integers is exact in fp32, in any order and any grouping, when the
/// sum of the absolute values of its terms is below 2^24: every partial sum is then an integer
/// of magnitude < 2^24. So with
///   x in {0, 1}: plane (n, ci) draws ones with probability d[n,ci] * (1 + a*row + c*col)
///     (row, col in [-0.5, 0.5], a, c ~ U(-0.5, 0.5) per plane), the plane densities d spread
///     evenly over [d_max/4, d_max] in a seeded random order (distinct plane means);
///   weight in {-1, 0, 1}, conv_bias in {-2, -1, 1, 2} (never 0, so Hout*Wout <= the bound);
///   bias ~ bias_scale * N(0, 1) as for every distribution (the epilogue is not exact anyway);
/// the sums the stages form (a convT output, a plane sum of convT outputs, the plane sums of x
/// of stages 12 and 13 and their contraction sum_{ci,taps} w*R) are exact while
/// exact_sum_bound < 2^24.
/// d_max is the largest density (<= 0.6) for which the worst case (every |w| = 1, every plane
/// at 1.5 d_max) keeps the expected bound at kExactSumTarget; make_inputs then checks the
/// drawn inputs against kExactSumLimit: a factor 4 below 2^24 (exactness needs 2^24; the
/// exact tolerance's power to see a single wrong term needs twice the bound below 2^23,
/// tolerance.hpp). What is left of fp32 rounding is the division by Hout*Wout and the epilogue
/// (exact_tolerance).
constexpr double kExactSumTarget = 2097152.0;  // 2^21
constexpr double kExactSumLimit = 4194304.0;   // 2^22
/// Smallest d_max accepted: below it x would be almost all zeros (a dropped row could be empty).
constexpr double kExactMinDensity = 1.0 / 1024.0;

/// The largest plane density d_max of exact inputs for `p` (see above).
/// Throws InvalidProblem naming the sizes when it would fall below kExactMinDensity.
double exact_max_density(const Problem& p);

/// max over (n, co) of  Hout*Wout*|cb[co]| + sum_{ci in group(co), taps} |w| * sum_{plane} |x[n,ci]|
/// and over planes of sum |x[n,ci]|: an upper bound on the sum of |terms| of every sum a stage
/// forms for one pooled value (the convT sums, the plane sums, the sums of x of stages 12 and 13
/// and their contraction), since each tap sees at most the whole input plane. Any inputs; OpenMP.
double exact_sum_bound(const Problem& p, const HostInputs& in);

/// For inputs that did not come from make_inputs (the ladder's --inputs DIR) checked at the exact
/// tolerance: throws InvalidProblem naming the first x, weight or conv_bias element that is not an
/// integer, or the sum bound when it is not below kExactSumLimit.
void check_exact_inputs(const Problem& p, const HostInputs& in);

/// Standard normal via Box-Muller on two counter-based uniforms.
float standard_normal(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace ladder
