// Elementwise tolerances for an fp32 kernel's output of problem 38 against the fp64 oracle,
// derived from the arithmetic rather than tuned. u = 2^-24 (fp32 unit roundoff), lambda = 8.
//
// 1. The convolution output before the clamp, z = bias + sum_k w_k * p_k, where p_k is a pooled
//    value, the mean of at most P = kD*kH*kW (pool) elements of x, and k runs over the
//    K = (in_channels/groups) * (taps that land at this position) products. Rounding errors are
//    bounded with the probabilistic bound of Higham and Mary ("A new approach to probabilistic
//    rounding error analysis", SIAM J. Sci. Comput., 2019), as in common/model/tolerance.hpp: a chain
//    of n roundings of independent errors is off by at most lambda*sqrt(n)*u*sum|terms| with
//    probability at least 1 - 2n*exp(-lambda^2/2). sum|terms| <= M = |bias| + sum_k |w_k| *
//    mean|x| over p_k's window (Reference::magnitude) whether the kernel pools first and then
//    convolves (two chains, P and K + 2 long: lambda*(sqrt(P) + sqrt(K + 2)) <= lambda*sqrt(2(P +
//    K + 2))) or folds the pool into the weights (one chain of K*P + 2), so with
//      n_z = max(2(K + P + 2), K*P + 2),   e_z = (lambda*sqrt(n_z) + 4) * u * M
//    where the 4 covers the roundings outside the chains (1/divisor, the division or product by
//    it, the final store). On Distribution::Exact inputs z is exact in fp32 (oracle.hpp): e_z = 0.
//    The clamp bounds are rounded to fp32 by both sides (oracle.hpp), so they add nothing.
//
// 2. clamp is 1-Lipschitz: |clamp(z') - clamp(z)| <= |z' - z| <= e_z. Where z lies beyond a
//    bound by more than e_z, both sides clamp to it and the error is 0; with clamp_min >
//    clamp_max every element is clamp_max and the error is 0 everywhere.
//
// 3. The softmax of one (n, c) row, s_i = exp(z_i) / sum_j exp(z_j) (the max subtracted by the
//    kernel cancels in the ratio). If every z_j moves by delta_j with |delta_j| <= e (e the
//    largest error of the row), then
//      s_i' / s_i = exp(delta_i) * sum_j exp(z_j) / sum_j exp(z_j + delta_j),
//    where the first factor lies in [exp(-e), exp(e)] and so does the second (a ratio of sums of
//    positive terms, each term's ratio in [exp(-e), exp(e)]): s_i'/s_i in [exp(-2e), exp(2e)],
//    so |s_i' - s_i| <= s_i * (exp(2e) - 1). Nothing better holds in general: the sum couples
//    every element of the row.
//
// 4. The fp32 softmax itself, on the fp32 z (relative errors, first order, t_i = z_i - max):
//      fl(z_i - max):     u*|t_i| in the argument, so u*|t_i| relative in exp(t_i); a kernel that
//                         subtracts the clamp bound hi instead of the max (the fused rungs) rounds
//                         z_i - hi, so |t_i| here is the larger of |z_i - max| and |z_i - hi|;
//      exp:               kappa*u, kappa = 8 (4 ulps; CUDA's expf is within 2 ulps, __expf within
//                         3 for |t| <= 1.7), in the numerator and again in the denominator;
//      the denominator:   its terms' argument roundings, sum_j exp(t_j)*u*|t_j|, relative
//                         u*A/sum, A = sum_j exp(t_j)*|t_j|; its S-term sum, lambda*sqrt(S)*(kappa +
//                         2)*u (Hoeffding's inequality with each step's error bounded by (kappa +
//                         2)*u: one addition, and for an online softmax that rescales the running
//                         sum by exp(old max - new max), one product and one exp);
//      the division and the product by scale: 3u (the division may be a reciprocal and a product).
//    rho_i = u*(|t_i| + A/sum + 2*kappa + 3) + lambda*sqrt(S)*(kappa + 2)*u. A systematic error of
//    exp (a bias) cancels between numerator and denominator; it is counted anyway.
//
// Together, with the factors multiplying (e^a * e^b): per element of the output
//   tol_i = |scale_c| * s_i * (exp(2e + rho_i*(1 + 2^-10)) - 1) + 2^-125 * max(1, |scale_c|),
// the 2^-10 for second-order terms and the fp64 oracle's own error, the last term for outputs
// that underflow or are flushed to zero (fp32's smallest normal is 2^-126).
// At the KernelBench size (S = 131072) the softmax's own part, lambda*sqrt(S)*10*u, is 1.73e-3
// relative; a wrong term of z moves its output by |w*p| relative (1/128 or more on exact inputs),
// while a single term missing from the denominator (1/S relative) is below every bound here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "oracle.hpp"
#include "problem.hpp"
#include "shared/agreement.hpp"  // Agreement, compare

namespace ladder::p38 {

using tracks::Agreement;
using tracks::compare;

constexpr double kFp32UnitRoundoff = 5.9604644775390625e-08;  // 2^-24
constexpr double kProbabilisticLambda = 8.0;
constexpr double kExpRelativeError = 8.0;  // kappa: exp within 4 ulps = 8u relative

/// How a rung forms the convolution's products: FP32 FMAs, or tensor cores on TF32-rounded
/// operands (the pooled values and the weights) accumulating in fp32. Tf32Sums is a check, not a
/// rung's precision: a TF32 rung against an oracle whose operands are already rounded to TF32
/// (the midpoint test), where only the sums' part of the Tf32 bound remains.
enum class Precision { Fp32, Tf32, Tf32Sums };

/// The chain length n_z of step 1 for a convolution sum of K products and a pool window of P.
double z_chain_length(int64_t K, int64_t P);

/// e_z of step 1 for every convolution output (before the clamp), same layout as ref.conv:
/// (batch, out_channels, out_size()). All zero for Distribution::Exact.
///
/// Precision::Tf32 (step 1 for tensor cores): each operand is rounded to TF32 (relative error at
/// most u_t = 2^-11, to nearest), so each product w*p is off by at most (2u_t + u_t^2)|w*p| before
/// any addition. The bound is deterministic, (2u_t + u_t^2) * M: one pooled value's rounding meets
/// every output it feeds, so the errors are not independent. On top comes step 1's chain with 2u
/// for u, as tensor cores may truncate instead of rounding when they add (Fasi, Higham, Mikaitis
/// and Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Computer Science, 2021); this is
/// how common/model/tolerance.hpp bounds the main ladder's TF32 stages. On Exact inputs every
/// operand is a TF32 value (a pooled value is at most 3*P over a power of two, 11 significant bits
/// for P <= 682; weights are j/16), so e_z stays 0 there; past that window it is the rounding term.
std::vector<double> z_error_bound(const Problem38& p, const Reference& ref, Precision precision = Precision::Fp32);

/// The absolute tolerance of every output element (layout of ref.out), steps 1-4 above, with step
/// 1 at `precision`. Throws std::invalid_argument when ref does not match p's sizes.
std::vector<double> output_tolerance(const Problem38& p, const Reference& ref, Precision precision = Precision::Fp32);

}  // namespace ladder::p38
