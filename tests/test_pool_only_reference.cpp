// The host half of `ladder --pool-only` (ladder/pool_only.hpp), without a GPU: the generated
// tensor, its fp64 reference, the tolerance and its power, and the checks made before anything
// large is allocated.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "inputs.hpp"
#include "pool_only.hpp"
#include "problem_matrix.hpp"

namespace ladder {
namespace {

// A problem whose convT output is (batch, out_channels, h, w): kernel 1, stride 1, no padding.
Problem output_shape(int64_t batch, int64_t out_channels, int64_t h, int64_t w) {
  return testing::make(batch, 1, out_channels, h, w, {1, 1});
}

struct Generated {
  std::vector<float> t;
  PoolReference ref;
};

Generated generate(const Problem& p) {
  Generated g;
  g.t.resize(size_t(p.out_elems()));
  g.ref = generate_pool_tensor(p, g.t.data());
  return g;
}

int64_t plane_size(const Problem& p) { return p.out_h() * p.out_w(); }

// pooled as a stage forms it: an fp32 sum of the plane in index order, one fp32 division.
std::vector<double> sequential_fp32_means(const Problem& p, const std::vector<float>& t, int64_t skip_tail = 0) {
  const int64_t P = plane_size(p);
  std::vector<double> pooled(size_t(p.pooled_elems()));
  for (int64_t plane = 0; plane < p.pooled_elems(); ++plane) {
    float s = 0.0f;
    for (int64_t j = 0; j < P - skip_tail; ++j) s += t[size_t(plane * P + j)];
    pooled[size_t(plane)] = double(s / float(P));
  }
  return pooled;
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST(PoolOnlyReference, TensorComesFromTheCounterGeneratorWithOneMeanPerPlane) {
  const Problem p = output_shape(2, 3, 7, 9);  // odd plane of 63
  const Generated g = generate(p);
  const int64_t P = plane_size(p);
  for (int64_t plane = 0; plane < p.pooled_elems(); ++plane) {
    const float m = 4.0f * uniform01(p.seed, kPoolPlaneMeanStream, uint64_t(plane)) - 2.0f;
    double sum = 0, abs_sum = 0;
    for (int64_t j = 0; j < P; ++j) {
      const int64_t i = plane * P + j;
      const float want = m + (uniform01(p.seed, kPoolTensorStream, uint64_t(i)) - 0.5f);
      ASSERT_EQ(g.t[size_t(i)], want) << "element " << i;
      sum += double(want);
      abs_sum += std::fabs(double(want));
    }
    EXPECT_DOUBLE_EQ(g.ref.mean[size_t(plane)], sum / double(P));
    EXPECT_DOUBLE_EQ(g.ref.abs_mean[size_t(plane)], abs_sum / double(P));
    EXPECT_GE(g.ref.abs_mean[size_t(plane)], std::fabs(g.ref.mean[size_t(plane)]));
  }
  // Plane means differ (a plane mix-up must show): no two within 1e-3.
  for (size_t a = 0; a < g.ref.mean.size(); ++a)
    for (size_t b = a + 1; b < g.ref.mean.size(); ++b)
      EXPECT_GT(std::fabs(g.ref.mean[a] - g.ref.mean[b]), 1e-3) << "planes " << a << " and " << b;
}

TEST(PoolOnlyReference, DoesNotDependOnTheThreadCountAndMatchesPoolReference) {
  // Planes of 301 x 299 = 89999 floats: two host work items per plane, the second partial.
  const Problem p = output_shape(1, 3, 301, 299);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const Generated one = generate(p);
  omp_set_num_threads(3);
  const Generated three = generate(p);
  omp_set_num_threads(threads);
  EXPECT_TRUE(one.t == three.t);
  EXPECT_TRUE(bitwise_equal(one.ref.mean, three.ref.mean));
  EXPECT_TRUE(bitwise_equal(one.ref.abs_mean, three.ref.abs_mean));
  const PoolReference again = pool_reference(p, one.t.data());
  EXPECT_TRUE(bitwise_equal(again.mean, one.ref.mean));
  EXPECT_TRUE(bitwise_equal(again.abs_mean, one.ref.abs_mean));
}

TEST(PoolOnlyTolerance, IsTheProbabilisticBoundOfOnePlaneSum) {
  const Problem p = output_shape(2, 2, 13, 11);
  const Generated g = generate(p);
  const std::vector<double> tol = pool_tolerance(p, g.ref);
  const double P = 143.0, u = std::ldexp(1.0, -24);
  for (size_t i = 0; i < tol.size(); ++i)
    EXPECT_DOUBLE_EQ(tol[i], 8.0 * std::sqrt(P) * u * g.ref.abs_mean[i] + u * std::fabs(g.ref.mean[i]));
}

// At the KernelBench plane size (514 x 514): what a correct stage computes passes, with room
// to spare, and each kind of wrong answer fails.
TEST(PoolOnlyTolerance, PassesCorrectSumsAndFailsWrongOnesAtTheKernelBenchPlaneSize) {
  const Problem p = output_shape(1, 4, 514, 514);
  const Generated g = generate(p);
  const std::vector<double> tol = pool_tolerance(p, g.ref);

  // Stage 01's order: one long sequential fp32 sum per plane, the worst order there is.
  const std::vector<double> sequential = sequential_fp32_means(p, g.t);
  const Agreement ok = check_pooled(sequential, g.ref, tol);
  EXPECT_TRUE(ok.pass()) << ok.summary();
  EXPECT_LT(ok.worst_ratio, 0.5) << "a correct fp32 sum should sit well inside the bound";

  // Just outside and just inside the tolerance, per plane.
  std::vector<double> off = g.ref.mean;
  for (size_t i = 0; i < off.size(); ++i) off[i] += (i == 2 ? 1.01 : 0.99) * tol[i];
  const Agreement edge = check_pooled(off, g.ref, tol);
  EXPECT_FALSE(edge.pass());
  EXPECT_EQ(edge.worst_index, 2);

  // A dropped last row (514 of 264196 values), a plane mix-up, a missing division: all fail.
  EXPECT_FALSE(check_pooled(sequential_fp32_means(p, g.t, p.out_w()), g.ref, tol).pass());
  std::vector<double> swapped = g.ref.mean;
  std::swap(swapped[0], swapped[1]);
  EXPECT_FALSE(check_pooled(swapped, g.ref, tol).pass());
  std::vector<double> sums = g.ref.mean;
  for (double& v : sums) v *= double(plane_size(p));
  EXPECT_FALSE(check_pooled(sums, g.ref, tol).pass());

  // An unwritten value (the NaN poison) fails, whatever else is right.
  std::vector<double> unwritten = g.ref.mean;
  unwritten[3] = NAN;
  const Agreement nan = check_pooled(unwritten, g.ref, tol);
  EXPECT_FALSE(nan.pass());
  EXPECT_EQ(nan.nan_count, 1);
}

TEST(PoolOnlyTolerance, SizeMismatchIsALogicError) {
  const Problem p = output_shape(1, 2, 3, 3);
  const Generated g = generate(p);
  EXPECT_THROW(check_pooled({1.0}, g.ref, pool_tolerance(p, g.ref)), std::logic_error);
}

// The same contracts as the full ladder, before anything large is allocated.
TEST(PoolOnly, HugeBatchStopsWithAHostMemoryError) {
  Problem p = Problem::kernelbench();
  p.batch = 200000;  // a 27 TB tensor
  LadderOptions opt;
  opt.progress = false;
  try {
    run_pool_only(p, opt);
    FAIL() << "run_pool_only accepted a 27 TB tensor";
  } catch (const HostMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("the convT-sized tensor"), std::string::npos) << e.what();
  }
}

TEST(PoolOnly, SelectingOnlyStagesWithoutAPoolPhaseIsAnError) {
  LadderOptions opt;
  opt.progress = false;
  opt.rung_ids = {"13"};  // pools x before the convolution: no pool phase of its own
  try {
    run_pool_only(Problem::kernelbench_v1(), opt);
    FAIL() << "--pool-only --stages 13 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("pool phase"), std::string::npos) << e.what();
  }
}

TEST(PoolOnly, InvalidTimingOptionsAreRejected) {
  LadderOptions opt;
  opt.progress = false;
  opt.warmup = -1;
  EXPECT_THROW(run_pool_only(Problem::kernelbench_v1(), opt), std::invalid_argument);
}

}  // namespace
}  // namespace ladder
