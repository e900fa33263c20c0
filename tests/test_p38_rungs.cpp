// The problem-38 track's rungs against the fp64 oracle, elementwise at the derived tolerance: a
// shape matrix that reaches every path (the sub-pixel fast path and the gather, group and channel
// tails, pool padding and ceil_mode, clamp edge cases), random parameter sets, exact inputs, the
// KernelBench size on sampled rows; determinism; and the checker itself shown to reject broken
// outputs. GPU tests skip, visibly, without a device; the checker tests run anywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "p38_spatial_softmax/rows.hpp"
#include "p38_spatial_softmax/runner.hpp"
#include "tf32.hpp"  // common/toolkit: round_to_tf32, truncate_to_tf32, tf32_three_quarters
#include "skip_without_gpu.hpp"

namespace p38 = ladder::p38;
using p38::Problem38;
using p38::Triple;

namespace {

Problem38 base(int64_t batch, int64_t cin, int64_t cout, Triple in) {
  Problem38 p;
  p.batch = batch, p.in_channels = cin, p.out_channels = cout, p.in_size = in;
  return p;
}

struct Case {
  std::string name;
  Problem38 p;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> shape_matrix() {
  std::vector<Case> m;
  m.push_back({"kernelbench_shape_small", base(2, 4, 8, {8, 12, 16})});
  Problem38 p = base(2, 4, 6, {6, 8, 10});
  p.conv.groups = 2;  // 3 channels per group: a partial channel tile
  m.push_back({"groups_2", p});
  p = base(1, 3, 5, {5, 7, 9});
  p.pool.kernel_size = Triple::cube(1);
  p.conv.stride = Triple::cube(1), p.conv.output_padding = Triple::cube(0);  // stride-1 fast path
  m.push_back({"stride_1", p});
  p = base(2, 2, 3, {6, 6, 8});
  p.conv.kernel_size = {3, 2, 3}, p.conv.stride = {2, 1, 2}, p.conv.padding = {1, 0, 1};
  p.conv.output_padding = {1, 0, 0};
  m.push_back({"per_axis_parameters", p});
  p = base(1, 2, 4, {6, 8, 8});
  p.conv.dilation = Triple::cube(2), p.conv.padding = Triple::cube(2);
  m.push_back({"dilation_2", p});
  p = base(2, 3, 4, {7, 9, 11});
  p.pool.kernel_size = Triple::cube(3), p.pool.stride = Triple::cube(2), p.pool.padding = Triple::cube(1);
  p.pool.ceil_mode = true, p.pool.count_include_pad = false;
  m.push_back({"pool_padding_ceil_mode", p});
  p = base(3, 2, 17, {4, 5, 7});  // 17 channels: a tail tile; S = 8*10*14 = 1120
  p.clamp_min = -0.5, p.clamp_max = 0.3;
  m.push_back({"channel_tail_negative_clamp", p});
  p = base(1, 2, 3, {4, 5, 5});  // S = 8*10*10 = 800, odd sizes after output_padding 0
  p.conv.output_padding = Triple::cube(0);
  m.push_back({"odd_output", p});
  p = base(1, 40, 8, {4, 4, 4});  // input channels past the staged chunk of 16
  p.conv.padding = Triple::cube(0);  // the <2, 3, 0> fast path
  m.push_back({"many_input_channels_padding_0", p});
  p = base(2, 2, 3, {4, 4, 4});
  p.clamp_min = 0.5, p.clamp_max = 0.25;  // lo > hi: every element is hi, the softmax uniform
  m.push_back({"clamp_min_above_max", p});
  return m;
}

/// A valid random problem with a small output (S <= 4096).
Problem38 random_problem(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (;;) {
    Problem38 p;
    p.conv.groups = pick(1, 2);
    p.batch = pick(1, 3);
    p.in_channels = p.conv.groups * pick(1, 5);
    p.out_channels = p.conv.groups * pick(1, 10);
    p.in_size = {pick(2, 9), pick(2, 9), pick(2, 9)};
    p.pool.kernel_size = {pick(1, 3), pick(1, 3), pick(1, 3)};
    if (pick(0, 1)) p.pool.stride = Triple{pick(1, 3), pick(1, 3), pick(1, 3)};
    p.pool.padding = {pick(0, 1), pick(0, 1), pick(0, 1)};
    p.pool.ceil_mode = pick(0, 1);
    p.pool.count_include_pad = pick(0, 1);
    p.conv.kernel_size = {pick(1, 4), pick(1, 4), pick(1, 4)};
    p.conv.stride = {pick(1, 3), pick(1, 3), pick(1, 3)};
    p.conv.dilation = {pick(1, 2), pick(1, 2), pick(1, 2)};
    p.conv.padding = {pick(0, 2), pick(0, 2), pick(0, 2)};
    p.conv.output_padding = {pick(0, 2), pick(0, 2), pick(0, 2)};
    p.clamp_min = std::uniform_real_distribution<double>(-1.0, 0.5)(rng);
    p.clamp_max = p.clamp_min + std::uniform_real_distribution<double>(0.0, 2.0)(rng);
    p.seed = rng();
    try {
      p.validate();
    } catch (const p38::InvalidProblem&) {
      continue;
    }
    if (p.spatial() <= 4096 && p.spatial() >= 1) return p;
  }
}

std::vector<const p38::Rung*> gpu_rungs() {
  std::vector<const p38::Rung*> r;
  for (const p38::Rung* rung : p38::rungs())
    if (rung->is_gpu()) r.push_back(rung);
  return r;
}

std::vector<int64_t> every_row(const Problem38& p) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < p.batch * p.out_channels; ++r) rows.push_back(r);
  return rows;
}

