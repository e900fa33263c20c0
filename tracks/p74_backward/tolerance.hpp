// Elementwise tolerances of an fp32 rung of problem 74 against the fp64 oracles, derived from the
// arithmetic (tolerance.cpp gives each derivation), and the checks that apply them.
//
// Forward: y is a sum of (in_channels/groups)*taps products plus the bias; its error is bounded
// probabilistically (Higham and Mary, SIAM J. Sci. Comput. 2019, as in the other tracks) by
// e_y = (lambda*sqrt(n) + c)*u*|y|_1 with |y|_1 = Forward::magnitude. LeakyReLU and max are
// 1-Lipschitz and multiplying by the multiplier scales errors by |multiplier|, plus the roundings
// of the two products.
// The argmax of a window is checked as PyTorch defines it where the oracle's order is clear: a
// rung may pick another position only where that position's value is within the tolerance of the
// maximum (a near-tie that fp32 cannot resolve). On Exact inputs every value is exact and the
// argmax must be the first maximum, offset for offset.
// A TF32 rung (Precision::Tf32: x and weights rounded to TF32 before the products, FP32 sums, as
// on tensor cores) is held to a wider bound on y (tolerance.cpp derives it); z, out and the
// argmax follow from e_y by the same steps, so a near-tie within the TF32 bound is accepted and a
// clearly smaller position is not, for either precision.
// Backward: each gradient is a sum of products of fp32 values; its error is bounded the same way
// from its term count and magnitude (Grads::terms_*, Grads::mag_*), in any summation order (an
// atomic, a tree, a shuffle, a two-level reduction). A TF32 rung (rung 11: the two convolution
// gradients on tensor cores from TF32-rounded operands) is held to a wider bound on grad_x and
// grad_weight (tolerance.cpp derives it); grad_bias and grad_multiplier keep the fp32 one. On
// Exact inputs the bound is 0 for either precision.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "oracle.hpp"
#include "shared/agreement.hpp"  // Agreement, compare
#include "problem.hpp"

namespace ladder::p74 {

using tracks::Agreement;
using tracks::compare;

/// How a rung forms the convolution's products: FP32 FMAs, or tensor cores on TF32-rounded operands
/// (x and weights in the forward; weights, x and g_y in the backward) with FP32 accumulation. (The main ladder's ladder::Precision, common/model/tolerance.hpp,
/// lives with that ladder's Problem and Reference; the track keeps its own.)
enum class Precision { Fp32, Tf32 };
const char* precision_name(Precision p);  ///< "fp32", "tf32"

struct ForwardTolerance {
  std::vector<double> y;    ///< e_y per conv-sized element
  std::vector<double> out;  ///< per pool-sized element
};
/// The bound of a rung of `precision` (tolerance.cpp). Throws std::invalid_argument when ref does
/// not match p's sizes.
ForwardTolerance forward_tolerance(const Problem74& p, const Forward& ref, Precision precision = Precision::Fp32);

struct ForwardCheck {
  Agreement out;                 ///< out against the oracle
  Agreement y;                   ///< the saved y against the oracle's y at the rung's argmax
  int64_t argmax_failures = 0;   ///< offsets out of range, on padding, or not (near-)maximal
  int64_t argmax_differs = 0;    ///< offsets different from the oracle's (near-ties; information)
  int64_t first_bad_argmax = -1;  ///< flat index of the first failure
  bool pass() const { return out.pass() && y.pass() && argmax_failures == 0; }
  std::string summary() const;  ///< one line
};
/// Throws std::invalid_argument on mismatched sizes.
ForwardCheck check_forward(const Problem74& p, const Forward& ref, const ForwardTolerance& tol,
                           const ForwardResult& got);

struct GradTolerance {
  std::vector<double> grad_x, grad_weight, grad_bias, grad_multiplier;
};
/// The bound of a backward rung of `precision` (tolerance.cpp): Tf32 widens grad_x's and
/// grad_weight's. Throws std::invalid_argument when ref's magnitudes and term counts differ in size.
GradTolerance grad_tolerance(const Problem74& p, const Grads& ref, Precision precision = Precision::Fp32);

struct GradCheck {
  Agreement x, weight, bias, multiplier;
  bool pass() const { return x.pass() && weight.pass() && bias.pass() && multiplier.pass(); }
  std::string summary() const;  ///< one line per gradient that fails, or one "PASS" line
};
/// Throws std::invalid_argument on mismatched sizes.
GradCheck check_grads(const Grads& ref, const GradTolerance& tol, const GradResult& got);

}  // namespace ladder::p74
