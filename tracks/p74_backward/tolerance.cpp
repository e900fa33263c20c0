// The tolerances of tolerance.hpp, derived. u = 2^-24 (fp32 unit roundoff), lambda = 8; errors
// of sums are bounded with the probabilistic bound of Higham and Mary (SIAM J. Sci. Comput.,
// 2019), as in the other tracks: n roundings of a sum, in any order or tree, are off by at most
// lambda*sqrt(n)*u*sum|terms| with probability at least 1 - 2n*exp(-lambda^2/2).
//
// Forward, per conv position p (Uniform inputs):
//  1. y = bias + sum of K = (in_channels/groups)*(taps landing on p) products x*w. With
//     M = Forward::magnitude = |bias| + sum|x*w|:
//       e_y = (lambda*sqrt(K + 1) + 2)*u*M + (K + 1)*2^-126,
//     the 2 for the products' own roundings (u*M in all, when not fused) and the store, the last
//     term for products or partial sums that underflow or are flushed to zero (each off by at
//     most 2^-126, fp32's smallest normal).
//  2. z = lrelu(mult*lrelu(y)). lrelu is L-Lipschitz, L = max(1, |slope|), so the exact chain
//     moves by at most L^2*|mult|*e_y when y does; the fp32 chain adds three roundings (slope*y,
//     mult*a, slope*m), each relative u on a value of magnitude <= L^2*|mult|*|y'| after the
//     later steps, |y'| <= |y| + e_y. With 2^-10 for second-order terms and the fp64 oracle:
//       e_z = L^2*|mult|*(e_y + 3u*(|y| + e_y))*(1 + 2^-10) + 3*2^-126*L^2*max(1, |mult|).
//  3. max is 1-Lipschitz in the largest deviation: |max z' - max z| <= max |z' - z| over the
//     window, so tol_out = the largest e_z over the window's non-padding positions.
//  The argmax: a rung that picks p while the oracle's first maximum is p* has
//  z'(p) >= z'(p*), so z(p) >= z(p*) - e_z(p*) - e_z(p) >= out - (tol_out + e_z(p)): a rung's
//  choice is accepted when its oracle value is at least that (a near-tie fp32 cannot resolve).
//
// Forward of a TF32 rung (Precision::Tf32), step 1 only, derived as the main ladder's
// tf32_tolerance (common/model/tolerance.hpp) is: x and every weight are rounded to TF32 (10
// mantissa bits, unit roundoff u_t = 2^-11, common/toolkit/tf32.hpp; to nearest, cvt.rna) before
// they multiply, so each product x'*w' = x*w*(1 + d_x)*(1 + d_w), |d| <= u_t, is off by at most
// (2u_t + u_t^2)*|x*w|. That part is deterministic, with no square root: the rounding error of
// one x meets every output it feeds with the same sign, so the errors need not cancel. The
// product of two TF32 values is exact in fp32 (11 + 11 significant bits); the bias is added
// unrounded. The sums are fp32, but tensor cores may truncate instead of rounding to nearest when
// they add (Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores",
// PeerJ Computer Science, 2021), so step 1's probabilistic bound is taken with 2u for u, on the
// rounded terms, whose magnitude is at most (1 + 2u_t + u_t^2)*M:
//       e_y = (2u_t + u_t^2)*M + (lambda*sqrt(K + 1) + 2)*2u*(1 + 2u_t + u_t^2)*M + 2*(K + 1)*2^-126,
//  the last term doubled for operands that TF32 rounds in the subnormal range (absolute error at
//  most 2^-137 each, times the other operand, below 1 for Uniform inputs: under 2^-126 a
//  product). Steps 2 and 3 and the argmax rule are unchanged, on this e_y: the (2u_t + u_t^2)*M
//  term dominates, about 2^-10*M against the fp32 rung's (lambda*sqrt(K + 1) + 2)*u*M. A rung
//  that truncates x or w instead of rounding errs by up to 2u_t each, up to 4u_t a product.
//  On Exact inputs (small dyadic numbers, TF32 values already) the bound stays 0.
//
// Backward, per gradient element (Uniform inputs): a sum of `terms` products, each formed from
// fp32 values with at most six roundings (slope*y, mult*a, slope*g, g_m*mult, slope*(g_m*mult),
// and the product with x, weight or a): each term is off by at most 6u of itself, 6u*mag in all,
// and the sum's roundings (at most `terms` additions, whether the rung adds per window, sums the
// routed gradient of overlapping windows first, or reduces by atomics, trees or two passes) by
// lambda*sqrt(terms)*u*mag:
//       tol = (lambda*sqrt(terms) + 6)*u*mag + terms*2^-120,
// the last term for intermediates that underflow or are flushed (six per term, each <= 2^-126,
// times the later factors, taken as < 10). An element with no nonzero term must be exactly 0.
//
// Backward of a TF32 rung (Precision::Tf32), grad_x and grad_weight, derived as the forward's TF32
// bound is: the two operands of each product (weight and g_y for grad_x, x and the routed g_y for
// grad_weight) are rounded to TF32 (cvt.rna, unit roundoff u_t) before they multiply, so each term
// is off by a further (2u_t + u_t^2) of itself on top of the fp32 chain's six roundings (which now
// end at g_y, the product of two TF32 values being exact in fp32: keeping the six overstates it
// by one u). That part is deterministic, (2u_t + u_t^2)*mag, no square root. The sums are fp32
// on tensor cores that may truncate when they add, so the sum's and the six roundings' term is
// taken with 2u for u, on rounded terms of magnitude at most (1 + 2u_t + u_t^2)*mag, and the
// floor is doubled for operands TF32 rounds in the subnormal range (as the forward's):
//       tol = (2u_t + u_t^2)*mag + (lambda*sqrt(terms) + 6)*2u*(1 + 2u_t + u_t^2)*mag + 2*terms*2^-120.
// The (2u_t + u_t^2)*mag term dominates: about 2^-10*mag against the fp32 rung's
// (lambda*sqrt(terms) + 6)*u*mag. grad_bias and grad_multiplier have no convolution: a TF32 rung
// computes them in fp32, and they keep the fp32 bound. A rung that truncates either operand
// instead of rounding errs by up to 2u_t each, up to 4u_t a term. On Exact inputs (x, weights and
// g_y are TF32 values already: at most 5 significant bits) the bound stays 0.
// Excluded: the branches on y > 0 and m > 0 take the oracle's fp64 m = mult*a; where the fp32
// product underflows to 0 (|mult*a| < 2^-149) a rung takes the other branch. With these inputs
// (|a| >= slope*|y| and |mult| drawn from N(0,1)) that needs |y| below about 1e-44: not met.
//
// Exact inputs (Distribution::Exact): exact_check() guarantees that every value and every
// partial sum is a multiple of its grid below 2^24 units, so fp32 holds it exactly. Its bound on z
// (64*Y*4^|t| < 2^24 for slope +-2^t, Y >= 5/8) keeps |t| <= 9, so the finest grid, weight*g_y's
// 2^(2*min(t,0) - 6), is 2^-24 or coarser: normal numbers, nothing underflows or is flushed.
// Every tolerance is 0 and the argmax must be the oracle's offset.
#include "tolerance.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "common/toolkit/tf32.hpp"  // kTf32UnitRoundoff