/// Runs every GPU rung on p and checks every row; returns how many rungs ran.
int check_every_rung(const Problem38& p, const std::string& what) {
  const p38::Inputs in = p38::make_inputs(p);
  int ran = 0;
  for (const p38::Rung* rung : gpu_rungs()) {
    if (!rung->why_unsupported(p).empty()) continue;
    const std::vector<float> out = p38::run_rung_once(*rung, p, in);
    const p38::Agreement a = p38::check_rows(p, in, out, every_row(p), rung->precision);
    EXPECT_TRUE(a.pass()) << "rung " << rung->label() << ", " << what << ": " << a.summary() << "\n" << p.describe();
    ++ran;
  }
  return ran;
}

}  // namespace

// --- the checker, on the CPU rung's output: it passes, and every kind of damage fails --------------

TEST(P38Checker, CpuRungPassesAndDamageFails) {
  const Problem38 p = shape_matrix()[0].p;
  const p38::Inputs in = p38::make_inputs(p);
  const std::vector<float> good = p38::find_rung("00").run_cpu(p, in);
  const std::vector<int64_t> rows = every_row(p);
  ASSERT_TRUE(p38::check_rows(p, in, good, rows).pass());
  const int64_t S = p.spatial();
  std::vector<float> bad = good;
  bad[size_t(S + 7)] = std::nanf("");  // one element left unwritten (poisoned)
  EXPECT_FALSE(p38::check_rows(p, in, bad, rows).pass());
  bad = good;
  bad[size_t(3 * S + 5)] *= 1.01f;  // 1% off in one element
  EXPECT_FALSE(p38::check_rows(p, in, bad, rows).pass());
  bad = good;
  for (int64_t i = 0; i < S; ++i) bad[size_t(S + i)] = good[size_t(2 * S + i)];  // a row from another channel
  EXPECT_FALSE(p38::check_rows(p, in, bad, rows).pass());
  bad = good;
  for (int64_t i = 0; i < S; ++i) bad[size_t(i)] *= 1.0f + 1.0f / 256;  // a row normalized wrongly
  EXPECT_FALSE(p38::check_rows(p, in, bad, rows).pass());
}

// --random-scale: ones by default (PyTorch's initialization), else multiples of 1/16 in
// [1/2, 3/2) that are not all ones; a result without the scale then fails the check.
TEST(P38Checker, RandomScaleCatchesADroppedScale) {
  Problem38 p = shape_matrix()[0].p;
  const p38::Inputs ones = p38::make_inputs(p);
  for (float s : ones.scale) ASSERT_EQ(s, 1.0f);
  p.random_scale = true;
  const p38::Inputs in = p38::make_inputs(p);
  int not_one = 0;
  for (float s : in.scale) {
    ASSERT_GE(s, 0.5f);
    ASSERT_LT(s, 1.5f);
    ASSERT_EQ(s * 16.0f, std::floor(s * 16.0f));
    not_one += s != 1.0f;
  }
  EXPECT_GT(not_one, 0);
  EXPECT_EQ(in.x, ones.x);  // only the scale changes
  const std::vector<int64_t> rows = every_row(p);
  const std::vector<float> good = p38::find_rung("00").run_cpu(p, in);
  ASSERT_TRUE(p38::check_rows(p, in, good, rows).pass());
  p38::Inputs unscaled = in;
  unscaled.scale = ones.scale;
  EXPECT_FALSE(p38::check_rows(p, in, p38::find_rung("00").run_cpu(p, unscaled), rows).pass());
}

