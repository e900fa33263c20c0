// Error bounds for fp32 results against the fp64 oracles, derived rather than tuned.
//
// Every stage computes pooled[n,co] as a sum of the same products w*x (plus cb), grouped in some
// order, each addition rounded in fp32 (unit roundoff u = 2^-24). The longest chain of roundings
// any stage builds has n_chain = taps*Cin/g (a conv output) + Hout*Wout (a plane sum)
// + H*W (stage 06's input plane sum) + Cin/g*taps (its contraction) additions.
// The classic bound gamma_n = n*u/(1-n*u) times sum|terms| is far too loose at n ~ 2.6e5 to catch
// a wrong kernel, so we use the probabilistic bound of Higham & Mary (SIAM J. Sci. Comput. 2019,
// "A new approach to probabilistic rounding error analysis", Thm 3.1): with independent rounding
// errors, |error| <= lambda*sqrt(n)*u*sum|terms| holds with probability at least
// 1 - 2n*exp(-lambda^2/2). lambda = 8 makes that failure probability < 1e-8 per element at
// n = 2.6e5. sum|terms|/(Hout*Wout) is bounded by Reference::magnitude. Converting the final
// mean to fp32 adds u*|pooled|.
//
// y[n] = scale*lse(pooled[n,:] + bias): d lse / d z_co = softmax_co <= 1 and sums to 1, so a
// pooled error e shifts y by at most scale*max_co e. The fp32 epilogue itself adds a few ulps
// per exp and log and a sum of Cout terms: (Cout + 8)*u*(|lse| + 1), times scale.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "oracle.hpp"
#include "problem.hpp"

namespace ladder {

constexpr double kFp32UnitRoundoff = 5.9604644775390625e-08;  // 2^-24
constexpr double kProbabilisticLambda = 8.0;

/// Absolute tolerances, per element, for pooled (batch*out_channels) and y (batch).
struct Tolerance {
  std::vector<double> pooled;
  std::vector<double> y;
};

/// The longest chain of fp32 additions any stage forms for one pooled value (see above).
double fp32_chain_length(const Problem& p);
/// Tolerance of a stage computing in a format with the given unit roundoff against the exact
/// result; fp32_tolerance uses 2^-24, and 2^-53 gives the bound for fp64 stages and oracles.
Tolerance rounding_tolerance(const Problem& p, const Reference& ref, double unit_roundoff);
inline Tolerance fp32_tolerance(const Problem& p, const Reference& ref) {
  return rounding_tolerance(p, ref, kFp32UnitRoundoff);
}
constexpr double kFp64UnitRoundoff = 1.1102230246251565e-16;  // 2^-53

/// Worst disagreement of a result with a reference, in absolute terms and as a multiple of
/// the tolerance. NaN anywhere (including a poisoned, unwritten output) fails.
struct Agreement {
  double max_abs_pooled = 0;
  double max_abs_y = 0;
  double worst_ratio = 0;     ///< max over elements of |diff| / tolerance; <= 1 passes
  int64_t worst_index = -1;   ///< pooled index (or batch*Cout + n for y) of the worst element
  int64_t nan_count = 0;
  bool pass() const { return nan_count == 0 && worst_ratio <= 1.0; }
  std::string summary() const;
};

/// Compares (pooled, y) with (ref_pooled, ref_y); tolerances scaled by `tolerance_factor`
/// (2 when both sides are fp32 results, each within 1x of the truth).
Agreement compare(const std::vector<double>& pooled, const std::vector<double>& y,
                  const std::vector<double>& ref_pooled, const std::vector<double>& ref_y,
                  const Tolerance& tol, double tolerance_factor = 1.0);

}  // namespace ladder
