#include "tolerance.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace ladder::p38 {

double z_chain_length(int64_t K, int64_t P) {
  return std::max(2.0 * double(K + P + 2), double(K) * double(P) + 2.0);
}

std::vector<double> z_error_bound(const Problem38& p, const Reference& ref) {
  p.validate();
  if (ref.magnitude.size() != size_t(p.out_elems()))
    throw std::invalid_argument("z_error_bound: the reference does not match " + p.describe());
  std::vector<double> e(ref.magnitude.size(), 0.0);
  if (p.distribution == Distribution::Exact) return e;
  const std::vector<int64_t> taps = taps_per_position(p);
  const int64_t S = p.spatial(), P = p.pool_window(), cin_g = p.in_per_group();
  for (size_t i = 0; i < e.size(); ++i) {
    const double n = z_chain_length(cin_g * taps[i % size_t(S)], P);
    e[i] = (kProbabilisticLambda * std::sqrt(n) + 4.0) * kFp32UnitRoundoff * ref.magnitude[i];
  }
  return e;
}

std::vector<double> output_tolerance(const Problem38& p, const Reference& ref) {
  const std::vector<double> ez = z_error_bound(p, ref);
  const int64_t rows = p.batch * p.out_channels, S = p.spatial();
  if (ref.conv.size() != ez.size() || ref.z.size() != ez.size() || ref.out.size() != ez.size() ||
      ref.row_max.size() != size_t(rows) || ref.row_sum.size() != size_t(rows) ||
      ref.scale.size() != size_t(p.out_channels))
    throw std::invalid_argument("output_tolerance: the reference does not match " + p.describe());
  const double u = kFp32UnitRoundoff, kappa = kExpRelativeError;
  const double lo = clamp_lo(p), hi = clamp_hi(p);
  const double sum_chain = kProbabilisticLambda * std::sqrt(double(S)) * (kappa + 2.0) * u;
  std::vector<double> tol(ez.size());
  for (int64_t r = 0; r < rows; ++r) {
    const size_t base = size_t(r * S);
    // Step 2: the row's largest error after the clamp.
    double e = 0;
    if (!(lo > hi))
      for (int64_t i = 0; i < S; ++i) {
        const double c = ref.conv[base + size_t(i)], ei = ez[base + size_t(i)];
        if (!(c + ei < lo || c - ei > hi)) e = std::max(e, ei);
      }
    // Step 4: A = sum_j exp(t_j)*|t_j|.
    const double m = ref.row_max[size_t(r)], sum = ref.row_sum[size_t(r)];
    double A = 0;
    // |t| is the magnitude of the exponent's argument as a kernel forms it: z - max, or z - hi for
    // the fused rungs, which subtract the clamp bound instead of the max (device/fused.cuh).
    auto arg = [&](double z) { return std::max(std::fabs(z - m), std::isfinite(hi) ? std::fabs(z - hi) : 0.0); };
    for (int64_t i = 0; i < S; ++i) {
      const double t = ref.z[base + size_t(i)] - m;
      A += std::exp(t) * arg(ref.z[base + size_t(i)]);
    }
    const double scale = std::fabs(ref.scale[size_t(r % p.out_channels)]);
    for (int64_t i = 0; i < S; ++i) {
      const double t = ref.z[base + size_t(i)] - m;
      const double s = std::exp(t) / sum;
      const double rho = u * (arg(ref.z[base + size_t(i)]) + A / sum + 2.0 * kappa + 3.0) + sum_chain;
      tol[base + size_t(i)] = scale * s * std::expm1(2.0 * e + rho * (1.0 + std::ldexp(1.0, -10))) +
                              std::ldexp(1.0, -125) * std::max(1.0, scale);
    }
  }
  return tol;
}

Agreement compare(const std::vector<double>& out, const std::vector<double>& ref_out,
                  const std::vector<double>& tol) {
  if (out.size() != ref_out.size() || tol.size() != ref_out.size())
    throw std::invalid_argument("compare: the result (" + std::to_string(out.size()) + "), the reference (" +
                                std::to_string(ref_out.size()) + ") and the tolerance (" +
                                std::to_string(tol.size()) + ") differ in size");
  Agreement a;
  a.count = int64_t(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const bool nan_out = std::isnan(out[i]), nan_ref = std::isnan(ref_out[i]);
    if (nan_out && nan_ref) continue;
    double ratio = INFINITY;  // a NaN on one side only, or a NaN tolerance, fails
    if (nan_out != nan_ref) {
      ++a.nan_count;
    } else {
      const double diff = out[i] == ref_out[i] ? 0.0 : std::fabs(out[i] - ref_out[i]);  // equal infinities agree
      if (std::isfinite(diff)) a.max_abs = std::max(a.max_abs, diff);
      const double r = diff == 0.0 ? 0.0 : diff / tol[i];
      if (!std::isnan(r)) ratio = r;
    }
    if (!(ratio <= 1.0)) ++a.failures;
    if (ratio > a.worst_ratio || a.worst_index < 0) {
      a.worst_ratio = ratio;
      a.worst_index = int64_t(i);
    }
  }
  return a;
}

Agreement compare(const std::vector<float>& out, const std::vector<double>& ref_out,
                  const std::vector<double>& tol) {
  return compare(std::vector<double>(out.begin(), out.end()), ref_out, tol);
}

void Agreement::merge(const Agreement& part, int64_t base) {
  count += part.count;
  failures += part.failures;
  nan_count += part.nan_count;
  max_abs = std::max(max_abs, part.max_abs);
  if (part.worst_index >= 0 && (worst_index < 0 || part.worst_ratio > worst_ratio)) {
    worst_ratio = part.worst_ratio;
    worst_index = base + part.worst_index;
  }
}

std::string Agreement::summary() const {
  std::ostringstream s;
  s << (pass() ? "pass" : "FAIL") << ": " << count << " elements, " << failures << " over tolerance, "
    << nan_count << " NaN on one side only; max |diff| " << max_abs << ", worst " << worst_ratio
    << " x its tolerance at index " << worst_index;
  return s.str();
}

}  // namespace ladder::p38