TEST(P38Checker, RowCaseIsTheRowOfTheWholeProblem) {
  for (const Case& c : shape_matrix()) {
    const p38::Inputs in = p38::make_inputs(c.p);
    const p38::Reference whole = p38::reference(c.p, in);
    const int64_t S = c.p.spatial(), last = c.p.batch * c.p.out_channels - 1;
    for (int64_t row : {int64_t(0), last}) {
      const p38::RowCase rc = p38::row_case(c.p, in, row / c.p.out_channels, row % c.p.out_channels);
      const p38::Reference one = p38::reference(rc.problem, rc.inputs);
      ASSERT_EQ(int64_t(one.out.size()), S) << c.name;
      for (int64_t i = 0; i < S; ++i)
        ASSERT_EQ(one.out[size_t(i)], whole.out[size_t(row * S + i)]) << c.name << " row " << row << " element " << i;
    }
  }
}

TEST(P38Checker, RowsToCheckSamplesLargeOutputs) {
  const Problem38 kb = Problem38::kernelbench();
  const std::vector<int64_t> rows = p38::rows_to_check(kb, int64_t(1) << 22, 8);
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows.front(), 0);
  EXPECT_EQ(rows.back(), kb.batch * kb.out_channels - 1);
  EXPECT_EQ(p38::rows_to_check(shape_matrix()[0].p, int64_t(1) << 22, 8).size(), size_t(2 * 8));
}

TEST(P38Checker, FusedRungsNameTheClampRangeTheyNeed) {
  Problem38 p = shape_matrix()[0].p;
  p.clamp_min = -100, p.clamp_max = 1;
  for (const char* id : {"05", "06", "07"}) {
    const std::string why = p38::find_rung(id).why_unsupported(p);
    EXPECT_NE(why.find("clamp_max - clamp_min"), std::string::npos) << id << ": " << why;
  }
  p.clamp_min = 0, p.clamp_max = INFINITY;
  EXPECT_FALSE(p38::find_rung("05").why_unsupported(p).empty());
  EXPECT_TRUE(p38::find_rung("04").why_unsupported(p).empty());
  EXPECT_THROW(p38::find_rung("99"), std::invalid_argument);
}

// --- every GPU rung against the oracle ---------------------------------------------------------

class P38ShapeMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(P38ShapeMatrix, EveryRungMatchesTheOracle) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(check_every_rung(GetParam().p, GetParam().name), int(gpu_rungs().size()));
}

INSTANTIATE_TEST_SUITE_P(P38, P38ShapeMatrix, ::testing::ValuesIn(shape_matrix()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(P38Rungs, RandomProblems) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(38);
  for (int i = 0; i < 24; ++i) {
    const Problem38 p = random_problem(rng);
    check_every_rung(p, "random problem " + std::to_string(i));
  }
}

TEST(P38Rungs, ExactInputs) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : shape_matrix()) {
    Problem38 p = c.p;
    p.distribution = p38::Distribution::Exact;
    try {
      p38::exact_check(p);
    } catch (const p38::InvalidProblem&) {
      continue;  // a pool divisor that is not a power of two
    }
    check_every_rung(p, c.name + " (exact inputs)");
  }
}

TEST(P38Rungs, KernelBenchSizeOnSampledRows) {
  SKIP_WITHOUT_GPU();
  const Problem38 p = Problem38::kernelbench();
  const p38::Inputs in = p38::make_inputs(p);
  const std::vector<int64_t> rows = p38::rows_to_check(p, int64_t(1) << 22, 6);
  for (const p38::Rung* rung : gpu_rungs()) {
    const std::vector<float> out = p38::run_rung_once(*rung, p, in);
    const p38::Agreement a = p38::check_rows(p, in, out, rows, rung->precision);
    EXPECT_TRUE(a.pass()) << "rung " << rung->label() << ": " << a.summary();
    int64_t nan = 0;  // every element written, not only the checked rows
    for (float v : out) nan += std::isnan(v);
    EXPECT_EQ(nan, 0) << "rung " << rung->label();
  }
}

TEST(P38Rungs, DeterministicRungsAreBitwiseRepeatable) {
  SKIP_WITHOUT_GPU();
  const Problem38 p = shape_matrix()[0].p;
  const p38::Inputs in = p38::make_inputs(p);
  for (const p38::Rung* rung : gpu_rungs()) {
    if (!rung->deterministic) continue;
    EXPECT_EQ(p38::run_rung_once(*rung, p, in), p38::run_rung_once(*rung, p, in)) << rung->label();
  }
}

