// Tests for common/problem: parameter validation (one test per case PyTorch rejects, and the
// 32-bit limits of the kernels' index arithmetic), the output-size formula on a hand-computed
// table, the per-tap input ranges and the MAC count against brute force, and the cost model's
// exact figures for the KernelBench problem. Also the host-memory estimate a problem implies
// (common/toolkit/host_memory) and the provenance parsers (common/toolkit/provenance), which need no GPU.
#include "problem.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "host_memory_need.hpp"
#include "provenance.hpp"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

using ladder::Distribution;
using ladder::InputRange;
using ladder::InvalidProblem;
using ladder::Pair;
using ladder::Problem;

namespace {

/// A small valid problem to start each invalid case from (only one field is broken per test).
Problem small_problem() {
  Problem p;
  p.batch = 2;
  p.in_channels = 4;
  p.out_channels = 6;
  p.in_h = 5;
  p.in_w = 7;
  p.kernel_size = Pair::square(3);
  return p;
}

/// Asserts that validate() throws InvalidProblem and that its message contains every needle
/// (the parameter's name and the offending value, as the header promises).
void expect_invalid(const Problem& p, std::initializer_list<std::string> needles) {
  try {
    p.validate();
    ADD_FAILURE() << "validate() accepted an invalid problem: " << p.describe();
  } catch (const InvalidProblem& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "message lacks '" << n << "': " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something other than InvalidProblem: " << e.what();
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Validation: each case PyTorch rejects, one test each.

TEST(ProblemValidate, KernelBenchPresetsAreValid) {
  const Problem kb = Problem::kernelbench();
  EXPECT_NO_THROW(kb.validate());
  EXPECT_EQ(kb.batch, 16);
  EXPECT_EQ(kb.in_channels, 64);
  EXPECT_EQ(kb.out_channels, 128);
  EXPECT_EQ(kb.in_h, 512);
  EXPECT_EQ(kb.in_w, 512);
  EXPECT_EQ(kb.kernel_size, Pair::square(3));
  EXPECT_EQ(kb.distribution, Distribution::Uniform);

  const Problem v1 = Problem::kernelbench_v1();
  EXPECT_NO_THROW(v1.validate());
  EXPECT_EQ(v1.batch, 128);
  EXPECT_EQ(v1.in_channels, 3);
  EXPECT_EQ(v1.out_channels, 16);
  EXPECT_EQ(v1.in_h, 32);
  EXPECT_EQ(v1.in_w, 32);
  EXPECT_EQ(v1.kernel_size, Pair::square(3));
  EXPECT_EQ(v1.distribution, Distribution::Normal);
}

TEST(ProblemValidate, SmallBaseProblemIsValid) {  // the starting point of every case below
  EXPECT_NO_THROW(small_problem().validate());
}

TEST(ProblemValidate, NonPositiveBatch) {
  Problem p = small_problem();
  p.batch = 0;
  expect_invalid(p, {"batch", "0"});
  p.batch = -7;
  expect_invalid(p, {"batch", "-7"});
}

TEST(ProblemValidate, NonPositiveInChannels) {
  Problem p = small_problem();
  p.in_channels = 0;
  expect_invalid(p, {"in_channels", "0"});
  p.in_channels = -5;
  expect_invalid(p, {"in_channels", "-5"});
}

TEST(ProblemValidate, NonPositiveOutChannels) {
  Problem p = small_problem();
  p.out_channels = 0;
  expect_invalid(p, {"out_channels", "0"});
  p.out_channels = -9;
  expect_invalid(p, {"out_channels", "-9"});
}

TEST(ProblemValidate, NonPositiveInH) {
  Problem p = small_problem();
  p.in_h = 0;
  expect_invalid(p, {"input height (--size", "0"});
  p.in_h = -3;
  expect_invalid(p, {"input height (--size", "-3"});
}

TEST(ProblemValidate, NonPositiveInW) {
  Problem p = small_problem();
  p.in_w = 0;
  expect_invalid(p, {"input width (--size", "0"});
  p.in_w = -11;
  expect_invalid(p, {"input width (--size", "-11"});
}

TEST(ProblemValidate, NonPositiveKernelSize) {
  Problem p = small_problem();
  p.kernel_size = {3, 0};
  expect_invalid(p, {"kernel_size", "(3, 0)"});
  p.kernel_size = {-2, 3};
  expect_invalid(p, {"kernel_size", "(-2, 3)"});
}

TEST(ProblemValidate, NonPositiveStride) {
  Problem p = small_problem();
  p.stride = {0, 2};
  expect_invalid(p, {"stride", "(0, 2)"});
  p.stride = {1, -4};
  expect_invalid(p, {"stride", "(1, -4)"});
}

TEST(ProblemValidate, NonPositiveDilation) {
  Problem p = small_problem();
  p.dilation = {2, 0};
  expect_invalid(p, {"dilation", "(2, 0)"});
  p.dilation = {-1, 1};
  expect_invalid(p, {"dilation", "(-1, 1)"});
}

TEST(ProblemValidate, NonPositiveGroups) {
  Problem p = small_problem();
  p.groups = 0;
  expect_invalid(p, {"groups", "0"});
  p.groups = -2;
  expect_invalid(p, {"groups", "-2"});
}

TEST(ProblemValidate, NegativePadding) {
  Problem p = small_problem();
  p.padding = {-1, 0};
  expect_invalid(p, {"padding", "(-1, 0)"});
  p.padding = {1, -3};
  expect_invalid(p, {"padding", "(1, -3)"});
}

TEST(ProblemValidate, NegativeOutputPadding) {
  Problem p = small_problem();
  p.output_padding = {0, -2};
  expect_invalid(p, {"output_padding", "(0, -2)"});
}

TEST(ProblemValidate, OutputPaddingNotSmallerThanStrideOrDilation) {
  Problem p = small_problem();
  p.stride = {2, 2};
  p.dilation = {1, 1};
  p.output_padding = {2, 0};  // height: 2 >= stride 2 and 2 >= dilation 1
  expect_invalid(p, {"output_padding", "(2, 0)"});

  Problem q = small_problem();
  q.stride = {1, 3};
  q.dilation = {1, 2};
  q.output_padding = {0, 3};  // width: 3 >= stride 3 and 3 >= dilation 2
  expect_invalid(q, {"output_padding", "(0, 3)"});
}

TEST(ProblemValidate, OutputPaddingSmallerThanDilationOnlyIsValid) {
  // PyTorch: output_padding must be smaller than stride OR dilation; stride 1, dilation 2 allows 1.
  Problem p = small_problem();
  p.in_h = 8;
  p.in_w = 8;
  p.kernel_size = Pair::square(3);
  p.stride = Pair::square(1);
  p.dilation = Pair::square(2);
  p.output_padding = Pair::square(1);
  EXPECT_NO_THROW(p.validate());
  // (8-1)*1 - 0 + 2*(3-1) + 1 + 1 = 13
  EXPECT_EQ(p.out_h(), 13);
  EXPECT_EQ(p.out_w(), 13);

  // And output_padding equal to the stride but below the dilation is also valid.
  Problem q = small_problem();
  q.stride = Pair::square(2);
  q.dilation = Pair::square(3);
  q.output_padding = Pair::square(2);
  EXPECT_NO_THROW(q.validate());
}

TEST(ProblemValidate, InChannelsNotDivisibleByGroups) {
  Problem p = small_problem();
  p.in_channels = 6;
  p.out_channels = 8;
  p.groups = 4;
  expect_invalid(p, {"in_channels", "6", "groups", "4"});
}

TEST(ProblemValidate, OutChannelsNotDivisibleByGroups) {
  Problem p = small_problem();
  p.in_channels = 6;
  p.out_channels = 4;
  p.groups = 3;  // 3 divides in_channels 6 but not out_channels 4
  expect_invalid(p, {"out_channels", "4", "groups", "3"});
}

TEST(ProblemValidate, GroupsDividingBothChannelCountsIsValid) {
  Problem p = small_problem();
  p.in_channels = 6;
  p.out_channels = 9;
  p.groups = 3;
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.in_per_group(), 2);
  EXPECT_EQ(p.out_per_group(), 3);
  EXPECT_EQ(p.weight_elems(), 6 * 3 * 9);
}

TEST(ProblemValidate, NonPositiveOutputSize) {
  Problem p = small_problem();
  p.in_h = 2;
  p.in_w = 2;
  p.kernel_size = Pair::square(1);
  p.padding = {3, 0};
  // height: (2-1)*1 - 2*3 + 1*(1-1) + 0 + 1 = -4; width: 1 - 0 + 0 + 0 + 1 = 2
  expect_invalid(p, {"output size", "-4"});

  Problem q = small_problem();
  q.in_h = 3;
  q.in_w = 3;
  q.kernel_size = Pair::square(1);
  q.padding = {0, 1};
  // width: (3-1)*1 - 2*1 + 0 + 0 + 1 = 1 (still valid); padding 2 gives 2 - 4 + 1 = -1
  EXPECT_NO_THROW(q.validate());
  q.padding = {0, 2};
  expect_invalid(q, {"output size", "-1"});
}

// ---------------------------------------------------------------------------------------------
// 32-bit in-plane index arithmetic. Kernels hold sizes and indices within a plane in int, with
// 1024 of headroom for loops and tiles that run past an edge: per axis,
// out + padding + dilation*(kernel - 1) + stride + 1024 <= 2^31 - 1.

TEST(ProblemValidate, PaddingAndDilationOf2To30AreRejected) {
  // Output 10x10 (the padding cancels the dilation), but oh + padding - kh*dilation and the
  // tap ranges need 3 * 2^30: signed overflow in 32 bits.
  Problem p = small_problem();
  p.in_h = p.in_w = 10;
  p.padding = Pair::square(int64_t(1) << 30);
  p.dilation = Pair::square(int64_t(1) << 30);
  ASSERT_EQ(p.out_h(), 10);
  expect_invalid(p, {"in-plane index arithmetic needs 32 bits", "padding_h", "dilation_h", "1073741824",
                     "exceeds 2^31 - 1"});
}

TEST(ProblemValidate, LargestDilationThatFits32BitsIsValid) {
  // Height: in 10, kernel 3, dilation d: out = 9 + 2d + 1, reach = out + 0 + 2d + 1 + 1024
  // = 4d + 1035, which is 2^31 - 1 exactly at d = 536870653. Width 1 keeps the plane small.
  Problem p = small_problem();
  p.in_h = 10;
  p.in_w = 1;
  p.kernel_size = {3, 1};
  p.dilation = {536870653, 1};
  ASSERT_EQ(p.out_h() + 2 * p.dilation.h + 1 + 1024, int64_t(2147483647));
  EXPECT_NO_THROW(p.validate());
  p.dilation.h += 1;  // reach 2^31 + 3
  expect_invalid(p, {"in-plane index arithmetic needs 32 bits", "dilation_h", "536870654", "2147483651"});
}

TEST(ProblemValidate, LargestStrideThatFits32BitsIsValid) {
  // Width: in 2, kernel 1, stride s: out = s + 1, reach = (s + 1) + 0 + 0 + s + 1024 = 2s + 1025.
  Problem p = small_problem();
  p.in_h = 1;
  p.in_w = 2;
  p.kernel_size = {1, 1};
  p.stride = {1, 1073741311};
  EXPECT_NO_THROW(p.validate());
  p.stride.w += 1;
  expect_invalid(p, {"stride_w", "1073741312", "exceeds 2^31 - 1"});
}

TEST(ProblemValidate, ParametersBeyond32BitsAreRejected) {
  Problem p = small_problem();
  p.stride = {int64_t(1) << 31, 1};
  expect_invalid(p, {"stride", "(2147483648, 1)", "2^31 - 1"});
  Problem q = small_problem();
  q.out_channels = 2147483647 - 1024 + 1;
  q.groups = 1;
  expect_invalid(q, {"out_channels", "2147482624"});
}

TEST(ProblemValidate, PlaneOf2To31ElementsIsRejectedAndOneBelowTheLimitIsValid) {
  Problem p = small_problem();
  p.in_h = 65536;
  p.in_w = 32768;  // 2^31 elements in an input plane
  p.kernel_size = {1, 1};
  expect_invalid(p, {"input height*width (--size", "2147483648"});
  p.in_h = p.in_w = 46340;  // 2147395600 <= 2^31 - 1 - 1024
  EXPECT_NO_THROW(p.validate());
}

TEST(ProblemValidate, TensorsBeyond2To62ElementsAreRejected) {
  Problem p = small_problem();
  p.batch = int64_t(1) << 40;
  p.in_channels = p.out_channels = 2048;
  p.in_h = 2048;
  p.in_w = 2;
  p.kernel_size = {1, 1};  // x: 2^40 * 2^11 * 2^11 * 2 = 2^63 elements
  expect_invalid(p, {"x would have", "2^62"});
}

// ---------------------------------------------------------------------------------------------
// Host memory: the ladder's estimate for a problem and the message when it does not fit.

TEST(HostMemory, ParsesMemAvailableAndCgroupLimits) {
  EXPECT_EQ(ladder::meminfo_available_bytes("MemTotal:  100 kB\nMemFree: 1 kB\nMemAvailable:    2048 kB\n"),
            2048.0 * 1024.0);
  EXPECT_EQ(ladder::meminfo_available_bytes("MemTotal:  100 kB\n"), -1.0);
  EXPECT_EQ(ladder::cgroup_limit_bytes("max\n"), -1.0);                  // v2: no limit
  EXPECT_EQ(ladder::cgroup_limit_bytes("9223372036854771712\n"), -1.0);  // v1: no limit
  EXPECT_EQ(ladder::cgroup_limit_bytes(""), -1.0);
  EXPECT_EQ(ladder::cgroup_limit_bytes("17179869184\n"), 17179869184.0);
}

TEST(HostMemory, UsableIsTheTighterOfMeminfoAndTheCgroup) {
  ladder::HostMemory m;
  EXPECT_EQ(m.usable(), std::numeric_limits<double>::infinity());  // nothing known: no limit
  m.available = 10e9;
  EXPECT_EQ(m.usable(), 10e9);
  m.cgroup_limit = 8e9;
  m.cgroup_usage = 3e9;
  EXPECT_EQ(m.usable(), 5e9);
  m.cgroup_usage = 9e9;  // over the limit already
  EXPECT_EQ(m.usable(), 0.0);
}

TEST(HostMemory, ProbeReadsThisMachine) {
  const ladder::HostMemory m = ladder::probe_host_memory();
  if (m.available < 0) GTEST_SKIP() << "no /proc/meminfo here: " << m.describe();
  EXPECT_GT(m.usable(), 0.0) << m.describe();
}

TEST(HostMemory, EstimateCountsXTheOracleAndTheLiteralStage) {
  Problem p = Problem::kernelbench();
  p.batch = 200000;
  const ladder::HostMemoryNeed need = ladder::ladder_host_memory_need(p, 7, false);
  ASSERT_FALSE(need.items.empty());
  EXPECT_EQ(need.items.front().what, "x");  // largest first
  EXPECT_EQ(need.items.front().bytes, 4.0 * 200000 * 64 * 512 * 512);  // 13.42 TB
  // The rest (oracle R: 8 * 200000 * 64 * 9 = 0.92 GB, outputs, weights) is small next to x.
  EXPECT_GT(need.total(), need.items.front().bytes);
  EXPECT_LT(need.total(), 1.01 * need.items.front().bytes);

  // Stage 00 materializes the convT output in fp64: 8 * 16 * 128 * 514 * 514 = 4.33 GB.
  const ladder::HostMemoryNeed literal = ladder::ladder_host_memory_need(Problem::kernelbench(), 1, true);
  bool found = false;
  for (const ladder::HostMemoryItem& i : literal.items)
    if (i.what.find("convT output") != std::string::npos) {
      found = true;
      EXPECT_EQ(i.bytes, 8.0 * 16 * 128 * 514 * 514);
    }
  EXPECT_TRUE(found);
}

TEST(HostMemory, TooLargeARunStopsWithBothNumbers) {
  Problem p = Problem::kernelbench();
  p.batch = 200000;
  ladder::HostMemory have;
  have.available = 23.1e9;
  try {
    ladder::check_host_memory(ladder::ladder_host_memory_need(p, 7, false), have);
    ADD_FAILURE() << "a 13 TB run passed on a 23 GB machine";
  } catch (const ladder::HostMemoryError& e) {
    const std::string msg = e.what();
    for (const char* needle : {"host memory", "13.4", "TB", "x 13.42 TB", "23.10 GB available", "MemAvailable"})
      EXPECT_NE(msg.find(needle), std::string::npos) << "message lacks '" << needle << "': " << msg;
  }
  // The KernelBench problem itself (about 1.2 GB) fits.
  EXPECT_NO_THROW(ladder::check_host_memory(ladder::ladder_host_memory_need(Problem::kernelbench(), 7, false), have));
  EXPECT_NO_THROW(ladder::check_host_memory(ladder::ladder_host_memory_need(p, 7, false), ladder::HostMemory{}));
}

// ---------------------------------------------------------------------------------------------
// Provenance parsers.

TEST(Provenance, DriverReleaseFromProcText) {
  EXPECT_EQ(ladder::nvidia_driver_release(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"),
            "550.54.15");
  EXPECT_EQ(ladder::nvidia_driver_release(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16)\n"),
            "580.65.06");
  EXPECT_EQ(ladder::nvidia_driver_release(""), "");
  EXPECT_EQ(ladder::cuda_version_string(13000), "13.0");
  EXPECT_EQ(ladder::cuda_version_string(12080), "12.8");
  EXPECT_EQ(ladder::cuda_version_string(0), "none");
}

TEST(ProblemDistribution, ParsesTheThreeNamesAndRoundTrips) {
  EXPECT_EQ(ladder::distribution_from_string("uniform"), Distribution::Uniform);
  EXPECT_EQ(ladder::distribution_from_string("normal"), Distribution::Normal);
  EXPECT_EQ(ladder::distribution_from_string("structured"), Distribution::Structured);
  for (Distribution d : {Distribution::Uniform, Distribution::Normal, Distribution::Structured})
    EXPECT_EQ(ladder::distribution_from_string(ladder::to_string(d)), d);
}

TEST(ProblemDistribution, RejectsGaussianNamingIt) {
  try {
    ladder::distribution_from_string("gaussian");
    ADD_FAILURE() << "\"gaussian\" was accepted";
  } catch (const InvalidProblem& e) {
    EXPECT_NE(std::string(e.what()).find("gaussian"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ladder::distribution_from_string(""), InvalidProblem);
  EXPECT_THROW(ladder::distribution_from_string("Uniform"), InvalidProblem);
}

// ---------------------------------------------------------------------------------------------
// Output size: PyTorch's Hout = (H-1)*stride - 2*padding + dilation*(k-1) + output_padding + 1,
// each expected value computed by hand (the working is in the comment of each row).

namespace {
struct OutSizeCase {
  int64_t in_h, in_w;
  Pair k, s, p, op, d;
  int64_t out_h, out_w;
  const char* working;
};
}  // namespace

TEST(ProblemOutputSize, HandComputedTable) {
  const std::vector<OutSizeCase> cases = {
      // in_h in_w  kernel   stride   padding  out_pad  dilation  Hout Wout
      {512, 512, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 514, 514, "511+2+1"},
      {32, 32, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 34, 34, "31+2+1"},
      {5, 7, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 5, 7, "4+1 | 6+1"},
      {4, 6, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 8, 12, "6+1+1 | 10+1+1"},
      {4, 4, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 8, 8, "6-2+2+1+1"},
      {10, 3, {5, 4}, {3, 1}, {2, 0}, {0, 0}, {1, 1}, 28, 6, "27-4+4+1 | 2+3+1"},
      {6, 9, {3, 2}, {1, 1}, {0, 0}, {0, 0}, {2, 3}, 10, 12, "5+4+1 | 8+3+1"},
      {7, 5, {4, 5}, {2, 3}, {1, 1}, {1, 2}, {1, 1}, 15, 17, "12-2+3+1+1 | 12-2+4+2+1"},
      {3, 8, {3, 3}, {1, 1}, {1, 1}, {1, 0}, {2, 1}, 6, 8, "2-2+4+1+1 | 7-2+2+1"},
      {1, 1, {5, 3}, {4, 4}, {0, 0}, {3, 0}, {1, 1}, 8, 3, "0+4+3+1 | 0+2+1"},
      {12, 12, {3, 3}, {2, 2}, {3, 3}, {0, 0}, {3, 1}, 23, 19, "22-6+6+1 | 22-6+2+1"},
      {9, 2, {1, 5}, {5, 2}, {2, 3}, {4, 1}, {1, 2}, 41, 6, "40-4+0+4+1 | 2-6+8+1+1"},
      {2, 2, {2, 2}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, 1, "1-2+1+1"},
      {16, 20, {5, 5}, {3, 2}, {4, 2}, {2, 1}, {2, 1}, 48, 40, "45-8+8+2+1 | 38-4+4+1+1"},
      {100, 1, {2, 1}, {1, 7}, {0, 0}, {0, 6}, {5, 1}, 105, 7, "99+5+1 | 0+6+1"},
  };
  for (const OutSizeCase& c : cases) {
    Problem p;
    p.batch = 1;
    p.in_channels = 2;
    p.out_channels = 2;
    p.in_h = c.in_h;
    p.in_w = c.in_w;
    p.kernel_size = c.k;
    p.stride = c.s;
    p.padding = c.p;
    p.output_padding = c.op;
    p.dilation = c.d;
    SCOPED_TRACE(p.describe() + "  working: " + c.working);
    EXPECT_NO_THROW(p.validate());
    EXPECT_EQ(p.out_h(), c.out_h);
    EXPECT_EQ(p.out_w(), c.out_w);
    EXPECT_EQ(p.out_elems(), 1 * 2 * c.out_h * c.out_w);
  }
}

// ---------------------------------------------------------------------------------------------
// valid_input_range against brute force: the set of ih in [0, in) with
// 0 <= ih*stride - padding + k*dilation < out must be exactly [lo, hi).

TEST(ProblemValidInputRange, MatchesBruteForceSweep) {
  int checked = 0, nonempty = 0, empty = 0;
  for (int64_t in = 1; in <= 7; ++in)
    for (int64_t out = 1; out <= 14; ++out)
      for (int64_t stride = 1; stride <= 3; ++stride)
        for (int64_t padding = 0; padding <= 4; ++padding)
          for (int64_t dilation = 1; dilation <= 3; ++dilation)
            for (int64_t k = 0; k <= 4; ++k) {
              std::vector<int64_t> hits;
              for (int64_t ih = 0; ih < in; ++ih) {
                const int64_t o = ih * stride - padding + k * dilation;
                if (0 <= o && o < out) hits.push_back(ih);
              }
              const InputRange r = ladder::valid_input_range(in, out, stride, padding, dilation, k);
              const std::string where = "in=" + std::to_string(in) + " out=" + std::to_string(out) +
                                        " stride=" + std::to_string(stride) + " padding=" +
                                        std::to_string(padding) + " dilation=" +
                                        std::to_string(dilation) + " k=" + std::to_string(k) +
                                        " got [" + std::to_string(r.lo) + ", " +
                                        std::to_string(r.hi) + ")";
              ++checked;
              if (hits.empty()) {
                ++empty;
                EXPECT_EQ(r.lo, r.hi) << where;
                EXPECT_EQ(r.count(), 0) << where;
              } else {
                ++nonempty;
                // hits are consecutive integers (an interval), so it must equal [lo, hi)
                EXPECT_EQ(r.lo, hits.front()) << where;
                EXPECT_EQ(r.hi, hits.back() + 1) << where;
                EXPECT_EQ(r.count(), int64_t(hits.size())) << where;
              }
            }
  EXPECT_EQ(checked, 7 * 14 * 3 * 5 * 3 * 5);
  EXPECT_GT(nonempty, 0);
  EXPECT_GT(empty, 0);  // the sweep reaches empty ranges too
}

TEST(ProblemValidInputRange, HandComputedCases) {
  // in 4, out 4 (k3, s1, p1): tap k covers ih in [1-k, 5-k) clipped to [0, 4)
  EXPECT_EQ(ladder::valid_input_range(4, 4, 1, 1, 1, 0).lo, 1);
  EXPECT_EQ(ladder::valid_input_range(4, 4, 1, 1, 1, 0).hi, 4);
  EXPECT_EQ(ladder::valid_input_range(4, 4, 1, 1, 1, 1).lo, 0);
  EXPECT_EQ(ladder::valid_input_range(4, 4, 1, 1, 1, 1).hi, 4);
  EXPECT_EQ(ladder::valid_input_range(4, 4, 1, 1, 1, 2).lo, 0);
  EXPECT_EQ(ladder::valid_input_range(4, 4, 1, 1, 1, 2).hi, 3);
  // KernelBench: no padding, every tap sees all 512 rows
  for (int64_t k = 0; k < 3; ++k) {
    const InputRange r = ladder::valid_input_range(512, 514, 1, 0, 1, k);
    EXPECT_EQ(r.lo, 0);
    EXPECT_EQ(r.hi, 512);
  }
  // stride 3, padding 5, dilation 2, tap 1: need 0 <= 3*ih - 3 < 7, i.e. ih in {1, 2, 3}
  EXPECT_EQ(ladder::valid_input_range(10, 7, 3, 5, 2, 1).lo, 1);
  EXPECT_EQ(ladder::valid_input_range(10, 7, 3, 5, 2, 1).hi, 4);
}

// ---------------------------------------------------------------------------------------------
// conv_macs against a brute-force count of (n, ci, co_in_group, ih, iw, kh, kw) combinations
// whose output position lands inside the output.

namespace {
double brute_force_macs(const Problem& p) {
  const int64_t oh_n = p.out_h(), ow_n = p.out_w();
  const int64_t cout_per_group = p.out_channels / p.groups;
  double count = 0;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t ci = 0; ci < p.in_channels; ++ci)
      for (int64_t cg = 0; cg < cout_per_group; ++cg)
        for (int64_t ih = 0; ih < p.in_h; ++ih)
          for (int64_t iw = 0; iw < p.in_w; ++iw)
            for (int64_t kh = 0; kh < p.kernel_size.h; ++kh)
              for (int64_t kw = 0; kw < p.kernel_size.w; ++kw) {
                const int64_t oh = ih * p.stride.h - p.padding.h + kh * p.dilation.h;
                const int64_t ow = iw * p.stride.w - p.padding.w + kw * p.dilation.w;
                if (oh >= 0 && oh < oh_n && ow >= 0 && ow < ow_n) count += 1;
              }
  return count;
}

Problem make(int64_t batch, int64_t cin, int64_t cout, int64_t h, int64_t w, Pair k, Pair s, Pair pad,
             Pair op, Pair d, int64_t groups) {
  Problem p;
  p.batch = batch;
  p.in_channels = cin;
  p.out_channels = cout;
  p.in_h = h;
  p.in_w = w;
  p.kernel_size = k;
  p.stride = s;
  p.padding = pad;
  p.output_padding = op;
  p.dilation = d;
  p.groups = groups;
  return p;
}
}  // namespace

TEST(ProblemConvMacs, HandComputedPaddedCase) {
  // in 4x4, k3, s1, p1 -> out 4x4. Valid rows per tap: 3, 4, 3 (sum 10); same for columns.
  // MACs = batch 1 * Cin 2 * Cout 2 * 10 * 10 = 400.
  const Problem p = make(1, 2, 2, 4, 4, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1);
  EXPECT_EQ(p.conv_macs(), 400.0);
  EXPECT_EQ(brute_force_macs(p), 400.0);
}

TEST(ProblemConvMacs, MatchesBruteForceOnSmallProblems) {
  const std::vector<Problem> problems = {
      make(1, 1, 1, 3, 3, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1),
      make(2, 3, 4, 5, 6, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 1),
      make(1, 4, 6, 5, 4, {3, 2}, {2, 1}, {1, 0}, {1, 0}, {1, 1}, 2),
      make(2, 6, 9, 4, 7, {2, 3}, {3, 2}, {2, 1}, {2, 1}, {1, 2}, 3),
      make(1, 4, 4, 6, 5, {3, 3}, {1, 1}, {2, 3}, {1, 0}, {2, 1}, 4),   // depthwise-like, heavy padding
      make(3, 2, 2, 7, 3, {5, 1}, {2, 3}, {3, 0}, {0, 2}, {1, 1}, 1),
      make(1, 8, 4, 3, 3, {4, 4}, {1, 1}, {2, 1}, {0, 0}, {1, 1}, 2),   // out 2x4: most taps clipped
      make(2, 2, 6, 1, 9, {3, 5}, {2, 2}, {0, 4}, {1, 1}, {3, 1}, 2),
  };
  for (const Problem& p : problems) {
    SCOPED_TRACE(p.describe());
    ASSERT_NO_THROW(p.validate());
    const double expect = brute_force_macs(p);
    EXPECT_GT(expect, 0.0);
    EXPECT_EQ(p.conv_macs(), expect);
  }
}

TEST(ProblemConvMacs, KernelBenchEveryTapSeesTheWholePlane) {
  // 16 * 64 * 128 * 512 * 512 * 9 = 2^35 * 9 = 309,237,645,312
  EXPECT_EQ(int64_t(Problem::kernelbench().conv_macs()), int64_t(309237645312));
}

// ---------------------------------------------------------------------------------------------
// cost_of on the KernelBench problem, exact values worked out by hand.

TEST(ProblemCost, KernelBenchConvFlops) {
  const ladder::ProblemCost c = ladder::cost_of(Problem::kernelbench());
  // flops = 2 * conv_macs() (header): 2 * 16*64*128*512*512*9 = 2 * 2^35 * 9 = 618,475,290,624
  EXPECT_EQ(int64_t(c.conv.flops), int64_t(618475290624.0));  // ~6.18e11
}

TEST(ProblemCost, KernelBenchPoolBytesAndFlops) {
  const ladder::ProblemCost c = ladder::cost_of(Problem::kernelbench());
  // read convT output 4*16*128*514*514 = 2,164,293,632 B; write pooled 4*16*128 = 8,192 B
  EXPECT_EQ(int64_t(c.pool.bytes), int64_t(2164293632.0 + 8192.0));  // 2,164,301,824
  EXPECT_EQ(int64_t(c.pool.flops), int64_t(541073408.0));            // one add per convT output element
}

TEST(ProblemCost, KernelBenchConvBytesIncludeMaterializedOutput) {
  // PhaseCost: "each input read once, each output written once"; the conv phase is
  // "x, weight, conv_bias -> convT output (written out)". Reads: x 4*16*64*512*512 =
  // 1,073,741,824; weight 4*64*128*9 = 294,912; conv_bias 4*128 = 512 (the extra bias is not a
  // conv input). Writes: convT output 4*16*128*514*514 = 2,164,293,632.
  const ladder::ProblemCost c = ladder::cost_of(Problem::kernelbench());
  EXPECT_EQ(int64_t(c.conv.bytes), int64_t(1073741824.0 + 294912.0 + 512.0 + 2164293632.0));  // 3,238,330,880
}

TEST(ProblemCost, KernelBenchFusedAndEpilogueBytes) {
  const ladder::ProblemCost c = ladder::cost_of(Problem::kernelbench());
  // fused: x 1,073,741,824 + weight 294,912 + conv_bias 512 + bias 512 + y 4*16 = 64
  EXPECT_EQ(int64_t(c.fused.bytes), int64_t(1073741824.0 + 294912.0 + 512.0 + 512.0 + 64.0));  // 1,074,037,824
  // epilogue: pooled 8,192 + bias 512 + y 64
  EXPECT_EQ(int64_t(c.epilogue.bytes), int64_t(8192.0 + 512.0 + 64.0));
}

TEST(ProblemCost, KernelBenchV1PoolBytes) {
  const ladder::ProblemCost c = ladder::cost_of(Problem::kernelbench_v1());
  // out 34x34: 4*128*16*34*34 = 4*2,367,488 = 9,469,952 B read; pooled 4*128*16 = 8,192 B written
  EXPECT_EQ(int64_t(c.pool.bytes), int64_t(9469952.0 + 8192.0));
}
