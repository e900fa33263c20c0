// Stage 00 (the CPU reference) against the oracles, through its stage descriptor.
#include <gtest/gtest.h>

#include "oracle.hpp"
#include "random_problems.hpp"
#include "stage.hpp"
#include "tolerance.hpp"

namespace ladder {
const StageDescriptor& stage_00_descriptor();
namespace {

TEST(CpuStage, MatchesLinearityOracleOnRandomProblems) {
  const StageDescriptor& stage = stage_00_descriptor();
  ASSERT_FALSE(stage.is_gpu());
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) {
    const Problem p = testing::random_small_problem(rng);
    SCOPED_TRACE(p.describe());
    const HostInputs in = make_inputs(p);
    const CpuStageResult r = stage.run_cpu(p, in);
    ASSERT_EQ(r.phase_ms.size(), 3u);
    const Reference lin = linearity_pipeline(p, in);
    const Agreement a = compare(r.pooled, r.y, lin.pooled, lin.y,
                                rounding_tolerance(p, lin, kFp64UnitRoundoff), 2.0);
    ASSERT_TRUE(a.pass()) << a.summary();
  }
}

TEST(CpuStage, MatchesOracleBitForBitOnExactInputs) {
  // Exact inputs make every sum an integer held exactly in fp64: the stage's plane sums and the
  // oracle's are the same number, divided once by the same plane size.
  std::mt19937_64 rng(8);
  for (int i = 0; i < 20; ++i) {
    Problem p = testing::random_small_problem(rng);
    p.distribution = Distribution::Exact;
    SCOPED_TRACE(p.describe());
    const HostInputs in = make_inputs(p);
    const CpuStageResult r = stage_00_descriptor().run_cpu(p, in);
    const Reference lin = linearity_pipeline(p, in);
    ASSERT_EQ(r.pooled, lin.pooled);
    ASSERT_EQ(r.y, lin.y);
  }
}

TEST(CpuStage, KernelBenchV1SizesMatchOracle) {
  Problem p = Problem::kernelbench_v1();
  p.batch = 4;  // the literal cost grows with batch; four samples keep the test quick
  const HostInputs in = make_inputs(p);
  const CpuStageResult r = stage_00_descriptor().run_cpu(p, in);
  const Reference lin = linearity_pipeline(p, in);
  const Agreement a = compare(r.pooled, r.y, lin.pooled, lin.y,
                              rounding_tolerance(p, lin, kFp64UnitRoundoff), 2.0);
  EXPECT_TRUE(a.pass()) << a.summary();
}

}  // namespace
}  // namespace ladder
