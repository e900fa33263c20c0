// The two fp64 oracles must agree on many random problems: they share nothing but the inputs
// (the literal one materializes the convT output; the linearity one never does).
#include <gtest/gtest.h>

#include <cmath>

#include "inputs.hpp"
#include "oracle.hpp"
#include "random_problems.hpp"
#include "tolerance.hpp"

namespace ladder {
namespace {

TEST(Oracles, LiteralAndLinearityAgreeOnRandomProblems) {
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 250; ++i) {
    const Problem p = testing::random_small_problem(rng);
    SCOPED_TRACE(p.describe());
    const HostInputs in = make_inputs(p);
    const Reference lit = literal_pipeline(p, in);
    const Reference lin = linearity_pipeline(p, in);
    // Both are fp64 computations of the same sum: each within the fp64 bound of the truth.
    const Tolerance tol = rounding_tolerance(p, lin, kFp64UnitRoundoff);
    const Agreement a = compare(lit.pooled, lit.y, lin.pooled, lin.y, tol, 2.0);
    ASSERT_TRUE(a.pass()) << a.summary();
  }
}

TEST(Oracles, KernelBenchShapeOnReducedPlane) {
  // Every default parameter with the real channel counts, on a plane small enough to be literal.
  Problem p = Problem::kernelbench();
  p.batch = 2;
  p.in_h = 7;
  p.in_w = 5;
  p.distribution = Distribution::Uniform;
  const HostInputs in = make_inputs(p);
  const Reference lit = literal_pipeline(p, in), lin = linearity_pipeline(p, in);
  const Agreement a = compare(lit.pooled, lit.y, lin.pooled, lin.y,
                              rounding_tolerance(p, lin, kFp64UnitRoundoff), 2.0);
  EXPECT_TRUE(a.pass()) << a.summary();
}

TEST(Oracles, LinearityMatchesHandComputedCase) {
  // 1 channel in and out, 2x2 input, kernel 2, stride 1, padding 1: the output is 1x1 and
  // out[0,0] = cb + sum over taps with ih = 0 + 1 - kh, iw = 0 + 1 - kw, so
  // out = cb + x00*w11 + x01*w10 + x10*w01 + x11*w00.
  Problem p;
  p.batch = 1;
  p.in_channels = p.out_channels = 1;
  p.in_h = p.in_w = 2;
  p.kernel_size = Pair::square(2);
  p.padding = Pair::square(1);
  HostInputs in;
  in.x = {1, 2, 3, 4};
  in.weight = {10, 20, 30, 40};  // w00 w01 w10 w11
  in.conv_bias = {0.5f};
  in.bias = {-1.0f};
  const double expected = 0.5 + 1 * 40 + 2 * 30 + 3 * 20 + 4 * 10;
  for (const Reference& r : {literal_pipeline(p, in), linearity_pipeline(p, in)}) {
    EXPECT_DOUBLE_EQ(r.pooled[0], expected);
    EXPECT_DOUBLE_EQ(r.y[0], 10.0 * (expected - 1.0));  // lse of one value is the value
  }
}

TEST(Oracles, StructuredPlanesHaveDistinctMeans) {
  Problem p;
  p.batch = 4;
  p.in_channels = 16;
  p.in_h = 12;
  p.in_w = 15;
  p.distribution = Distribution::Structured;
  const HostInputs in = make_inputs(p);
  std::vector<double> means;
  for (int64_t plane = 0; plane < p.batch * p.in_channels; ++plane) {
    double s = 0;
    for (int64_t j = 0; j < p.in_h * p.in_w; ++j) s += in.x[size_t(plane * p.in_h * p.in_w + j)];
    means.push_back(s / double(p.in_h * p.in_w));
  }
  std::sort(means.begin(), means.end());
  // Means sit on a grid of spacing 4/64 = 0.0625. The ramps average to exactly zero and the
  // U(-0.1, 0.1) noise averages to sd 0.1/sqrt(3*180) = 0.0043 per plane, so a neighbour gap
  // below 0.02 would take a 7-sigma noise difference.
  for (size_t i = 1; i < means.size(); ++i) EXPECT_GT(means[i] - means[i - 1], 0.02) << i;
}

TEST(Oracles, InputsAreDeterministicAndSeedDependent) {
  Problem p;
  p.batch = 1;
  p.in_channels = 2;
  p.out_channels = 2;
  p.in_h = p.in_w = 4;
  const HostInputs a = make_inputs(p), b = make_inputs(p);
  EXPECT_EQ(a.x, b.x);
  EXPECT_EQ(a.weight, b.weight);
  p.seed += 1;
  EXPECT_NE(make_inputs(p).x, a.x);
}

TEST(Oracles, WeightsFollowPyTorchInitBound) {
  Problem p;  // KernelBench channels: fan_in = (out_channels/groups) * kH * kW = 128 * 9
  p.batch = 1;
  p.in_h = p.in_w = 2;
  const HostInputs in = make_inputs(p);
  const double bound = 1.0 / std::sqrt(128.0 * 9.0);
  double max_abs = 0;
  for (float w : in.weight) max_abs = std::max(max_abs, std::fabs(double(w)));
  EXPECT_LE(max_abs, bound);
  EXPECT_GT(max_abs, 0.95 * bound);  // 73728 draws: the extremes come close to the bound
}

TEST(Tolerance, NaNAndLargeErrorsFail) {
  Problem p;
  p.batch = 1;
  p.in_channels = p.out_channels = 2;
  p.in_h = p.in_w = 3;
  const HostInputs in = make_inputs(p);
  const Reference ref = linearity_pipeline(p, in);
  const Tolerance tol = fp32_tolerance(p, ref);
  std::vector<double> pooled = ref.pooled, y = ref.y;
  EXPECT_TRUE(compare(pooled, y, ref.pooled, ref.y, tol).pass());
  pooled[1] = NAN;
  EXPECT_EQ(compare(pooled, y, ref.pooled, ref.y, tol).nan_count, 1);
  pooled[1] = ref.pooled[1] + 2 * tol.pooled[1];
  EXPECT_FALSE(compare(pooled, y, ref.pooled, ref.y, tol).pass());
  pooled[1] = ref.pooled[1] + 0.5 * tol.pooled[1];
  EXPECT_TRUE(compare(pooled, y, ref.pooled, ref.y, tol).pass());
}

}  // namespace
}  // namespace ladder
