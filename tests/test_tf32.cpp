// TF32 on the host (common/toolkit/tf32.hpp) and the TF32 error bound (tf32_tolerance): the rounding as
// the device's cvt.rna.tf32.f32 does it, the 3xTF32 split, exact inputs that TF32 leaves exact,
// and a TF32 emulation of the pipeline that must stay inside the bound (and outside fp32's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "inputs.hpp"
#include "oracle.hpp"
#include "problem_matrix.hpp"
#include "random_problems.hpp"
#include "tf32.hpp"
#include "tolerance.hpp"

namespace ladder {
namespace {

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST(Tf32, RoundsToNearestWithTiesAwayFromZero) {
  const float one_plus_half_ulp = 1.0f + std::ldexp(1.0f, -11);  // exactly halfway between TF32 values
  EXPECT_EQ(round_to_tf32(1.0f), 1.0f);
  EXPECT_EQ(round_to_tf32(one_plus_half_ulp), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(round_to_tf32(-one_plus_half_ulp), -(1.0f + std::ldexp(1.0f, -10)));
  EXPECT_EQ(round_to_tf32(std::nextafter(one_plus_half_ulp, 0.0f)), 1.0f);
  EXPECT_TRUE(std::isinf(round_to_tf32(INFINITY)));
  EXPECT_TRUE(std::isnan(round_to_tf32(NAN)));
  EXPECT_TRUE(std::isinf(round_to_tf32(3.4028235e38f)));  // rounds above the largest TF32 value
}

TEST(Tf32, ThreeQuartersTellsRoundingFromTruncation) {
  const float step = std::ldexp(1.0f, -10);  // TF32's step at 1
  for (float base : {1.0f, -1.0f, 1.0f + 5 * step}) {
    const float v = tf32_three_quarters(base);
    EXPECT_EQ(std::fabs(v), std::fabs(base) + 0.75f * step) << base;
    EXPECT_EQ(round_to_tf32(v), base + std::copysign(step, base)) << base;  // a quarter step away
    EXPECT_EQ(truncate_to_tf32(v), base) << base;                          // three quarters away
  }
  EXPECT_EQ(truncate_to_tf32(1.0f + 0.99f * step), 1.0f);
}

TEST(Tf32, KeepsTenMantissaBitsWithinHalfAnUlp) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-100, 100);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? -1.0f : 1.0f);
    const float r = round_to_tf32(x);
    ASSERT_EQ(bits_of(r) & 0x1FFFu, 0u) << x;
    ASSERT_LE(std::fabs(double(r) - double(x)), kTf32UnitRoundoff * std::fabs(double(x))) << x;
  }
}

TEST(Tf32, SplitRecoversFp32ToTwentyTwoBits) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = value(rng);
    const Tf32Split s = split_tf32(x);
    ASSERT_EQ(bits_of(s.big) & 0x1FFFu, 0u);
    ASSERT_EQ(bits_of(s.small) & 0x1FFFu, 0u);
    ASSERT_LE(std::fabs(double(s.big) + double(s.small) - double(x)), std::ldexp(std::fabs(double(x)), -22)) << x;
  }
}

// Exact inputs are small integers: TF32 represents them, so a TF32 stage is held to the exact
// tolerance on them. Larger integers in inputs.hpp would break this.
TEST(Tf32, ExactInputsAreTf32Values) {
  for (Problem p : testing::gpu_problem_matrix()) {
    p.distribution = Distribution::Exact;
    const HostInputs in = make_inputs(p);
    for (const std::vector<float>* v : {&in.x, &in.weight})
      for (float e : *v) ASSERT_EQ(round_to_tf32(e), e) << p.describe();
  }
}

// The pipeline on TF32-rounded x and weight (in fp64 otherwise) against the fp64 oracle on the
// original inputs: inside tf32_tolerance on every problem, and outside the fp32 bound on some,
// so the wider bound is needed and a TF32 stage checked at the fp32 bound would fail.
TEST(Tf32, RoundedInputsStayInsideTheTf32Bound) {
  std::mt19937_64 rng(2024);
  int beyond_fp32 = 0, problems = 0;
  for (int i = 0; i < 40; ++i) {
    for (const Distribution d : {Distribution::Uniform, Distribution::Structured}) {
      Problem p = testing::random_small_problem(rng);
      p.distribution = d;
      const HostInputs in = make_inputs(p);
      HostInputs rounded = in;
      for (std::vector<float>* v : {&rounded.x, &rounded.weight})
        for (float& e : *v) e = round_to_tf32(e);
      const Reference exact = linearity_pipeline(p, in);
      const Reference tf32 = linearity_pipeline(p, rounded);
      const Agreement a = compare(tf32.pooled, tf32.y, exact.pooled, exact.y, tf32_tolerance(p, exact));
      EXPECT_TRUE(a.pass()) << p.describe() << ": " << a.summary();
      beyond_fp32 += !compare(tf32.pooled, tf32.y, exact.pooled, exact.y, fp32_tolerance(p, exact)).pass();
      ++problems;
    }
  }
  EXPECT_GT(beyond_fp32, 0) << "TF32 rounding never left the fp32 bound in " << problems << " problems";
}

TEST(Tf32, BoundAtTheKernelBenchSize) {
  const Problem p = Problem::kernelbench();
  Reference ref;
  ref.pooled = {0.0};
  ref.magnitude = {1.0};
  ref.y = {0.0};
  Problem one = p;
  one.batch = 1;
  one.out_channels = 1;
  one.groups = 1;
  const double tf32 = tf32_tolerance(one, ref).pooled[0];
  const double fp32 = fp32_tolerance(one, ref).pooled[0];
  EXPECT_NEAR(fp32, 3.46e-4, 0.01e-4);
  EXPECT_NEAR(tf32, 1.67e-3, 0.01e-3);
}

}  // namespace
}  // namespace ladder
