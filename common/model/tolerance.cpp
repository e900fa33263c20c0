#include "tolerance.hpp"

#include "tf32.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace ladder {

double fp32_chain_length(const Problem& p) {
  const double K = double(p.in_per_group() * p.taps());
  return K + double(p.out_h()) * double(p.out_w()) + double(p.in_h) * double(p.in_w) + K;
}

namespace {

// y's tolerance from pooled's: scale * (max_co pooled tolerance + the epilogue's own error in
// a format of unit roundoff u).
void add_y_tolerance(const Problem& p, const Reference& ref, double u, Tolerance& t) {
  t.y.resize(ref.y.size());
  const int64_t C = p.out_channels;
  for (int64_t n = 0; n < p.batch; ++n) {
    double worst = 0;
    for (int64_t co = 0; co < C; ++co) worst = std::max(worst, t.pooled[size_t(n * C + co)]);
    const double lse = std::isfinite(ref.y[size_t(n)]) ? std::fabs(ref.y[size_t(n)] / p.scale) : 0;
    t.y[size_t(n)] = std::fabs(p.scale) * (worst + double(C + 8) * u * (lse + 1.0));
  }
}

// pooled: rel * magnitude (the sums' rounding) + u * |pooled| (the final fp32 rounding); y from it.
Tolerance relative_to_magnitude(const Problem& p, const Reference& ref, double rel, double u) {
  Tolerance t;
  t.pooled.resize(ref.pooled.size());
  for (size_t i = 0; i < t.pooled.size(); ++i)
    t.pooled[i] = rel * ref.magnitude[i] + u * std::fabs(ref.pooled[i]);
  add_y_tolerance(p, ref, u, t);
  return t;
}

}  // namespace

Tolerance rounding_tolerance(const Problem& p, const Reference& ref, double unit_roundoff) {
  const double u = unit_roundoff;
  return relative_to_magnitude(p, ref, kProbabilisticLambda * std::sqrt(fp32_chain_length(p)) * u, u);
}

Tolerance tf32_tolerance(const Problem& p, const Reference& ref) {
  const double input_rounding = 2.0 * kTf32UnitRoundoff + kTf32UnitRoundoff * kTf32UnitRoundoff;
  Tolerance t = rounding_tolerance(p, ref, 2.0 * kFp32UnitRoundoff);
  for (size_t i = 0; i < t.pooled.size(); ++i) t.pooled[i] += input_rounding * ref.magnitude[i];
  add_y_tolerance(p, ref, kFp32UnitRoundoff, t);  // the epilogue is fp32, on the wider pooled bound
  return t;
}

Tolerance exact_tolerance(const Problem& p, const Reference& ref) {
  if (ref.conv_mean.size() != ref.pooled.size())
    throw std::invalid_argument("exact_tolerance: the reference has no conv_mean (build it with an oracle)");
  const double k = 2.0 * kFp32UnitRoundoff * (1.0 + std::ldexp(1.0, -20));
  Tolerance t;
  t.pooled.resize(ref.pooled.size());
  for (size_t i = 0; i < t.pooled.size(); ++i)
    t.pooled[i] = k * (std::fabs(ref.pooled[i]) + std::fabs(ref.conv_mean[i]));
  add_y_tolerance(p, ref, kFp32UnitRoundoff, t);
  return t;
}

Tolerance stage_tolerance(const Problem& p, const Reference& ref, Precision precision) {
  if (p.distribution == Distribution::Exact) return exact_tolerance(p, ref);
  return precision == Precision::Tf32 ? tf32_tolerance(p, ref) : fp32_tolerance(p, ref);
}

bool plane_is_power_of_two(const Problem& p) {
  const int64_t P = p.out_h() * p.out_w();
  return P > 0 && (P & (P - 1)) == 0;
}

Tolerance worst_case_mean_tolerance(const Problem& p, const Reference& ref) {
  const double u = kFp32UnitRoundoff;
  const double P = double(p.out_h()) * double(p.out_w());
  const double n = P + 1.0;
  // gamma_n exists only for n*u < 1. Exact inputs keep P far below 2^24 (make_inputs' sum bound);
  // past it no bound can be derived, and the formula would turn negative: infinite instead.
  const double gamma = n * u < 1.0 ? n * u / (1.0 - n * u) : INFINITY;
  const double spread = std::max(1.0, double(p.in_h) * double(p.in_w) / P);
  return relative_to_magnitude(p, ref, gamma * spread, u);
}

Tolerance any_order_tolerance(const Problem& p, const Reference& ref, Precision precision) {
  if (p.distribution != Distribution::Exact) return stage_tolerance(p, ref, precision);
  Tolerance t = exact_tolerance(p, ref);
  if (plane_is_power_of_two(p)) return t;
  // Exact products, so the fp32 bound applies to TF32 stages too (small integers are TF32 values).
  const Tolerance any = worst_case_mean_tolerance(p, ref);
  for (size_t i = 0; i < t.pooled.size(); ++i) t.pooled[i] = std::max(t.pooled[i], any.pooled[i]);
  for (size_t i = 0; i < t.y.size(); ++i) t.y[i] = std::max(t.y[i], any.y[i]);
  return t;
}

namespace {

// Folds one element into the agreement; equal infinities agree (torch.logsumexp can give +-inf).
void check(Agreement& a, double got, double want, double tol, int64_t index, double& max_abs) {
  if (std::isnan(got) != std::isnan(want)) {
    ++a.nan_count;
    if (a.worst_index < 0) a.worst_index = index;
    return;
  }
  if (std::isnan(got) || got == want) return;
  const double diff = std::fabs(got - want);
  max_abs = std::max(max_abs, diff);
  const double ratio = tol > 0 ? diff / tol : INFINITY;
  if (!(ratio <= a.worst_ratio)) {
    a.worst_ratio = ratio;
    a.worst_index = index;
  }
}

}  // namespace

Agreement compare(const std::vector<double>& pooled, const std::vector<double>& y,
                  const std::vector<double>& ref_pooled, const std::vector<double>& ref_y,
                  const Tolerance& tol, double tolerance_factor) {
  Agreement a;
  for (size_t i = 0; i < pooled.size(); ++i)
    check(a, pooled[i], ref_pooled[i], tolerance_factor * tol.pooled[i], int64_t(i), a.max_abs_pooled);
  for (size_t n = 0; n < y.size(); ++n)
    check(a, y[n], ref_y[n], tolerance_factor * tol.y[n], int64_t(pooled.size() + n), a.max_abs_y);
  return a;
}

std::string Agreement::summary() const {
  std::ostringstream s;
  s.precision(3);
  s << (pass() ? "PASS" : "FAIL") << " (max |err| pooled " << max_abs_pooled << ", y " << max_abs_y
    << "; worst " << worst_ratio << "x tolerance at index " << worst_index;
  if (nan_count) s << "; " << nan_count << " NaN on one side only";
  s << ")";
  return s.str();
}

}  // namespace ladder