namespace ladder::p74 {

namespace {

constexpr double kU = 5.9604644775390625e-08;  // 2^-24
constexpr double kLambda = 8.0;

bool exact(const Problem74& p) { return p.distribution == Distribution::Exact; }

// Taps landing on each conv position of one axis (per-axis factor of the count K).
std::vector<int64_t> taps_on_axis(const Problem74& p, int a) {
  const int64_t n = p.conv_size()[a];
  std::vector<int64_t> count(size_t(n), 0);
  for (int64_t i = 0; i < p.in_size[a]; ++i)
    for (int64_t k = 0; k < p.conv.kernel_size[a]; ++k) {
      const int64_t o = i * p.conv.stride[a] - p.conv.padding[a] + k * p.conv.dilation[a];
      if (o >= 0 && o < n) ++count[size_t(o)];
    }
  return count;
}

void check_forward_sizes(const Problem74& p, const Forward& ref, const char* who) {
  const size_t conv = size_t(p.conv_elems()), out = size_t(p.out_elems());
  if (ref.y.size() != conv || ref.magnitude.size() != conv || ref.z.size() != conv || ref.out.size() != out ||
      ref.argmax.size() != out || ref.y_at_argmax.size() != out || ref.multiplier.size() != size_t(p.out_channels))
    throw std::invalid_argument(std::string(who) + ": the oracle's forward does not match " + p.describe());
}

// e_z of step 2 at every conv position, from e_y there (all 0 on Exact inputs).
std::vector<double> z_errors(const Problem74& p, const Forward& ref, const std::vector<double>& e_y) {
  std::vector<double> e(ref.y.size(), 0.0);
  if (exact(p)) return e;
  const Triple cs = p.conv_size();
  const int64_t spatial = cs.d * cs.h * cs.w;
  const double L = std::max(1.0, std::fabs(slope(p))), floor = 3.0 * std::ldexp(1.0, -126) * L * L;
  for (size_t i = 0; i < e.size(); ++i) {
    const double mult = std::fabs(ref.multiplier[size_t(int64_t(i) / spatial % p.out_channels)]);
    e[i] = L * L * mult * (e_y[i] + 3.0 * kU * (std::fabs(ref.y[i]) + e_y[i])) * (1.0 + std::ldexp(1.0, -10)) +
           floor * std::max(1.0, mult);
  }
  return e;
}

// Calls visit(q, pos) for every pooling window q (flat, pool-sized) and each of its non-padding
// conv positions pos (flat, conv-sized): argmax_position without recomputing sizes per call.
template <class Visit>
void for_each_window_position(const Problem74& p, Visit&& visit) {
  const Triple cs = p.conv_size(), os = p.out_size(), ps = p.pool.effective_stride(), k = p.pool.kernel_size;
  const int64_t out_spatial = os.d * os.h * os.w;
  for (int64_t q = 0; q < p.out_elems(); ++q) {
    const int64_t o[3] = {q / (os.h * os.w) % os.d, q / os.w % os.h, q % os.w}, plane = q / out_spatial;
    for (int64_t jd = 0; jd < k.d; ++jd) {
      const int64_t d = o[0] * ps.d - p.pool.padding.d + jd * p.pool.dilation.d;
      if (d < 0 || d >= cs.d) continue;
      for (int64_t jh = 0; jh < k.h; ++jh) {
        const int64_t h = o[1] * ps.h - p.pool.padding.h + jh * p.pool.dilation.h;
        if (h < 0 || h >= cs.h) continue;
        for (int64_t jw = 0; jw < k.w; ++jw) {
          const int64_t w = o[2] * ps.w - p.pool.padding.w + jw * p.pool.dilation.w;
          if (w >= 0 && w < cs.w) visit(q, ((plane * cs.d + d) * cs.h + h) * cs.w + w);
        }
      }
    }
  }
}

/// How a precision enters the bounds above: rel, the operands' rounding relative to each product;
/// u, the unit roundoff of the sums; floors, how many underflow floors. fp32: (0, u, 1); tf32:
/// (2u_t + u_t^2, 2u, 2). The forward and the backward bounds both take it from here.
struct Rounding {
  double rel, u, floors;
};
Rounding rounding_of(Precision precision) {
  if (precision != Precision::Tf32) return {0.0, kU, 1.0};
  return {2.0 * kTf32UnitRoundoff + kTf32UnitRoundoff * kTf32UnitRoundoff, 2.0 * kU, 2.0};
}

// The backward bound of one gradient at `precision` (Tf32: products of TF32-rounded operands, above).
std::vector<double> grad_tol(const std::vector<double>& mag, const std::vector<int64_t>& terms, bool is_exact,
                             Precision precision = Precision::Fp32) {
  if (mag.size() != terms.size())
    throw std::invalid_argument("grad_tolerance: magnitudes and term counts differ in size");
  std::vector<double> tol(mag.size(), 0.0);
  if (is_exact) return tol;
  const auto [rel, u, floors] = rounding_of(precision);
  for (size_t i = 0; i < tol.size(); ++i) {
    const double n = double(terms[i]);
    tol[i] = rel * mag[i] + (kLambda * std::sqrt(n) + 6.0) * u * (1.0 + rel) * mag[i] +
             floors * n * std::ldexp(1.0, -120);
  }
  return tol;
}

}  // namespace

const char* precision_name(Precision p) { return p == Precision::Tf32 ? "tf32" : "fp32"; }

ForwardTolerance forward_tolerance(const Problem74& p, const Forward& ref, Precision precision) {
  p.validate();
  check_forward_sizes(p, ref, "forward_tolerance");
  ForwardTolerance t;
  t.y.assign(ref.y.size(), 0.0);
  t.out.assign(ref.out.size(), 0.0);
  if (exact(p)) return t;
  const Triple cs = p.conv_size();
  const std::vector<int64_t> td = taps_on_axis(p, 0), th = taps_on_axis(p, 1), tw = taps_on_axis(p, 2);
  const int64_t spatial = cs.d * cs.h * cs.w;
  const auto [rel, u, floors] = rounding_of(precision);
  for (size_t i = 0; i < t.y.size(); ++i) {
    const int64_t s = int64_t(i) % spatial;
    const double K = double(p.in_per_group()) * double(td[size_t(s / (cs.h * cs.w))]) *
                     double(th[size_t(s / cs.w % cs.h)]) * double(tw[size_t(s % cs.w)]);
    const double M = ref.magnitude[i];
    t.y[i] = rel * M + (kLambda * std::sqrt(K + 1.0) + 2.0) * u * (1.0 + rel) * M +
             floors * (K + 1.0) * std::ldexp(1.0, -126);
  }
  const std::vector<double> ez = z_errors(p, ref, t.y);
  for_each_window_position(p, [&](int64_t q, int64_t pos) {
    t.out[size_t(q)] = std::max(t.out[size_t(q)], ez[size_t(pos)]);
  });
  return t;
}

ForwardCheck check_forward(const Problem74& p, const Forward& ref, const ForwardTolerance& tol,
                           const ForwardResult& got) {
  p.validate();
  check_forward_sizes(p, ref, "check_forward");
  const size_t outs = ref.out.size();
  if (tol.y.size() != ref.y.size() || tol.out.size() != outs)
    throw std::invalid_argument("check_forward: the tolerance does not match " + p.describe());
  if (got.out.size() != outs || got.argmax.size() != outs || got.y.size() != outs)
    throw std::invalid_argument("check_forward: the result's out (" + std::to_string(got.out.size()) + "), argmax (" +
                                std::to_string(got.argmax.size()) + ") and y (" + std::to_string(got.y.size()) +
                                ") must each have " + std::to_string(outs) + " elements");
  ForwardCheck c;
  c.out = compare(got.out, ref.out, tol.out);
  // y is compared with the oracle's y where the rung's argmax points; where that is invalid,
  // with the oracle's own choice (the argmax failure is counted on its own).
  std::vector<double> ref_y(outs), tol_y(outs);
  const int64_t window = p.pool_window();
  const std::vector<double> ez = z_errors(p, ref, tol.y);
  for (size_t q = 0; q < outs; ++q) {
    const int32_t a = got.argmax[q];
    const int64_t pos = (a >= 0 && a < window) ? argmax_position(p, int64_t(q), a) : -1;
    bool ok = pos >= 0;
    if (ok && exact(p)) ok = a == ref.argmax[q];
    if (ok && !exact(p)) ok = ref.z[size_t(pos)] >= ref.out[q] - (tol.out[q] + ez[size_t(pos)]);
    if (!ok) {
      if (c.first_bad_argmax < 0) c.first_bad_argmax = int64_t(q);
      ++c.argmax_failures;
    }
    c.argmax_differs += a != ref.argmax[q];
    const int64_t at = pos >= 0 ? pos : argmax_position(p, int64_t(q), ref.argmax[q]);
    ref_y[q] = ref.y[size_t(at)];
    tol_y[q] = tol.y[size_t(at)];
  }
  c.y = compare(got.y, ref_y, tol_y);
  return c;
}

std::string ForwardCheck::summary() const {
  std::ostringstream s;
  s << (pass() ? "pass" : "FAIL") << ": out " << out.summary() << "; y " << y.summary() << "; argmax "
    << argmax_failures << " invalid";
  if (first_bad_argmax >= 0) s << " (first at " << first_bad_argmax << ")";
  s << ", " << argmax_differs << " differ from the oracle's";
  return s.str();
}

GradTolerance grad_tolerance(const Problem74& p, const Grads& ref, Precision precision) {
  const bool e = exact(p);
  GradTolerance t;
  t.grad_x = grad_tol(ref.mag_x, ref.terms_x, e, precision);
  t.grad_weight = grad_tol(ref.mag_weight, ref.terms_weight, e, precision);
  t.grad_bias = grad_tol(ref.mag_bias, ref.terms_bias, e);
  t.grad_multiplier = grad_tol(ref.mag_multiplier, ref.terms_multiplier, e);
  return t;
}

GradCheck check_grads(const Grads& ref, const GradTolerance& tol, const GradResult& got) {
  GradCheck c;
  auto one = [](const char* name, const std::vector<float>& g, const std::vector<double>& r,
                const std::vector<double>& t) {
    if (g.size() != r.size() || t.size() != r.size())
      throw std::invalid_argument(std::string("check_grads: ") + name + " has " + std::to_string(g.size()) +
                                  " elements, the oracle " + std::to_string(r.size()) + ", the tolerance " +
                                  std::to_string(t.size()));
    return compare(g, r, t);
  };
  c.x = one("grad_x", got.grad_x, ref.grad_x, tol.grad_x);
  c.weight = one("grad_weight", got.grad_weight, ref.grad_weight, tol.grad_weight);
  c.bias = one("grad_bias", got.grad_bias, ref.grad_bias, tol.grad_bias);
  c.multiplier = one("grad_multiplier", got.grad_multiplier, ref.grad_multiplier, tol.grad_multiplier);
  return c;
}

std::string GradCheck::summary() const {
  if (pass()) return "PASS: grad_x, grad_weight, grad_bias and grad_multiplier within tolerance";
  std::string s;
  const std::pair<const char*, const Agreement*> all[] = {
      {"grad_x", &x}, {"grad_weight", &weight}, {"grad_bias", &bias}, {"grad_multiplier", &multiplier}};
  for (const auto& [name, a] : all)
    if (!a->pass()) s += (s.empty() ? "" : "\n") + std::string(name) + ": " + a->summary();
  return s;
}

}  // namespace ladder::p74