TEST(P38Rungs, UnsupportedProblemIsAClearError) {
  SKIP_WITHOUT_GPU();
  Problem38 p = shape_matrix()[0].p;
  p.clamp_min = -1000;
  const p38::Inputs in = p38::make_inputs(p);
  try {
    p38::run_rung_once(p38::find_rung("05"), p, in);
    FAIL() << "rung 05 ran a clamp range it cannot handle";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("clamp_max - clamp_min"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(p38::check_rows(p, in, p38::run_rung_once(p38::find_rung("04"), p, in), every_row(p)).pass());
}

// --- TF32: rounding to nearest, told from truncation -----------------------------------------------

namespace {

/// A fast-path problem whose pooled values are x itself (pool kernel 1), x and the weights at
/// TF32 midpoints; `in` gets those inputs, `rounded` and `truncated` the operands as cvt.rna and
/// a mask would make them.
struct MidpointCase {
  Problem38 p;
  p38::Inputs in, rounded, truncated;
};
MidpointCase midpoint_case() {
  MidpointCase c;
  c.p = base(2, 13, 21, {5, 7, 9});  // 13 input channels: a partial chunk of 8; 21 outputs: a tail
  c.p.pool.kernel_size = Triple::cube(1);
  c.p.clamp_min = -4.0, c.p.clamp_max = 4.0;  // few clamped outputs: the products decide
  c.in = p38::make_inputs(c.p);
  for (float& v : c.in.x) v = ladder::tf32_three_quarters(v);
  for (float& v : c.in.weight) v = ladder::tf32_three_quarters(v);
  c.rounded = c.in, c.truncated = c.in;
  for (auto* t : {&c.rounded, &c.truncated}) {
    const bool round = t == &c.rounded;
    for (float& v : t->x) v = round ? ladder::round_to_tf32(v) : ladder::truncate_to_tf32(v);
    for (float& v : t->weight) v = round ? ladder::round_to_tf32(v) : ladder::truncate_to_tf32(v);
  }
  return c;
}

}  // namespace

TEST(P38Tf32Bound, TruncatedOperandsFailTheRoundedOracle) {
  // The check the GPU test relies on can fail: the exact output of truncated operands (what a
  // kernel that masks without the +0x1000 computes, before its sums' rounding) is judged against
  // the oracle of operands rounded to nearest, at the sums-only bound.
  const MidpointCase c = midpoint_case();
  const std::vector<int64_t> rows = every_row(c.p);
  const std::vector<float> rounded_out = p38::find_rung("00").run_cpu(c.p, c.rounded);
  const std::vector<float> truncated_out = p38::find_rung("00").run_cpu(c.p, c.truncated);
  EXPECT_TRUE(p38::check_rows(c.p, c.rounded, rounded_out, rows, p38::Precision::Tf32Sums).pass());
  EXPECT_FALSE(p38::check_rows(c.p, c.rounded, truncated_out, rows, p38::Precision::Tf32Sums).pass());
  // The full TF32 bound, against the oracle of the raw inputs, admits the rounded operands.
  EXPECT_TRUE(p38::check_rows(c.p, c.in, rounded_out, rows, p38::Precision::Tf32).pass());
}

TEST(P38Tf32Bound, ExactInputsKeepAZeroBound) {
  Problem38 p = base(1, 3, 4, {4, 6, 6});
  p.distribution = p38::Distribution::Exact;
  const p38::Inputs in = p38::make_inputs(p);
  const p38::Reference ref = p38::reference(p, in);
  for (double e : p38::z_error_bound(p, ref, p38::Precision::Tf32)) ASSERT_EQ(e, 0.0);
}

TEST(P38Rungs, Tf32RungsRoundOperandsToNearest) {
  SKIP_WITHOUT_GPU();
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "no TF32 mma below sm_80: the TF32 rungs take their FP32 path";
  const MidpointCase c = midpoint_case();
  int ran = 0;
  for (const p38::Rung* rung : gpu_rungs()) {
    if (rung->precision != p38::Precision::Tf32) continue;
    const std::vector<float> out = p38::run_rung_once(*rung, c.p, c.in);
    const p38::Agreement a = p38::check_rows(c.p, c.rounded, out, every_row(c.p), p38::Precision::Tf32Sums);
    EXPECT_TRUE(a.pass()) << "rung " << rung->label() << " against the oracle of TF32-rounded operands: " << a.summary();
    ++ran;
  }
  EXPECT_GT(ran, 0) << "no TF32 rung in the track";
}
