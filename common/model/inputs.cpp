#include "inputs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace ladder {

namespace {

constexpr double kPi = 3.14159265358979323846;

enum Stream : uint64_t { kX = 1, kWeight, kConvBias, kBias, kPlaneMean, kPlaneRamp };

float uniform_sym(uint64_t seed, uint64_t stream, uint64_t i, float bound) {
  return (2.0f * uniform01(seed, stream, i) - 1.0f) * bound;
}

// 0, 1, ..., planes-1 in a seeded random order (Fisher-Yates with the counter generator).
std::vector<int64_t> seeded_order(int64_t planes, uint64_t s) {
  std::vector<int64_t> order(static_cast<size_t>(planes));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = planes - 1; i > 0; --i)
    std::swap(order[size_t(i)],
              order[size_t(int64_t(uniform01(s, kPlaneMean, uint64_t(i)) * float(i + 1)) % (i + 1))]);
  return order;
}

// Position of r in [0, n) on a ramp over [-0.5, 0.5] (0 for a single row or column).
float ramp(int64_t r, int64_t n) { return n > 1 ? float(r) / float(n - 1) - 0.5f : 0.0f; }

// Exact inputs (inputs.hpp): integer weights and conv biases, x in {0, 1} at per-plane densities.
void fill_exact(const Problem& p, HostInputs& in) {
  const uint64_t s = p.seed;
  const double d_max = exact_max_density(p);
  for (size_t i = 0; i < in.weight.size(); ++i)  // -1, 0, 1 with probability 1/3 each
    in.weight[i] = float(std::min(int(uniform01(s, kWeight, i) * 3.0f), 2) - 1);
  static constexpr float kBiasValues[4] = {-2.0f, -1.0f, 1.0f, 2.0f};
  for (size_t i = 0; i < in.conv_bias.size(); ++i)
    in.conv_bias[i] = kBiasValues[std::min(int(uniform01(s, kConvBias, i) * 4.0f), 3)];

  const int64_t planes = p.batch * p.in_channels, hw = p.in_h * p.in_w;
  const std::vector<int64_t> order = seeded_order(planes, s);
  float* x = in.x.data();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    // Densities evenly over [d_max/4, d_max]; ramps scale them by a factor in [0.5, 1.5].
    const double d = d_max * (0.25 + 0.75 * (double(order[size_t(plane)]) + 0.5) / double(planes));
    const float a = uniform_sym(s, kPlaneRamp, 2 * uint64_t(plane), 0.5f);
    const float c = uniform_sym(s, kPlaneRamp, 2 * uint64_t(plane) + 1, 0.5f);
    for (int64_t r = 0; r < p.in_h; ++r)
      for (int64_t q = 0; q < p.in_w; ++q) {
        const int64_t i = plane * hw + r * p.in_w + q;
        const float prob = float(d) * (1.0f + a * ramp(r, p.in_h) + c * ramp(q, p.in_w));
        x[i] = uniform01(s, kX, uint64_t(i)) < prob ? 1.0f : 0.0f;
      }
  }
  const double bound = exact_sum_bound(p, in);
  if (!(bound < kExactSumLimit)) {
    std::ostringstream m;
    m << "invalid problem: exact inputs drawn for " << p.describe() << " have a sum of |terms| of "
      << bound << ", not below 2^22 = " << kExactSumLimit << "; use smaller sizes or another distribution";
    throw InvalidProblem(m.str());
  }
}

}  // namespace

double exact_max_density(const Problem& p) {
  p.validate();
  const double P = double(p.out_h()) * double(p.out_w());
  const double terms = double(p.in_per_group()) * double(p.taps()) * double(p.in_h) * double(p.in_w);
  // Worst case: every |cb| = 2, every |w| = 1, every x drawn at the top density 1.5 d_max.
  const double d_max = std::min(0.6, (kExactSumTarget - 2.0 * P) / (1.5 * terms));
  if (!(d_max >= kExactMinDensity)) {
    std::ostringstream m;
    m << "invalid problem: too large for exact inputs (" << p.describe() << "): every sum a stage "
      << "forms must stay below 2^22 in magnitude, and with Hout*Wout = " << P
      << " and in_channels/groups * taps * in_h * in_w = " << terms << " the density of ones in x "
      << "would have to be " << d_max << " < " << kExactMinDensity
      << "; use smaller sizes or another distribution";
    throw InvalidProblem(m.str());
  }
  return d_max;
}

