#include "tolerance.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "common/toolkit/tf32.hpp"  // kTf32UnitRoundoff

namespace ladder::p38 {

double z_chain_length(int64_t K, int64_t P) {
  return std::max(2.0 * double(K + P + 2), double(K) * double(P) + 2.0);
}

std::vector<double> z_error_bound(const Problem38& p, const Reference& ref, Precision precision) {
  p.validate();
  if (ref.magnitude.size() != size_t(p.out_elems()))
    throw std::invalid_argument("z_error_bound: the reference does not match " + p.describe());
  std::vector<double> e(ref.magnitude.size(), 0.0);
  const bool tf32 = precision != Precision::Fp32;
  const double rounding =
      precision == Precision::Tf32 ? 2.0 * kTf32UnitRoundoff + kTf32UnitRoundoff * kTf32UnitRoundoff : 0.0;
  if (p.distribution == Distribution::Exact) {
    // Pooled values are integers up to 3*P over a power of two: TF32 holds 11 significant bits.
    if (tf32 && 3 * p.pool_window() > 2048)
      for (size_t i = 0; i < e.size(); ++i) e[i] = rounding * ref.magnitude[i];
    return e;
  }
  const std::vector<int64_t> taps = taps_per_position(p);
  const int64_t S = p.spatial(), P = p.pool_window(), cin_g = p.in_per_group();
  const double u = tf32 ? 2.0 * kFp32UnitRoundoff : kFp32UnitRoundoff;
  for (size_t i = 0; i < e.size(); ++i) {
    const double n = z_chain_length(cin_g * taps[i % size_t(S)], P);
    e[i] = ((kProbabilisticLambda * std::sqrt(n) + 4.0) * u + rounding) * ref.magnitude[i];
  }
  return e;
}

std::vector<double> output_tolerance(const Problem38& p, const Reference& ref, Precision precision) {
  const std::vector<double> ez = z_error_bound(p, ref, precision);
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

}  // namespace ladder::p38
