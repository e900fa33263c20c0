// Error bounds for fp32 results against the fp64 oracles, derived rather than tuned.
//
// fp32_tolerance, for any inputs. Every stage computes pooled[n,co] as a sum of the same
// products w*x (plus cb), grouped in some order, each addition rounded in fp32 (unit roundoff
// u = 2^-24). The longest chain of roundings any stage builds has n_chain = taps*Cin/g (a conv
// output) + Hout*Wout (a plane sum) + H*W (the input plane sum of stages 12 and 13) +
// Cin/g*taps (their contraction) additions: 576 + 264196 + 262144 + 576 = 5.27e5 at the
// KernelBench size.
// The classic bound gamma_n = n*u/(1-n*u) times sum|terms| is far too loose at that n to catch
// a wrong kernel, so we use the probabilistic bound of Higham & Mary (SIAM J. Sci. Comput. 2019,
// "A new approach to probabilistic rounding error analysis", Thm 3.1): with independent rounding
// errors, |error| <= lambda*sqrt(n)*u*sum|terms| holds with probability at least
// 1 - 2n*exp(-lambda^2/2). With lambda = 8 and n = 5.27e5 that failure probability is
// 2 * 5.27e5 * exp(-32) = 1.3e-8 per pooled value (2.7e-5 for all 2048 of them).
// sum|terms|/(Hout*Wout) is bounded by Reference::magnitude. Converting the final mean to fp32
// adds u*|pooled|. At the KernelBench size this is ~3.5e-4 * magnitude, while a dropped border
// row moves pooled by about pooled/514, and |pooled| is well below magnitude on uniform inputs
// (the w*x terms cancel): such a bug can pass. Hence exact inputs.
//
// exact_tolerance, for exact inputs (inputs.hpp): every sum is exact in fp32, whatever the
// order, so the only roundings of pooled left are in forming the mean. With S the (exact)
// plane sum, P = Hout*Wout (< 2^23, exact in fp32), pooled = S/P = cb + A (A = conv_mean):
//   fl(S/P)                      one rounding:          u*|pooled|
//   fl(S * fl(1/P))              two:                   2u*|pooled| (+ u^2 terms)
//   fl(cb + fl(A)), A from fl(acc * fl(1/P)) or from fp64 then fp32 (06-09): u*|pooled| + 2u*|A|
//   fp64 then one fp32 rounding (stages 12, 13):       u*|pooled| + ~2^-51*(|pooled| + |A|)
// so |error| <= 2u*(|pooled| + |A|), and the factor (1 + 2^-20) covers the u^2 terms and the
// fp64 oracle's own roundings (a few 2^-53 relative). A single wrong term (a dropped row or
// plane, a misread x) moves pooled by at least 1/P, more than this whenever
// P*(|pooled| + |A|) < 2^23; P*(|pooled| + |A|) is at most twice the plane's sum of |terms|,
// which make_inputs checks is below 2^22 for every drawn exact input (inputs.hpp).
// That is the test's power: essentially zero tolerance at any size.
//
// y[n] = scale*lse(pooled[n,:] + bias), in both cases: d lse / d z_co = softmax_co <= 1 and sums
// to 1, so a pooled error e shifts y by at most scale*max_co e. The fp32 epilogue itself adds a
// few ulps per exp and log and a sum of Cout terms: (Cout + 8)*u*(|lse| + 1), times scale.
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

/// Tolerance of a stage that multiplies on tensor cores in TF32 (x and weight each rounded to
/// 10 mantissa bits, unit roundoff u_t = 2^-11, tf32.hpp) and accumulates in fp32. The rounded
/// inputs make each product w*x off by at most (2u_t + u_t^2)|w*x| before any addition: a
/// deterministic bound, (2u_t + u_t^2) * magnitude for pooled (the errors of one x meet every
/// output it feeds, so they are not independent across the plane). On top comes the fp32 bound
/// of rounding_tolerance with 2u for u: tensor cores may truncate instead of rounding to nearest
/// when they add (Fasi, Higham, Mikaitis & Pranesh, "Numerical behavior of NVIDIA tensor cores",
/// PeerJ Computer Science, 2021). At the KernelBench size: 1.67e-3 * magnitude, against 3.46e-4
/// for fp32 stages. Exact inputs (small integers) are TF32 values already: there the exact tolerance
/// still applies.
Tolerance tf32_tolerance(const Problem& p, const Reference& ref);

