#include "inputs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ladder {

namespace {

// SplitMix64's finalizer: a bijective mix, good enough to turn counters into random bits.
uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr double kPi = 3.14159265358979323846;

enum Stream : uint64_t { kX = 1, kWeight, kConvBias, kBias, kPlaneMean, kPlaneRamp };

float uniform_sym(uint64_t seed, uint64_t stream, uint64_t i, float bound) {
  return (2.0f * uniform01(seed, stream, i) - 1.0f) * bound;
}

}  // namespace

float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t bits = mix64(mix64(seed ^ (stream << 56)) + index);
  return float(bits >> 40) * (1.0f / 16777216.0f);  // 24 random bits: exact in fp32, < 1
}

float standard_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const double u1 = 1.0 - double(uniform01(seed, stream, 2 * index));  // (0, 1]: log is finite
  const double u2 = double(uniform01(seed, stream, 2 * index + 1));
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2));
}

HostInputs make_inputs(const Problem& p) {
  p.validate();
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
      throw InvalidProblem("the exact distribution is being implemented");  // TODO(exact mode)
    case Distribution::Structured: {
      // Plane means on an even grid over [-2, 2], assigned in a seeded random order.
      std::vector<int64_t> order(static_cast<size_t>(planes));
      std::iota(order.begin(), order.end(), 0);
      for (int64_t i = planes - 1; i > 0; --i)  // Fisher-Yates with the counter generator
        std::swap(order[size_t(i)],
                  order[size_t(int64_t(uniform01(s, kPlaneMean, uint64_t(i)) * float(i + 1)) % (i + 1))]);
#pragma omp parallel for schedule(static)
      for (int64_t plane = 0; plane < planes; ++plane) {
        const float mean = -2.0f + 4.0f * (float(order[size_t(plane)]) + 0.5f) / float(planes);
        const float a = uniform_sym(s, kPlaneRamp, 2 * uint64_t(plane), 1.0f);
        const float c = uniform_sym(s, kPlaneRamp, 2 * uint64_t(plane) + 1, 1.0f);
        for (int64_t r = 0; r < p.in_h; ++r)
          for (int64_t q = 0; q < p.in_w; ++q) {
            const int64_t i = plane * hw + r * p.in_w + q;
            const float row = p.in_h > 1 ? float(r) / float(p.in_h - 1) - 0.5f : 0.0f;
            const float col = p.in_w > 1 ? float(q) / float(p.in_w - 1) - 0.5f : 0.0f;
            x[i] = mean + a * row + c * col + uniform_sym(s, kX, uint64_t(i), 0.1f);
          }
      }
      break;
    }
  }
  return in;
}

}  // namespace ladder
