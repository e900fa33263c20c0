// Every GPU stage against the fp64 oracle and against the stage before it, on the problem
// matrix (structured inputs, NaN-poisoned outputs) and on the KernelBench problem. Without a
// CUDA device every test here is skipped, visibly, with the runtime's reason.
#include <gtest/gtest.h>

#include <memory>

#include "device.hpp"
#include "gpu_session.hpp"
#include "oracle.hpp"
#include "problem_matrix.hpp"
#include "random_problems.hpp"
#include "stage.hpp"
#include "tolerance.hpp"

namespace ladder {
namespace {

#define SKIP_WITHOUT_GPU()                                     \
  do {                                                         \
    std::string why;                                           \
    if (!cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

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

class GpuStage : public ::testing::TestWithParam<size_t> {};

// Runs stage `index` on `p` and checks it against the fp64 oracle and the stage before it.
void check_against_oracle_and_previous(size_t index, const Problem& p) {
  const StageDescriptor& stage = *registered_stages()[index];
  const StageDescriptor& prev = previous_stage(index);
  SCOPED_TRACE(stage.label() + " on " + p.describe());
  const HostInputs in = make_inputs(p);
  const Reference oracle = linearity_pipeline(p, in);
  const Tolerance tol = fp32_tolerance(p, oracle);
  GpuSession gpu(p, in);
  const Outputs got = run_stage(stage, p, in, &gpu);
  const Agreement vs_oracle = compare(got.pooled, got.y, oracle.pooled, oracle.y, tol);
  EXPECT_TRUE(vs_oracle.pass()) << "vs oracle: " << vs_oracle.summary();
  const Outputs before = run_stage(prev, p, in, &gpu);
  // Each within 1x tolerance of the truth (0x for the fp64 CPU stage): at most 2x apart.
  const Agreement vs_prev = compare(got.pooled, got.y, before.pooled, before.y, tol, 2.0);
  EXPECT_TRUE(vs_prev.pass()) << "vs " << prev.label() << ": " << vs_prev.summary();
}

TEST_P(GpuStage, MatchesOracleAndPreviousStageOnProblemMatrix) {
  SKIP_WITHOUT_GPU();
  for (const Problem& p : testing::gpu_problem_matrix()) check_against_oracle_and_previous(GetParam(), p);
}

TEST_P(GpuStage, MatchesOracleAndPreviousStageOnRandomProblems) {
  SKIP_WITHOUT_GPU();
  // stride 1-3, padding 0-2, output_padding, dilation 1-3, groups 1/2/4, kernel 1-5, non-square.
  std::mt19937_64 rng(1234 + GetParam());
  for (int i = 0; i < 60; ++i) check_against_oracle_and_previous(GetParam(), testing::random_small_problem(rng));
}

TEST_P(GpuStage, OutputBeyond2To31ElementsWhenWorkspaceIsSmall) {
  SKIP_WITHOUT_GPU();
  const StageDescriptor& stage = *registered_stages()[GetParam()];
  // 1 x 8200 x 514 x 514 = 2.166e9 convT elements > 2^31: only stages that never materialize
  // the convT output can afford this; the others are covered by the KernelBench test.
  Problem p = testing::make(1, 1, 8200, 512, 512, {3, 3});
  if (stage.workspace_bytes && stage.workspace_bytes(p) > (size_t(1) << 30))
    GTEST_SKIP() << stage.label() << " materializes the " << p.out_elems() << "-element convT output";
  const HostInputs in = make_inputs(p);
  const Reference oracle = linearity_pipeline(p, in);
  GpuSession gpu(p, in);
  const Outputs got = run_stage(stage, p, in, &gpu);
  const Agreement a = compare(got.pooled, got.y, oracle.pooled, oracle.y, fp32_tolerance(p, oracle));
  EXPECT_TRUE(a.pass()) << a.summary();
}

TEST_P(GpuStage, RunsTwiceWithTheSameResultWithinTolerance) {
  SKIP_WITHOUT_GPU();
  const StageDescriptor& stage = *registered_stages()[GetParam()];
  const Problem p = testing::make(3, 5, 7, 40, 37, {3, 3}, {2, 1}, {1, 0}, {1, 0});
  const HostInputs in = make_inputs(p);
  const Reference oracle = linearity_pipeline(p, in);
  GpuSession gpu(p, in);
  const Outputs a = run_stage(stage, p, in, &gpu), b = run_stage(stage, p, in, &gpu);
  // A missing barrier or an unzeroed accumulator shows up as a second run that disagrees.
  const Agreement ab = compare(a.pooled, a.y, b.pooled, b.y, fp32_tolerance(p, oracle), 2.0);
  EXPECT_TRUE(ab.pass()) << ab.summary();
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
TEST(KernelBench, EveryGpuStageMatchesLinearityOracle) {
  SKIP_WITHOUT_GPU();
  const Problem p = Problem::kernelbench();
  const HostInputs in = make_inputs(p);
  const Reference oracle = linearity_pipeline(p, in);
  const Tolerance tol = fp32_tolerance(p, oracle);
  GpuSession gpu(p, in);
  for (const StageDescriptor* s : registered_stages()) {
    if (!s->is_gpu()) continue;
    const Outputs got = run_stage(*s, p, in, &gpu);
    const Agreement a = compare(got.pooled, got.y, oracle.pooled, oracle.y, tol);
    EXPECT_TRUE(a.pass()) << s->label() << ": " << a.summary();
  }
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