/// Tolerance of an fp32 stage on exact inputs (Distribution::Exact; see above):
/// pooled 2u*(1 + 2^-20)*(|pooled| + |conv_mean|), y the epilogue's bound on top of
/// scale * max_co of that. Throws std::invalid_argument if ref has no conv_mean.
Tolerance exact_tolerance(const Problem& p, const Reference& ref);
/// How a stage's products are formed: FP32 FMAs, or tensor cores on TF32-rounded inputs.
enum class Precision { Fp32, Tf32 };

/// The tolerance a stage is held to on p's inputs: exact_tolerance for Distribution::Exact (small
/// integers, which TF32 represents as well), otherwise fp32_tolerance, or tf32_tolerance for a
/// Precision::Tf32 stage.
Tolerance stage_tolerance(const Problem& p, const Reference& ref, Precision precision = Precision::Fp32);

/// The grader's tolerance (ladder --check-precision): a stage may form each plane's mean in any
/// correctly rounded order (divide last, multiply by a rounded 1/P, scale every element as it is
/// added, divide partial sums). On exact inputs whose planes hold P = 2^k elements, every one of
/// those orders is exact (1/P is a power of two, every partial sum a short multiple of it), so
/// exact_tolerance still holds with its full power. On exact inputs with any other P, scaling
/// before summing rounds every term, and those rounding errors are not independent: most of an
/// exact input's plane is one value (the conv bias, x being sparse), whose scaled copies round the
/// same way addition after addition, so the error of a long chain grows like P, not sqrt(P), and
/// the probabilistic bound of fp32_tolerance does not hold (scaling as added in index order exceeds
/// it on 514 x 514 planes: AnyOrderTolerance.ConstantPlanesNeedTheWorstCaseBound). There the bound
/// is the larger of exact_tolerance and worst_case_mean_tolerance. Otherwise stage_tolerance of
/// `precision`.
Tolerance any_order_tolerance(const Problem& p, const Reference& ref, Precision precision);
/// The deterministic bound on forming a plane's mean from its P exact fp32 terms (the convT
/// outputs) in any correctly rounded order: at most P + 1 roundings on a chain (P - 1 additions,
/// the rounded 1/P and the product), so |error| <= gamma_{P+1} * sum|terms| / P + u*|pooled|, with
/// gamma_n = n*u/(1 - n*u) (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
/// Lemma 3.1 and section 4.2). sum|terms| / P <= max(1, H*W/P) * Reference::magnitude, since each
/// x meets each tap at most once. Fp32 unit roundoff; y from pooled as in the other bounds.
Tolerance worst_case_mean_tolerance(const Problem& p, const Reference& ref);
/// True when an output plane holds a power-of-two number of elements (Hout*Wout = 2^k).
bool plane_is_power_of_two(const Problem& p);

/// Worst disagreement of a result with a reference, in absolute terms and as a multiple of
/// the tolerance. A NaN on one side only (including a poisoned, unwritten output) fails; NaN
/// where the reference is NaN and equal infinities agree (torch.logsumexp gives both).
struct Agreement {
  double max_abs_pooled = 0;
  double max_abs_y = 0;
  double worst_ratio = 0;     ///< max over elements of |diff| / tolerance; <= 1 passes
  int64_t worst_index = -1;   ///< pooled index (or batch*Cout + n for y) of the worst element
  int64_t nan_count = 0;      ///< elements that are NaN on one side only
  bool pass() const { return nan_count == 0 && worst_ratio <= 1.0; }
  std::string summary() const;
};

/// Compares (pooled, y) with (ref_pooled, ref_y); tolerances scaled by `tolerance_factor`
/// (2 when both sides are fp32 results, each within 1x of the truth).
Agreement compare(const std::vector<double>& pooled, const std::vector<double>& y,
                  const std::vector<double>& ref_pooled, const std::vector<double>& ref_y,
                  const Tolerance& tol, double tolerance_factor = 1.0);

}  // namespace ladder
