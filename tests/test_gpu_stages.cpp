// Every GPU stage against the fp64 oracle, on the problem matrix, on random problems and on the
// KernelBench problem, with NaN-poisoned outputs. Two input kinds:
//  - exact inputs (inputs.hpp): every sum is exact in fp32, so a stage must match the oracle to
//    the roundings of its mean and epilogue (exact_tolerance), at any size; a dropped row, a
//    missing plane or a misread element fails. Here each stage is also held to the stage before
//    it at that tolerance;
//  - structured or uniform inputs, at the fp32 rounding bound (fp32_tolerance): real fractions,
//    which small integers cannot stand for (a stage that lost precision would pass exact inputs).
// Without a CUDA device every test here is skipped, visibly, with the runtime's reason.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "device.hpp"
#include "gpu_session.hpp"
#include "oracle.hpp"
#include "problem_matrix.hpp"
#include "random_problems.hpp"
#include "skip_without_gpu.hpp"
#include "stage.hpp"
#include "tolerance.hpp"

namespace ladder {
namespace {

// The stage that ran before `index` in ladder order (index >= 1).
const StageDescriptor& previous_stage(size_t index) { return *registered_stages()[index - 1]; }

struct Outputs {
  std::vector<double> pooled, y;
};

Outputs run_stage(const StageDescriptor& s, const Problem& p, const HostInputs& in, GpuSession* gpu) {
  if (!s.is_gpu()) {
    CpuStageResult r = s.run_cpu(p, in);
    return {std::move(r.pooled), std::move(r.y)};
  }
  GpuTiming t = gpu->run_once(s);
  return {std::move(t.pooled), std::move(t.y)};
}

Problem with_distribution(Problem p, Distribution d) {
  p.distribution = d;
  return p;
}

class GpuStage : public ::testing::TestWithParam<size_t> {};

// Runs stage `index` on `p` and checks it against the fp64 oracle at stage_tolerance. On exact
// inputs it also checks the stage before it at 1x exact_tolerance, tighter than the 2x the two
// oracle checks imply: two stages that form the mean differently still differ by less than one
// tolerance (ExactTolerance.CoversEveryWayToFormTheMean checks every pair of forms). On
// other inputs that triangle bound (2x the fp32 bound) is too wide to add anything: skipped.
void check_stage(size_t index, const Problem& p) {
  const StageDescriptor& stage = *registered_stages()[index];
  SCOPED_TRACE(stage.label() + " on " + p.describe());
  const HostInputs in = make_inputs(p);
  const Reference oracle = linearity_pipeline(p, in);
  const Tolerance tol = stage_tolerance(p, oracle, stage.precision);
  GpuSession gpu(p, in);
  const Outputs got = run_stage(stage, p, in, &gpu);
  const Agreement vs_oracle = compare(got.pooled, got.y, oracle.pooled, oracle.y, tol);
  EXPECT_TRUE(vs_oracle.pass()) << "vs oracle: " << vs_oracle.summary();
  if (p.distribution != Distribution::Exact) return;
  const StageDescriptor& prev = previous_stage(index);
  const Outputs before = run_stage(prev, p, in, &gpu);
  const Agreement vs_prev = compare(got.pooled, got.y, before.pooled, before.y, tol, 1.0);
  EXPECT_TRUE(vs_prev.pass()) << "vs " << prev.label() << ": " << vs_prev.summary();
}

TEST_P(GpuStage, MatchesOracleOnProblemMatrixExactAndStructured) {
  SKIP_WITHOUT_GPU();
  for (const Problem& p : testing::gpu_problem_matrix()) {
    check_stage(GetParam(), with_distribution(p, Distribution::Exact));
    check_stage(GetParam(), with_distribution(p, Distribution::Structured));
  }
}

TEST_P(GpuStage, MatchesOracleOnRandomProblemsExactAndStructured) {
  SKIP_WITHOUT_GPU();
  // stride 1-3, padding 0-2, output_padding, dilation 1-3, groups 1/2/4, kernel 1-5, non-square.
  std::mt19937_64 rng(1234 + GetParam());
  for (int i = 0; i < 60; ++i) {
    const Problem p = testing::random_small_problem(rng);
    check_stage(GetParam(), with_distribution(p, Distribution::Exact));
    check_stage(GetParam(), with_distribution(p, Distribution::Structured));
  }
}

TEST_P(GpuStage, OutputBeyond2To31Elements) {
  SKIP_WITHOUT_GPU();
  const StageDescriptor& stage = *registered_stages()[GetParam()];
  // 1 x 8200 x 514 x 514 = 2.166e9 convT elements > 2^31: stages 01-05 materialize them
  // (8.7 GB of workspace); 32-bit element offsets anywhere would wrap and misread. Exact inputs,
  // so a single misread element fails.
  const Problem p = with_distribution(testing::make(1, 1, 8200, 512, 512, {3, 3}), Distribution::Exact);
  ASSERT_GT(p.out_elems(), int64_t(1) << 31);
  const double workspace = stage.workspace_bytes ? double(stage.workspace_bytes(p)) : 0.0;
  // What GpuSession allocates besides: inputs, outputs, and an L2 flush buffer of twice the L2.
  int dev = 0, l2 = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), cudaSuccess);
  const double session = 4.0 * double(p.x_elems() + p.weight_elems() + 2 * p.out_channels +
                                      p.pooled_elems() + p.batch) + 2.0 * double(l2);
  const double margin = 512.0 * 1024 * 1024;  // context, allocation granularity, fragmentation
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (session + workspace + margin > double(free_bytes))
    GTEST_SKIP() << stage.label() << " needs " << format_bytes(session + workspace + margin)
                 << " (workspace " << format_bytes(workspace) << ", inputs, outputs and L2 flush buffer "
                 << format_bytes(session) << ", margin " << format_bytes(margin)
                 << ") but cudaMemGetInfo reports " << format_bytes(double(free_bytes)) << " free";
  const HostInputs in = make_inputs(p);
  const Reference oracle = linearity_pipeline(p, in);
  GpuSession gpu(p, in);
  const Outputs got = run_stage(stage, p, in, &gpu);
  const Agreement a = compare(got.pooled, got.y, oracle.pooled, oracle.y, stage_tolerance(p, oracle, stage.precision));
  EXPECT_TRUE(a.pass()) << a.summary();
}