void check_exact_inputs(const Problem& p, const HostInputs& in) {
  for (const auto& [name, v] : {std::pair<const char*, const std::vector<float>*>{"x", &in.x},
                                {"weight", &in.weight}, {"conv_bias", &in.conv_bias}})
    for (size_t i = 0; i < v->size(); ++i)
      if (!(std::nearbyint((*v)[i]) == (*v)[i])) {
        std::ostringstream m;
        m << "invalid inputs for --distribution exact: " << name << "[" << i << "] = " << (*v)[i]
          << " is not an integer, so fp32 sums of it are not exact (use another distribution)";
        throw InvalidProblem(m.str());
      }
  const double bound = exact_sum_bound(p, in);
  if (!(bound < kExactSumLimit)) {
    std::ostringstream m;
    m << "invalid inputs for --distribution exact: their sum of |terms| is " << bound
      << ", not below 2^22 = " << kExactSumLimit << " (use another distribution)";
    throw InvalidProblem(m.str());
  }
}

double exact_sum_bound(const Problem& p, const HostInputs& in) {
  p.validate();
  const int64_t planes = p.batch * p.in_channels, hw = p.in_h * p.in_w;
  std::vector<double> X(static_cast<size_t>(planes));  // sum |x| per plane
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < planes; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < hw; ++j) sum += std::fabs(double(in.x[size_t(i * hw + j)]));
    X[size_t(i)] = sum;
  }
  double bound = *std::max_element(X.begin(), X.end());
  const double P = double(p.out_h()) * double(p.out_w());
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group(), taps = p.taps();
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co) {
      const int64_t g = co / cout_g;
      double s = P * std::fabs(double(in.conv_bias[size_t(co)]));
      for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci) {
        double w_abs = 0;
        for (int64_t t = 0; t < taps; ++t)
          w_abs += std::fabs(double(in.weight[size_t((ci * cout_g + co % cout_g) * taps + t)]));
        s += w_abs * X[size_t(n * p.in_channels + ci)];
      }
      bound = std::max(bound, s);
    }
  return bound;
}

float standard_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = 1.0 - double(uniform01(seed, stream, 2 * index));  // (0, 1]: log is finite
  const double u2 = double(uniform01(seed, stream, 2 * index + 1));
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2));
}

HostInputs make_inputs(const Problem& p) {
  p.validate();
  if (p.distribution == Distribution::Exact) exact_max_density(p);  // throws before allocating x
  HostInputs in;
  const uint64_t s = p.seed;
  const float b = float(1.0 / std::sqrt(double(p.out_per_group() * p.taps())));

  in.weight.resize(size_t(p.weight_elems()));
  for (size_t i = 0; i < in.weight.size(); ++i) in.weight[i] = uniform_sym(s, kWeight, i, b);
  in.conv_bias.resize(size_t(p.out_channels));
  in.bias.resize(size_t(p.out_channels));
  for (size_t i = 0; i < in.conv_bias.size(); ++i) {
    in.conv_bias[i] = uniform_sym(s, kConvBias, i, b);
    in.bias[i] = float(p.bias_scale * double(standard_normal(s, kBias, i)));
  }

  const int64_t planes = p.batch * p.in_channels, hw = p.in_h * p.in_w;
  in.x.resize(size_t(p.x_elems()));
  float* x = in.x.data();
  switch (p.distribution) {
    case Distribution::Uniform:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < p.x_elems(); ++i) x[i] = uniform01(s, kX, uint64_t(i));
      break;
    case Distribution::Normal:
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < p.x_elems(); ++i) x[i] = standard_normal(s, kX, uint64_t(i));
      break;
    case Distribution::Exact:
      fill_exact(p, in);
      break;
    case Distribution::Structured: {
      // Plane means on an even grid over [-2, 2], assigned in a seeded random order.
      const std::vector<int64_t> order = seeded_order(planes, s);
#pragma omp parallel for schedule(static)
      for (int64_t plane = 0; plane < planes; ++plane) {
        const float mean = -2.0f + 4.0f * (float(order[size_t(plane)]) + 0.5f) / float(planes);
        const float a = uniform_sym(s, kPlaneRamp, 2 * uint64_t(plane), 1.0f);
        const float c = uniform_sym(s, kPlaneRamp, 2 * uint64_t(plane) + 1, 1.0f);
        for (int64_t r = 0; r < p.in_h; ++r)
          for (int64_t q = 0; q < p.in_w; ++q) {
            const int64_t i = plane * hw + r * p.in_w + q;
            x[i] = mean + a * ramp(r, p.in_h) + c * ramp(q, p.in_w) + uniform_sym(s, kX, uint64_t(i), 0.1f);
          }
      }
      break;
    }
  }
  return in;
}

}  // namespace ladder