// Problems for the rerun tests, uniform inputs (real fractions: every rounding shows):
// stride (2, 1) with padding (the general kernel of stages 07-09, the border frames of 12 and
// 13), a stride-1 plane of two chunks with padding (the tiled kernels of 07-09 over several
// tiles per plane, the chunk sums and frames of 12 and 13), and the KernelBench channels (the
// 64 slots per channel of 12 and 13 across all 8 warps, 128 channels in 4 passes).
std::vector<Problem> rerun_problems() {
  std::vector<Problem> ps = {testing::make(3, 5, 7, 40, 37, {3, 3}, {2, 1}, {1, 0}, {1, 0}),
                             testing::make(2, 16, 40, 150, 131, {3, 3}, {1, 1}, {1, 1}),
                             testing::make(2, 64, 128, 64, 64, {3, 3})};
  for (Problem& p : ps) p.distribution = Distribution::Uniform;
  return ps;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST_P(GpuStage, RunsTwiceWithTheSameResultWithinTolerance) {
  SKIP_WITHOUT_GPU();
  const StageDescriptor& stage = *registered_stages()[GetParam()];
  for (const Problem& p : rerun_problems()) {
    SCOPED_TRACE(p.describe());
    const HostInputs in = make_inputs(p);
    const Reference oracle = linearity_pipeline(p, in);
    GpuSession gpu(p, in);
    const Outputs a = run_stage(stage, p, in, &gpu), b = run_stage(stage, p, in, &gpu);
    // A missing barrier or an unzeroed accumulator shows up as a second run that disagrees.
    const Agreement ab = compare(a.pooled, a.y, b.pooled, b.y, stage_tolerance(p, oracle, stage.precision), 2.0);
    EXPECT_TRUE(ab.pass()) << ab.summary();
  }
}

TEST_P(GpuStage, RerunsAreBitwiseEqualWhenDeterministic) {
  SKIP_WITHOUT_GPU();
  const StageDescriptor& stage = *registered_stages()[GetParam()];
  if (!stage.deterministic)
    GTEST_SKIP() << stage.label() << " does not claim bitwise-equal reruns (floating-point atomics add "
                 << "in arrival order); RunsTwiceWithTheSameResultWithinTolerance covers it";
  for (const Problem& p : rerun_problems()) {
    SCOPED_TRACE(p.describe());
    const HostInputs in = make_inputs(p);
    GpuSession gpu(p, in);
    const Outputs first = run_stage(stage, p, in, &gpu);
    for (int rerun = 1; rerun <= 3; ++rerun) {
      const Outputs again = run_stage(stage, p, in, &gpu);
      EXPECT_TRUE(bitwise_equal(first.pooled, again.pooled)) << "pooled differs in rerun " << rerun;
      EXPECT_TRUE(bitwise_equal(first.y, again.y)) << "y differs in rerun " << rerun;
    }
  }
}

// torch.logsumexp on values with non-finite entries (common/model/logsumexp.hpp): any NaN -> NaN;
// +inf and no NaN -> +inf; all -inf -> -inf; some -inf -> the log-sum-exp of the others.
enum class Expect { NaN, PlusInf, MinusInf, Finite };

struct BiasPattern {
  const char* name;
  Expect expect;
  void (*apply)(std::vector<float>& bias);
};

const BiasPattern kBiasPatterns[] = {
    {"one NaN", Expect::NaN, [](std::vector<float>& b) { b[17] = NAN; }},
    {"one +inf", Expect::PlusInf, [](std::vector<float>& b) { b[40] = INFINITY; }},
    {"+inf and -inf", Expect::PlusInf, [](std::vector<float>& b) { b[3] = -INFINITY; b[69] = INFINITY; }},
    {"NaN and +inf", Expect::NaN, [](std::vector<float>& b) { b[0] = INFINITY; b[50] = NAN; }},
    {"NaN and -inf", Expect::NaN, [](std::vector<float>& b) { b[33] = -INFINITY; b[34] = NAN; }},
    {"all -inf", Expect::MinusInf, [](std::vector<float>& b) { for (float& v : b) v = -INFINITY; }},
    {"every third -inf", Expect::Finite,
     [](std::vector<float>& b) { for (size_t i = 0; i < b.size(); i += 3) b[i] = -INFINITY; }},
    {"large: exp overflows without the max shift", Expect::Finite,
     [](std::vector<float>& b) { for (size_t i = 0; i < b.size(); ++i) b[i] = 1000.0f - 3.0f * float(i); }},
};

bool is(Expect e, double v) {
  switch (e) {
    case Expect::NaN: return std::isnan(v);
    case Expect::PlusInf: return v == INFINITY;
    case Expect::MinusInf: return v == -INFINITY;
    case Expect::Finite: return std::isfinite(v);
  }
  return false;
}

TEST_P(GpuStage, EpilogueFollowsTorchLogsumexpOnNonFiniteBias) {
  SKIP_WITHOUT_GPU();
  const StageDescriptor& stage = *registered_stages()[GetParam()];
  // 70 channels: more than two warps' worth, not a multiple of 32; three samples.
  const Problem p = with_distribution(testing::make(3, 4, 70, 9, 11, {3, 3}), Distribution::Exact);
  for (const BiasPattern& pattern : kBiasPatterns) {
    SCOPED_TRACE(std::string("bias: ") + pattern.name);
    HostInputs in = make_inputs(p);
    pattern.apply(in.bias);
    const Reference oracle = linearity_pipeline(p, in);
    for (double y : oracle.y) ASSERT_TRUE(is(pattern.expect, y)) << "the oracle gives " << y;
    GpuSession gpu(p, in);
    const Outputs got = run_stage(stage, p, in, &gpu);
    for (double y : got.y) EXPECT_TRUE(is(pattern.expect, y)) << "y = " << y;
    // Elementwise: NaN where the oracle has NaN, equal infinities, finite values within tolerance.
    const Agreement a = compare(got.pooled, got.y, oracle.pooled, oracle.y, stage_tolerance(p, oracle, stage.precision));
    EXPECT_TRUE(a.pass()) << a.summary();
  }
}

std::vector<size_t> gpu_stage_indices() {
  std::vector<size_t> idx;
  const auto& all = registered_stages();
  for (size_t i = 1; i < all.size(); ++i)
    if (all[i]->is_gpu()) idx.push_back(i);
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Stages, GpuStage, ::testing::ValuesIn(gpu_stage_indices()),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           const StageDescriptor& s = *registered_stages()[param.param];
                           return "stage_" + s.id + "_" + s.name;
                         });

// The real problem, once for all GPU stages: 1.07 GB of x, a 2.16 GB convT output.
void check_every_gpu_stage(const Problem& p) {
  const HostInputs in = make_inputs(p);
  const Reference oracle = linearity_pipeline(p, in);
  GpuSession gpu(p, in);
  for (const StageDescriptor* s : registered_stages()) {
    if (!s->is_gpu()) continue;
    const Outputs got = run_stage(*s, p, in, &gpu);
    const Agreement a = compare(got.pooled, got.y, oracle.pooled, oracle.y, stage_tolerance(p, oracle, s->precision));
    EXPECT_TRUE(a.pass()) << s->label() << ": " << a.summary();
  }
}

// KernelBench's inputs (x ~ U[0,1)) at the fp32 bound.
TEST(KernelBench, EveryGpuStageMatchesLinearityOracle) {
  SKIP_WITHOUT_GPU();
  check_every_gpu_stage(Problem::kernelbench());
}

// Exact inputs at the KernelBench size: each pooled value to a few ulps, where the fp32 bound
// (~3.5e-4 of the magnitude) could not see a dropped border row.
TEST(KernelBench, EveryGpuStageMatchesOracleOnExactInputs) {
  SKIP_WITHOUT_GPU();
  check_every_gpu_stage(with_distribution(Problem::kernelbench(), Distribution::Exact));
}

TEST(KernelBench, UnsupportedSizeIsAClearMemoryError) {
  SKIP_WITHOUT_GPU();
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  try {
    DeviceBuffer<float> too_big(total / sizeof(float) + 1, "a test buffer larger than the GPU");
    FAIL() << "allocating more than the GPU has succeeded";
  } catch (const DeviceMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("a test buffer larger than the GPU"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("free of"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ladder
