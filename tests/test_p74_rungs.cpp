// The problem-74 track's rungs against the fp64 oracles, elementwise at the derived tolerances:
// a shape matrix that reaches every path (the KernelBench geometry family of the fast rungs 04
// and 09 and its edges, groups, per-axis parameters, dilation, overlapping and padded pooling
// windows, ceil_mode, channel tails, slopes), random parameter sets, exact inputs (bitwise
// equality, including windows where every value ties), the KernelBench size, determinism; the
// runner on the CPU rung; and the checks shown to reject broken results; rung 10 (TF32 tensor
// cores) at the TF32 bound on odd shapes, exactly on exact inputs, and feeding the backward rungs
// its saved state; rung 11 (the gradients on TF32 tensor cores) likewise; rung 12 (rung 10 in
// 3xTF32) at the FP32 bound, also on inputs between TF32 values. GPU tests skip, visibly, without
// a device; the others run anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "p74_backward/runner.hpp"
#include "skip_without_gpu.hpp"
#include "tf32.hpp"  // common/toolkit/: tf32_three_quarters, round_to_tf32

namespace p74 = ladder::p74;
using p74::Problem74;
using p74::Triple;

namespace {

/// KernelBench's parameters (conv k3 s2 p1 op1, MaxPool3d(2), slope 0.2) at a small size.
Problem74 base(int64_t batch, int64_t cin, int64_t cout, Triple in) {
  Problem74 p;
  p.batch = batch, p.in_channels = cin, p.out_channels = cout, p.in_size = in;
  return p;
}

struct Case {
  std::string name;
  Problem74 p;
  bool kernelbench_family = false;  ///< rungs 04 and 09 must support it
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> shape_matrix() {
  std::vector<Case> m;
  m.push_back({"kernelbench_shape_small", base(2, 4, 8, {4, 6, 8}), true});
  Problem74 p = base(2, 3, 5, {3, 5, 6});
  p.conv.output_padding = Triple::cube(0);  // odd conv sizes: the pool drops the last plane
  m.push_back({"output_padding_0", p, true});
  p = base(1, 2, 5, {3, 3, 5});
  p.conv.output_padding = {1, 0, 1};
  m.push_back({"kernelbench_family_mixed_output_padding", p, true});
  p = base(1, 3, 17, {3, 4, 5});  // 17 channels: a partial channel tile
  p.negative_slope = 0.01;
  m.push_back({"channel_tail_17_slope_0_01", p, true});
  p = base(2, 5, 5, {2, 3, 4});
  p.negative_slope = 1.0;  // both LeakyReLUs are the identity
  m.push_back({"channel_tail_5_slope_1", p, true});
  p = base(2, 4, 6, {4, 5, 6});
  p.conv.groups = 2;
  m.push_back({"groups_2", p});
  p = base(2, 2, 3, {4, 5, 6});
  p.conv.kernel_size = {3, 2, 3}, p.conv.stride = {2, 1, 2}, p.conv.padding = {1, 0, 1};
  p.conv.output_padding = {1, 0, 0};
  p.pool.kernel_size = {2, 1, 2};
  m.push_back({"per_axis_parameters", p});
  p = base(1, 2, 4, {4, 5, 5});
  p.conv.dilation = Triple::cube(2), p.conv.padding = Triple::cube(2);
  m.push_back({"conv_dilation_2", p});
  p = base(2, 3, 4, {3, 4, 4});
  p.pool.kernel_size = Triple::cube(3), p.pool.stride = Triple::cube(1);  // overlapping windows: gradients add
  m.push_back({"pool_stride_1_overlapping", p});
  p = base(1, 2, 3, {4, 5, 6});
  p.pool.kernel_size = Triple::cube(3), p.pool.stride = Triple::cube(2), p.pool.padding = Triple::cube(1);
  p.pool.dilation = {2, 1, 2}, p.pool.ceil_mode = true;
  m.push_back({"pool_padding_dilation_ceil_mode", p});
  return m;
}

/// The shape-matrix case of this name (tests pick cases by name, so reordering the matrix cannot
/// change what they test); throws std::out_of_range for an unknown name.
Case case_named(const std::string& name) {
  for (const Case& c : shape_matrix())
    if (c.name == name) return c;
  throw std::out_of_range("no shape-matrix case " + name);
}

/// A valid random problem with at most 20000 conv elements.
Problem74 random_problem(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const double slopes[] = {0.2, 0.01, 1.0, 0.0, -0.3};
  for (;;) {
    Problem74 p;
    p.conv.groups = pick(1, 2);
    p.batch = pick(1, 2);
    p.in_channels = p.conv.groups * pick(1, 4);
    p.out_channels = p.conv.groups * pick(1, 6);
    p.in_size = {pick(1, 6), pick(1, 6), pick(1, 6)};
    p.conv.kernel_size = {pick(1, 4), pick(1, 4), pick(1, 4)};
    p.conv.stride = {pick(1, 3), pick(1, 3), pick(1, 3)};
    p.conv.dilation = {pick(1, 2), pick(1, 2), pick(1, 2)};
    p.conv.padding = {pick(0, 2), pick(0, 2), pick(0, 2)};
    p.conv.output_padding = {pick(0, 2), pick(0, 2), pick(0, 2)};
    p.negative_slope = slopes[pick(0, 4)];
    p.pool.kernel_size = {pick(1, 3), pick(1, 3), pick(1, 3)};
    if (pick(0, 1)) p.pool.stride = Triple{pick(1, 3), pick(1, 3), pick(1, 3)};
    p.pool.padding = {pick(0, 1), pick(0, 1), pick(0, 1)};
    p.pool.dilation = {pick(1, 2), pick(1, 2), pick(1, 2)};
    p.pool.ceil_mode = pick(0, 1);
    p.seed = rng();
    try {
      p.validate();
      if (p.conv_elems() <= 20000 && p.out_elems() >= 1) return p;
    } catch (const p74::InvalidProblem&) {
    }
  }
}

std::vector<const p74::Rung*> gpu_rungs(bool forward) {
  std::vector<const p74::Rung*> r;
  for (const p74::Rung* rung : p74::rungs())
    if (!rung->is_cpu() && (forward ? rung->forward != nullptr : rung->backward != nullptr)) r.push_back(rung);
  return r;
}

/// Whether `rung` runs p; prints the reason when it does not, and fails if it must run p.
bool supported(const p74::Rung& rung, const Problem74& p, bool must) {
  const std::string why = rung.why_unsupported(p);
  if (why.empty()) return true;
  std::cout << "[ skipped  ] rung " << rung.label() << ": " << why << "\n";
  if (must) ADD_FAILURE() << "rung " << rung.label() << " must support " << p.describe() << ": " << why;
  return false;
}

/// The rungs of the KernelBench geometry family only (they refuse other parameters).
const std::vector<std::string> kFastRungs = {"04", "09", "10", "11", "12"};

bool fast_rung(const p74::Rung& r) { return std::find(kFastRungs.begin(), kFastRungs.end(), r.id) != kFastRungs.end(); }

/// Every forward rung in `rungs` on p against the oracle, each at the bound of its precision
/// (rung 10: TF32; rung 12: FP32); returns how many ran.
int check_forward_rungs(const Problem74& p, const std::vector<const p74::Rung*>& rungs, const std::string& what,
                        bool family = false) {
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Forward ref = p74::forward(p, in);
  int ran = 0;
  for (const p74::Rung* rung : rungs) {
    if (!supported(*rung, p, family && fast_rung(*rung))) continue;
    const p74::ForwardTolerance tol = p74::forward_tolerance(p, ref, rung->precision);
    const p74::ForwardCheck c = p74::check_forward(p, ref, tol, p74::run_forward_once(*rung, p, in));
    EXPECT_TRUE(c.pass()) << "rung " << rung->label() << ", " << what << ": " << c.summary() << "\n" << p.describe();
    ++ran;
  }
  return ran;
}

/// Every backward rung in `rungs` on p, from the oracle's saved state, against the backward oracle,
/// each at the bound of its precision (rung 11: TF32).
int check_backward_rungs(const Problem74& p, const std::vector<const p74::Rung*>& rungs, const std::string& what,
                         bool family = false) {
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Saved saved = p74::saved_from(p74::forward(p, in));
  const std::vector<float> grad_out = p74::make_grad_out(p);
  const p74::Grads ref = p74::backward(p, in, saved, grad_out);
  int ran = 0;
  for (const p74::Rung* rung : rungs) {
    if (!supported(*rung, p, family && fast_rung(*rung))) continue;
    const p74::GradTolerance tol = p74::grad_tolerance(p, ref, rung->precision);
    const p74::GradCheck c = p74::check_grads(ref, tol, p74::run_backward_once(*rung, p, in, saved, grad_out));
    EXPECT_TRUE(c.pass()) << "rung " << rung->label() << ", " << what << ": " << c.summary() << "\n" << p.describe();
    ++ran;
  }
  return ran;
}

/// Elements where `got` differs from `want` (fp32 against the exact fp64 value, or offsets).
template <typename G, typename W>
int64_t unequal(const std::vector<G>& got, const std::vector<W>& want, int64_t* first) {
  int64_t n = 0;
  *first = -1;
  if (got.size() != want.size()) return int64_t(std::max(got.size(), want.size()));
  for (size_t i = 0; i < got.size(); ++i)
    if (!(double(got[i]) == double(want[i]))) {
      if (n++ == 0) *first = int64_t(i);
    }
  return n;
}

#define EXPECT_EXACT(got, want, what)                                                          \
  do {                                                                                         \
    int64_t first_ = -1;                                                                       \
    const int64_t n_ = unequal(got, want, &first_);                                            \
    EXPECT_EQ(n_, 0) << what << ": " << n_ << " elements differ, the first at " << first_;     \
  } while (0)

Problem74 exact(Problem74 p) {
  p.distribution = p74::Distribution::Exact;
  p.negative_slope = 0.25;
  return p;
}

/// Exact inputs: every forward and backward value of each rung in `rungs` equals the oracle's,
/// bit for bit. `zero_weight` makes every value of a channel tie, so every argmax must be offset
/// 0 and every gradient goes to the windows' first positions.
void check_exact(const Problem74& p, bool zero_weight, const std::string& what,
                 const std::vector<const p74::Rung*>& rungs) {
  p74::Inputs in = p74::make_inputs(p);
  if (zero_weight) std::fill(in.weight.begin(), in.weight.end(), 0.0f);
  const p74::Forward ref = p74::forward(p, in);
  const p74::Saved saved = p74::saved_from(ref);
  if (zero_weight) {
    for (int32_t a : ref.argmax) ASSERT_EQ(a, 0) << what << ": the oracle breaks a tie away from offset 0";
  }
  const std::vector<float> grad_out = p74::make_grad_out(p);
  const p74::Grads g = p74::backward(p, in, saved, grad_out);
  for (const p74::Rung* rung : rungs) {
    if (!rung->why_unsupported(p).empty()) continue;
    const std::string label = what + ", rung " + rung->label();
    if (rung->has_forward()) {
      const p74::ForwardResult f = p74::run_forward_once(*rung, p, in);
      EXPECT_EXACT(f.out, ref.out, label + " out");
      EXPECT_EXACT(f.argmax, ref.argmax, label + " argmax");
      EXPECT_EXACT(f.y, ref.y_at_argmax, label + " y_saved");
    }
    if (rung->has_backward()) {
      const p74::GradResult b = p74::run_backward_once(*rung, p, in, saved, grad_out);
      EXPECT_EXACT(b.grad_x, g.grad_x, label + " grad_x");
      EXPECT_EXACT(b.grad_weight, g.grad_weight, label + " grad_weight");
      EXPECT_EXACT(b.grad_bias, g.grad_bias, label + " grad_bias");
      EXPECT_EXACT(b.grad_multiplier, g.grad_multiplier, label + " grad_multiplier");
    }
  }
}

/// check_exact on every case of `cases` (default: the shape matrix) whose exact inputs stay
/// exact; returns how many.
int check_exact_matrix(const std::vector<const p74::Rung*>& rungs, const std::vector<Case>& cases = shape_matrix()) {
  int ran = 0;
  for (const Case& c : cases) {
    const Problem74 p = exact(c.p);
    try {
      p74::exact_check(p);
    } catch (const p74::InvalidProblem& e) {
      std::cout << "[ skipped  ] " << c.name << " (exact): " << e.what() << "\n";
      continue;
    }
    check_exact(p, false, c.name + " (exact)", rungs);
    ++ran;
  }
  return ran;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

// --- the checks, on the CPU rung's results: they pass, and every kind of damage fails ---------------

class P74Checker : public ::testing::Test {
 protected:
  void SetUp() override {
    p = case_named("kernelbench_shape_small").p;
    in = p74::make_inputs(p);
    ref = p74::forward(p, in);
    tol = p74::forward_tolerance(p, ref);
    good = p74::run_forward_once(p74::find_rung("00"), p, in);
    saved = p74::saved_from(ref);
    grad_out = p74::make_grad_out(p);
    grads = p74::backward(p, in, saved, grad_out);
    gtol = p74::grad_tolerance(p, grads);
    good_grads = p74::run_backward_once(p74::find_rung("00"), p, in, saved, grad_out);
  }
  bool forward_passes(const p74::ForwardResult& r) const { return p74::check_forward(p, ref, tol, r).pass(); }
  bool grads_pass(const p74::GradResult& r) const { return p74::check_grads(grads, gtol, r).pass(); }
  Problem74 p;
  p74::Inputs in;
  p74::Forward ref;
  p74::ForwardTolerance tol;
  p74::ForwardResult good;
  p74::Saved saved;
  std::vector<float> grad_out;
  p74::Grads grads;
  p74::GradTolerance gtol;
  p74::GradResult good_grads;
};

TEST_F(P74Checker, CpuRungPasses) {
  EXPECT_TRUE(forward_passes(good)) << p74::check_forward(p, ref, tol, good).summary();
  EXPECT_TRUE(grads_pass(good_grads)) << p74::check_grads(grads, gtol, good_grads).summary();
}

TEST_F(P74Checker, OutOffByTwiceTheToleranceFails) {
  size_t i = 0;
  for (size_t k = 0; k < tol.out.size(); ++k)
    if (tol.out[k] > tol.out[i]) i = k;
  ASSERT_GT(tol.out[i], 0.0);
  p74::ForwardResult bad = good;
  bad.out[i] = float(ref.out[i] + 2 * tol.out[i]);
  EXPECT_FALSE(forward_passes(bad));
}

TEST_F(P74Checker, MovedArgmaxFails) {
  // A window whose other position is clearly below the maximum; the rung "picks" it, and saves
  // the oracle's y there (so only the argmax can be wrong).
  const int64_t n = p.out_elems();
  for (int64_t q = 0; q < n; ++q)
    for (int32_t off = 0; off < int32_t(p.pool_window()); ++off) {
      const int64_t pos = p74::argmax_position(p, q, off);
      if (pos < 0 || ref.z[size_t(pos)] > ref.out[size_t(q)] - 1e-3) continue;
      p74::ForwardResult bad = good;
      bad.argmax[size_t(q)] = off;
      bad.y[size_t(q)] = float(ref.y[size_t(pos)]);
      const p74::ForwardCheck c = p74::check_forward(p, ref, tol, bad);
      EXPECT_FALSE(c.pass());
      EXPECT_GT(c.argmax_failures, 0);
      return;
    }
  FAIL() << "no window with a clearly smaller value";
}

TEST_F(P74Checker, UnwrittenForwardOutputsFail) {
  p74::ForwardResult bad = good;
  bad.out[3] = std::nanf("");
  EXPECT_FALSE(forward_passes(bad));
  bad = good;
  bad.argmax[5] = -1;
  EXPECT_FALSE(forward_passes(bad));
  bad = good;
  bad.y[7] = std::nanf("");
  EXPECT_FALSE(forward_passes(bad));
}

TEST_F(P74Checker, GradientOffOnePercentFails) {
  auto largest = [](const std::vector<double>& v) {
    size_t i = 0;
    for (size_t k = 0; k < v.size(); ++k)
      if (std::fabs(v[k]) > std::fabs(v[i])) i = k;
    return i;
  };
  p74::GradResult bad = good_grads;
  bad.grad_weight[largest(grads.grad_weight)] *= 1.01f;
  EXPECT_FALSE(grads_pass(bad));
  bad = good_grads;
  bad.grad_x[largest(grads.grad_x)] *= 1.01f;
  EXPECT_FALSE(grads_pass(bad));
  bad = good_grads;
  bad.grad_multiplier[largest(grads.grad_multiplier)] *= 1.01f;
  EXPECT_FALSE(grads_pass(bad));
}

TEST_F(P74Checker, NanOrUnwrittenGradientFails) {
  p74::GradResult bad = good_grads;
  bad.grad_bias[1] = std::nanf("");
  EXPECT_FALSE(grads_pass(bad));
  bad = good_grads;
  bad.grad_x[bad.grad_x.size() - 1] = std::nanf("");  // the last element: a kernel's tail left unwritten
  EXPECT_FALSE(grads_pass(bad));
}

TEST(P74Runner, SamplesAndBackwardMacs) {
  const Problem74 kb = Problem74::kernelbench();
  EXPECT_EQ(p74::samples_to_check(kb, 2e9, 2), (std::vector<int64_t>{0, 15}));
  EXPECT_EQ(p74::samples_to_check(kb, 1e3, 2), std::vector<int64_t>{});
  EXPECT_EQ(p74::samples_to_check(case_named("kernelbench_shape_small").p, 2e9, 2), (std::vector<int64_t>{0, 1}));
  // kernel 1, stride 1: one tap per conv position; MaxPool3d(2) routes each window to one
  // distinct position, so 2 * out_elems * in_channels multiply-adds.
  Problem74 p = base(1, 3, 2, {4, 4, 4});
  p.conv.kernel_size = Triple::cube(1), p.conv.stride = Triple::cube(1), p.conv.padding = Triple::cube(0);
  p.conv.output_padding = Triple::cube(0);
  p74::Saved s{std::vector<int32_t>(size_t(p.out_elems()), 3), std::vector<float>(size_t(p.out_elems()), 1.0f)};
  EXPECT_EQ(p74::backward_macs(p, s), 2.0 * double(p.out_elems()) * 3);
}

TEST(P74Runner, FastRungsNameTheParameterTheyNeed) {
  const Problem74 ok = case_named("kernelbench_shape_small").p;
  for (const std::string& id : kFastRungs) {
    const p74::Rung* r = &p74::find_rung(id);
    EXPECT_EQ(r->why_unsupported(ok), "") << id;
    Problem74 p = ok;
    p.conv.groups = 2;
    p.in_channels = 4;
    EXPECT_NE(r->why_unsupported(p).find("groups"), std::string::npos) << id << ": " << r->why_unsupported(p);
    p = ok;
    p.pool.ceil_mode = true;
    EXPECT_NE(r->why_unsupported(p).find("ceil_mode"), std::string::npos) << id << ": " << r->why_unsupported(p);
    p = ok;
    p.conv.dilation = Triple::cube(2);
    EXPECT_NE(r->why_unsupported(p).find("dilation"), std::string::npos) << id << ": " << r->why_unsupported(p);
  }
  EXPECT_TRUE(p74::find_rung("08").deterministic);
  EXPECT_EQ(p74::find_rung("10").precision, p74::Precision::Tf32);  // held to the TF32 bound
  EXPECT_EQ(p74::find_rung("11").precision, p74::Precision::Tf32);  // its gradients too
  EXPECT_EQ(p74::find_rung("12").precision, p74::Precision::Fp32);  // 3xTF32: held to the FP32 bound
  EXPECT_TRUE(p74::find_rung("12").deterministic);
  EXPECT_TRUE(p74::find_rung("11").deterministic);
  for (const p74::Rung* r : p74::rungs()) {
    if (r->id != "10" && r->id != "11") {
      EXPECT_EQ(r->precision, p74::Precision::Fp32) << r->label();
    }
  }
  EXPECT_TRUE(p74::find_rung("09").deterministic);
  EXPECT_THROW(p74::find_rung("99"), std::invalid_argument);
}

TEST(P74Runner, CpuRungThroughTheTrack) {
  Problem74 p = base(1, 2, 3, {2, 3, 4});
  p74::TrackOptions opt;
  opt.rung_ids = {"00"};
  opt.progress = false;
  opt.json_path = ::testing::TempDir() + "p74_runner_test.json";
  const p74::TrackReport r = p74::run_track(p, opt);
  ASSERT_EQ(r.rungs.size(), 2u);
  for (const p74::RungResult& g : r.rungs) {
    EXPECT_TRUE(g.ran) << g.pass << ": " << g.note;
    EXPECT_TRUE(g.checked) << g.pass;
    EXPECT_TRUE(g.check_passed()) << g.pass;
  }
  EXPECT_EQ(r.saved_from, "00");
  EXPECT_TRUE(r.all_passed());
  EXPECT_NE(p74::format_table(r).find("00 cpu_reference"), std::string::npos);
  EXPECT_NE(read_text(opt.json_path).find("\"p74_ladder/1\""), std::string::npos);
  std::remove(opt.json_path.c_str());
}

TEST(P74Runner, CpuRungMatchesTheOraclesOnTheShapeMatrix) {
  const std::vector<const p74::Rung*> cpu{&p74::find_rung("00")};
  for (const Case& c : shape_matrix()) {
    EXPECT_EQ(check_forward_rungs(c.p, cpu, c.name), 1);
    EXPECT_EQ(check_backward_rungs(c.p, cpu, c.name), 1);
  }
}

TEST(P74Runner, CpuRungOnRandomProblems) {  // the generator, the oracles and rung 00 together
  std::mt19937_64 rng(74);
  const std::vector<const p74::Rung*> cpu{&p74::find_rung("00")};
  for (int i = 0; i < 24; ++i) {
    const Problem74 p = random_problem(rng);
    EXPECT_EQ(check_forward_rungs(p, cpu, "random problem " + std::to_string(i)), 1);
    EXPECT_EQ(check_backward_rungs(p, cpu, "random problem " + std::to_string(i)), 1);
  }
}

TEST(P74Runner, CpuRungExact) {
  const std::vector<const p74::Rung*> cpu{&p74::find_rung("00")};
  EXPECT_GE(check_exact_matrix(cpu), 5);
  check_exact(exact(case_named("kernelbench_shape_small").p), true, "all ties, kernelbench shape", cpu);
  check_exact(exact(case_named("pool_stride_1_overlapping").p), true, "all ties, overlapping windows", cpu);
}

// --- every GPU rung against the oracles --------------------------------------------------------

class P74ShapeMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(P74ShapeMatrix, ForwardRungsMatchTheOracle) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  EXPECT_GT(check_forward_rungs(c.p, gpu_rungs(true), c.name, c.kernelbench_family), 0);
}

TEST_P(P74ShapeMatrix, BackwardRungsMatchTheOracle) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  EXPECT_GT(check_backward_rungs(c.p, gpu_rungs(false), c.name, c.kernelbench_family), 0);
}

INSTANTIATE_TEST_SUITE_P(P74, P74ShapeMatrix, ::testing::ValuesIn(shape_matrix()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(P74Rungs, RandomProblems) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(74);
  for (int i = 0; i < 24; ++i) {
    const Problem74 p = random_problem(rng);
    const std::string what = "random problem " + std::to_string(i);
    check_forward_rungs(p, gpu_rungs(true), what);
    check_backward_rungs(p, gpu_rungs(false), what);
  }
}

TEST(P74Rungs, ExactInputs) {
  SKIP_WITHOUT_GPU();
  EXPECT_GE(check_exact_matrix(p74::rungs()), 5);
}

TEST(P74Rungs, AllTiesRouteToOffsetZero) {
  SKIP_WITHOUT_GPU();
  check_exact(exact(case_named("kernelbench_shape_small").p), true, "all ties, kernelbench shape", p74::rungs());
  check_exact(exact(case_named("pool_stride_1_overlapping").p), true, "all ties, overlapping windows", p74::rungs());
}

TEST(P74Rungs, KernelBenchSizeForward) {
  SKIP_WITHOUT_GPU();
  const Problem74 p = Problem74::kernelbench();
  const p74::Inputs in = p74::make_inputs(p);
  const std::vector<int64_t> samples{0, p.batch - 1};
  const p74::ForwardResult a = p74::run_forward_once(p74::find_rung("03"), p, in);
  const p74::ForwardResult b = p74::run_forward_once(p74::find_rung("04"), p, in);
  for (const auto* r : {&a, &b}) {
    const p74::ForwardCheck c = p74::check_forward_samples(p, in, *r, samples);
    EXPECT_TRUE(c.pass()) << (r == &a ? "03" : "04") << ": " << c.summary();
  }
  // Over the whole batch, 03 and 04 agree: both lie within the tolerance of the truth, so within
  // twice the tolerance of each other; sample 0's largest tolerance stands for every sample's
  // (the inputs are identically distributed). Where their argmax differs, the two maxima agree
  // as closely (a near-tie).
  Problem74 one = p;
  one.batch = 1;
  const int64_t per_x = p.x_elems() / p.batch;
  const p74::Inputs part{std::vector<float>(in.x.begin(), in.x.begin() + per_x), in.weight, in.bias, in.multiplier};
  const p74::Forward ref0 = p74::forward(one, part);
  const p74::ForwardTolerance tol0 = p74::forward_tolerance(one, ref0);
  const double bound = 2 * *std::max_element(tol0.out.begin(), tol0.out.end());
  int64_t nan = 0, far = 0, differ = 0;
  for (size_t i = 0; i < a.out.size(); ++i) {
    nan += std::isnan(a.out[i]) + std::isnan(b.out[i]) + std::isnan(a.y[i]) + std::isnan(b.y[i]);
    far += std::fabs(double(a.out[i]) - double(b.out[i])) > bound;
    differ += a.argmax[i] != b.argmax[i];
  }
  EXPECT_EQ(nan, 0);
  EXPECT_EQ(far, 0) << "elements where 03 and 04 differ by more than " << bound;
  EXPECT_LE(differ, p.out_elems() / 1000) << "argmax differences (near-ties) between 03 and 04";
}

TEST(P74Rungs, KernelBenchSizeBackward) {
  SKIP_WITHOUT_GPU();
  const Problem74 p = Problem74::kernelbench();
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Saved saved = p74::run_forward_once(p74::find_rung("04"), p, in).saved();
  const std::vector<float> grad_out = p74::make_grad_out(p);
  const p74::Grads ref = p74::backward(p, in, saved, grad_out);  // about 1e9 multiply-adds: seconds
  for (const p74::Rung* rung : gpu_rungs(false)) {
    const p74::GradTolerance tol = p74::grad_tolerance(p, ref, rung->precision);
    const p74::GradCheck c = p74::check_grads(ref, tol, p74::run_backward_once(*rung, p, in, saved, grad_out));
    EXPECT_TRUE(c.pass()) << "rung " << rung->label() << ": " << c.summary();  // NaN fails too
  }
}

TEST(P74Rungs, DeterministicRungsAreBitwiseRepeatable) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : {case_named("kernelbench_shape_small"), case_named("pool_stride_1_overlapping")}) {
    const p74::Inputs in = p74::make_inputs(c.p);
    const p74::Saved saved = p74::saved_from(p74::forward(c.p, in));
    const std::vector<float> grad_out = p74::make_grad_out(c.p);
    for (const p74::Rung* rung : p74::rungs()) {
      if (rung->is_cpu() || !rung->deterministic || !rung->why_unsupported(c.p).empty()) continue;
      if (rung->forward) {
        EXPECT_TRUE(p74::bitwise_equal(p74::run_forward_once(*rung, c.p, in), p74::run_forward_once(*rung, c.p, in)))
            << rung->label() << ", " << c.name;
      }
      if (rung->backward) {
        EXPECT_TRUE(p74::bitwise_equal(p74::run_backward_once(*rung, c.p, in, saved, grad_out),
                                       p74::run_backward_once(*rung, c.p, in, saved, grad_out)))
            << rung->label() << ", " << c.name;
      }
    }
  }
}

TEST(P74Rungs, SlopeAtExactlyZeroIsNegativeSlope) {
  // Saved y exactly 0 at every argmax: PyTorch's leaky_relu_backward (slope unless > 0) makes
  // g_y = slope^2 * g * multiplier and grad_multiplier 0; a rung testing y >= 0 is off 25-fold.
  SKIP_WITHOUT_GPU();
  const Problem74 p = case_named("kernelbench_shape_small").p;
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Saved saved{std::vector<int32_t>(size_t(p.out_elems()), 0), std::vector<float>(size_t(p.out_elems()), 0.0f)};
  const std::vector<float> grad_out = p74::make_grad_out(p);
  const p74::Grads ref = p74::backward(p, in, saved, grad_out);
  for (const p74::Rung* rung : p74::rungs()) {
    if (!rung->backward) continue;
    const p74::GradResult got = p74::run_backward_once(*rung, p, in, saved, grad_out);
    const p74::GradCheck c = p74::check_grads(ref, p74::grad_tolerance(p, ref, rung->precision), got);
    EXPECT_TRUE(c.pass()) << "rung " << rung->label() << ": " << c.summary();
    for (float gm : got.grad_multiplier) EXPECT_EQ(gm, 0.0f) << "rung " << rung->label();
  }
}

TEST(P74Rungs, UnsupportedProblemIsAClearError) {
  SKIP_WITHOUT_GPU();
  const Problem74 p = case_named("groups_2").p;
  const p74::Inputs in = p74::make_inputs(p);
  try {
    p74::run_forward_once(p74::find_rung("04"), p, in);
    FAIL() << "rung 04 ran groups 2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("groups"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p74::run_forward_once(p74::find_rung("08"), p, in), std::invalid_argument);  // no forward pass
}

// --- rung 10: the forward on TF32 tensor cores -------------------------------------------------

namespace {

/// Shapes that reach rung 10's tails: input channels not a multiple of 8 (a partial k chunk) and
/// above 8 (two chunks), out_channels past one 32-channel tile, pooled sizes that leave a tile's
/// d, h and w rows partly empty, output_padding 0 and mixed, a single window.
std::vector<Case> tensor_core_shapes() {
  std::vector<Case> m;
  m.push_back({"ci3_co5_odd", base(2, 3, 5, {3, 5, 7}), true});
  m.push_back({"ci9_co33_two_chunks_two_tiles", base(1, 9, 33, {3, 5, 17}), true});
  m.push_back({"ci16_co32_w_tail", base(1, 16, 32, {5, 6, 18}), true});
  Problem74 p = base(2, 11, 7, {4, 7, 9});
  p.conv.output_padding = {0, 1, 0};
  m.push_back({"output_padding_mixed", p, true});
  p = base(1, 2, 3, {1, 1, 1});  // conv 2x2x2, one window
  m.push_back({"one_window", p, true});
  p = base(1, 8, 40, {2, 2, 2});
  p.conv.output_padding = Triple::cube(0);  // conv 3x3x3, pooled 1x1x1: the last plane dropped
  m.push_back({"output_padding_0_one_window", p, true});
  return m;
}

const p74::Rung& rung10() { return p74::find_rung("tensor_cores"); }

}  // namespace

TEST(P74TensorCores, OddShapesAtTheTf32Bound) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : tensor_core_shapes()) EXPECT_EQ(check_forward_rungs(c.p, {&rung10()}, c.name, true), 1);
  for (const char* name : {"kernelbench_shape_small", "output_padding_0", "kernelbench_family_mixed_output_padding",
                           "channel_tail_17_slope_0_01", "channel_tail_5_slope_1"})
    EXPECT_EQ(check_forward_rungs(case_named(name).p, {&rung10()}, name, true), 1);
}

namespace {

/// A forward tensor-core rung on exact inputs, where it must give the oracle's bits: the shapes of
/// tensor_core_shapes, small enough for exact_check (the backward's sums bound the size), yet with
/// two k chunks, two channel tiles, a w tail and mixed output_padding; then all ties.
void expect_exact_forward(const p74::Rung& rung) {
  std::vector<Case> cases = tensor_core_shapes();
  cases.push_back(case_named("kernelbench_shape_small"));
  cases.push_back({"exact_ci9_co33", base(1, 9, 33, {2, 2, 3}), true});
  cases.push_back({"exact_ci12_co36_w_tail", base(1, 12, 36, {2, 3, 17}), true});
  Problem74 mixed = base(2, 17, 9, {3, 5, 2});
  mixed.conv.output_padding = {0, 1, 0};
  cases.push_back({"exact_ci17_three_chunks", mixed, true});
  const int ran = check_exact_matrix({&rung}, cases);
  EXPECT_GE(ran, 7);  // exact_check passes 7 of the 10 (checked with p74_ladder --rungs 00 --distribution exact)
  check_exact(exact(case_named("kernelbench_shape_small").p), true, "all ties", {&rung});
}

/// A forward rung of the KernelBench geometry family refuses, with std::invalid_argument, problems
/// outside it.
void expect_forward_refuses_other_families(const p74::Rung& rung) {
  for (const char* name : {"groups_2", "per_axis_parameters", "conv_dilation_2", "pool_stride_1_overlapping"}) {
    const Problem74 p = case_named(name).p;
    EXPECT_THROW(p74::run_forward_once(rung, p, p74::make_inputs(p)), std::invalid_argument) << name;
  }
}

}  // namespace

TEST(P74TensorCores, ExactWhereTheSumsAreExact) {
  // Exact inputs are small dyadic numbers: TF32 holds them, and every sum is exact in fp32, so
  // rounding to TF32 changes nothing and the tensor cores must give the oracle's bits.
  SKIP_WITHOUT_GPU();
  expect_exact_forward(rung10());
}

TEST(P74TensorCores, OtherParametersAreRefused) {
  SKIP_WITHOUT_GPU();
  expect_forward_refuses_other_families(rung10());
}

TEST(P74TensorCores, BackwardRungsFromItsSavedState) {
  SKIP_WITHOUT_GPU();
  std::vector<Case> cases{case_named("kernelbench_shape_small"), case_named("channel_tail_17_slope_0_01")};
  for (const Case& c : tensor_core_shapes()) cases.push_back(c);
  for (const Case& c : cases) {
    const p74::Inputs in = p74::make_inputs(c.p);
    const p74::Saved saved = p74::run_forward_once(rung10(), c.p, in).saved();
    const std::vector<float> grad_out = p74::make_grad_out(c.p);
    const p74::Grads ref = p74::backward(c.p, in, saved, grad_out);
    for (const p74::Rung* rung : gpu_rungs(false)) {
      if (!supported(*rung, c.p, fast_rung(*rung))) continue;
      const p74::GradTolerance tol = p74::grad_tolerance(c.p, ref, rung->precision);
      const p74::GradCheck g = p74::check_grads(ref, tol, p74::run_backward_once(*rung, c.p, in, saved, grad_out));
      EXPECT_TRUE(g.pass()) << "rung " << rung->label() << " from rung 10's state, " << c.name << ": " << g.summary();
    }
  }
}

namespace {

/// The KernelBench problem through one forward rung at its precision's bound (samples 0 and the
/// last, every output written), then the backward rungs `backward_ids` from its saved state, each
/// at its own precision's bound.
void forward_then_backward_at_kernelbench_size(const p74::Rung& forward, const std::vector<std::string>& backward_ids) {
  const Problem74 p = Problem74::kernelbench();
  const p74::Inputs in = p74::make_inputs(p);
  const p74::ForwardResult got = p74::run_forward_once(forward, p, in);
  const std::vector<int64_t> samples{0, p.batch - 1};
  const p74::ForwardCheck c = p74::check_forward_samples(p, in, got, samples, nullptr, forward.precision);
  EXPECT_TRUE(c.pass()) << "rung " << forward.label() << ": " << c.summary();
  int64_t nan = 0;
  for (size_t i = 0; i < got.out.size(); ++i) nan += std::isnan(got.out[i]) + std::isnan(got.y[i]) + (got.argmax[i] < 0);
  EXPECT_EQ(nan, 0) << "unwritten outputs of rung " << forward.label();
  const std::vector<float> grad_out = p74::make_grad_out(p);
  const p74::Saved saved = got.saved();
  const p74::Grads ref = p74::backward(p, in, saved, grad_out);
  for (const std::string& id : backward_ids) {
    const p74::Rung& rung = p74::find_rung(id);
    const p74::GradCheck g = p74::check_grads(ref, p74::grad_tolerance(p, ref, rung.precision),
                                              p74::run_backward_once(rung, p, in, saved, grad_out));
    EXPECT_TRUE(g.pass()) << "rung " << id << " from rung " << forward.label() << "'s state: " << g.summary();
  }
}

}  // namespace

TEST(P74TensorCores, KernelBenchSize) {
  SKIP_WITHOUT_GPU();
  forward_then_backward_at_kernelbench_size(rung10(), {"08", "09", "11"});  // the runner's default backward rungs
}

// --- rung 11: the two convolution gradients on TF32 tensor cores -----------------------------------

namespace {

/// Shapes that reach rung 11's tails: in_channels not a multiple of 16 (a partial n tile of
/// grad_x, a partial m tile of grad_weight) and above 16 (two tiles), out_channels not a multiple
/// of 8 (a partial k chunk of grad_x) and above 32 (two n tiles of grad_weight), input boxes that
/// leave d, h and w rows partly empty, output_padding 0 and mixed, a single window, and a batch
/// whose positions straddle the 8-position k steps of grad_weight.
std::vector<Case> tensor_core_grad_shapes() {
  std::vector<Case> m = tensor_core_shapes();
  m.push_back({"ci17_co9_two_ci_tiles", base(2, 17, 9, {3, 5, 7}), true});
  m.push_back({"ci33_co40_w_tail", base(1, 33, 40, {5, 3, 18}), true});
  Problem74 p = base(3, 5, 13, {1, 3, 3});  // 9 positions a sample
  p.conv.output_padding = {1, 0, 1};
  m.push_back({"batch3_positions_straddle_steps", p, true});
  return m;
}

const p74::Rung& rung11() { return p74::find_rung("tensor_core_grads"); }

}  // namespace

TEST(P74TensorCoreGrads, OddShapesAtTheTf32Bound) {
  SKIP_WITHOUT_GPU();
  for (const Case& c : tensor_core_grad_shapes()) EXPECT_EQ(check_backward_rungs(c.p, {&rung11()}, c.name, true), 1);
  for (const char* name : {"kernelbench_shape_small", "output_padding_0", "kernelbench_family_mixed_output_padding",
                           "channel_tail_17_slope_0_01", "channel_tail_5_slope_1"})
    EXPECT_EQ(check_backward_rungs(case_named(name).p, {&rung11()}, name, true), 1);
}

TEST(P74TensorCoreGrads, ExactWhereTheSumsAreExact) {
  // Exact inputs: x, the weights and every g_y (at most 5 significant bits) are TF32 values and
  // every sum is exact in fp32, so the tensor cores must give the oracle's bits.
  SKIP_WITHOUT_GPU();
  std::vector<Case> cases = tensor_core_grad_shapes();
  cases.push_back(case_named("kernelbench_shape_small"));
  cases.push_back({"exact_ci17_co9", base(1, 17, 9, {2, 3, 17}), true});
  Problem74 mixed = base(2, 9, 33, {3, 5, 2});
  mixed.conv.output_padding = {0, 1, 0};
  cases.push_back({"exact_ci9_co33_mixed", mixed, true});
  EXPECT_GE(check_exact_matrix({&rung11()}, cases), 5);
  check_exact(exact(case_named("kernelbench_shape_small").p), true, "all ties", {&rung11()});
}

TEST(P74TensorCoreGrads, OtherParametersAreRefused) {
  SKIP_WITHOUT_GPU();
  for (const char* name : {"groups_2", "per_axis_parameters", "conv_dilation_2", "pool_stride_1_overlapping"}) {
    const Problem74 p = case_named(name).p;
    const p74::Inputs in = p74::make_inputs(p);
    const p74::Saved saved = p74::saved_from(p74::forward(p, in));
    EXPECT_THROW(p74::run_backward_once(rung11(), p, in, saved, p74::make_grad_out(p)), std::invalid_argument) << name;
  }
}

TEST(P74TensorCoreGrads, FromRung10sStateAndAgreesWithRung09) {
  // From rung 10's saved state (the KernelBench pair 10 + 11) at the TF32 bound; grad_bias and
  // grad_multiplier come from the same fp32 two-level reduction as rung 09's: the same bits.
  SKIP_WITHOUT_GPU();
  for (const Case& c : {case_named("kernelbench_shape_small"), case_named("channel_tail_17_slope_0_01")}) {
    const p74::Inputs in = p74::make_inputs(c.p);
    const p74::Saved saved = p74::run_forward_once(rung10(), c.p, in).saved();
    const std::vector<float> grad_out = p74::make_grad_out(c.p);
    const p74::Grads ref = p74::backward(c.p, in, saved, grad_out);
    const p74::GradResult got = p74::run_backward_once(rung11(), c.p, in, saved, grad_out);
    const p74::GradCheck g = p74::check_grads(ref, p74::grad_tolerance(c.p, ref, p74::Precision::Tf32), got);
    EXPECT_TRUE(g.pass()) << c.name << ": " << g.summary();
    const p74::GradResult fp32 = p74::run_backward_once(p74::find_rung("09"), c.p, in, saved, grad_out);
    EXPECT_EQ(got.grad_bias, fp32.grad_bias) << c.name << ": the same two-level reduction";
    EXPECT_EQ(got.grad_multiplier, fp32.grad_multiplier) << c.name;
  }
}

// --- rung 12: rung 10's forward in 3xTF32, at the FP32 bound ------------------------------------

namespace {

const p74::Rung& rung12() { return p74::find_rung("three_tf32"); }

/// p's inputs moved between TF32 values (as test_p74_problem.cpp's P74Tf32Bound does): x in
/// [1, 1.25), weights in [1, 1.25)/32, each 3/4 of the way from one TF32 value to the next, bias
/// 0, so every product has the same sign and plain TF32 errs by a quarter TF32 step per operand.
p74::Inputs between_tf32_values(const Problem74& p) {
  p74::Inputs in = p74::make_inputs(p);
  for (float& v : in.x) v = ladder::tf32_three_quarters(1.0f + 0.25f * v);
  for (float& v : in.weight) v = ladder::tf32_three_quarters(std::ldexp(1.0f + 0.25f * std::fabs(v), -5));
  std::fill(in.bias.begin(), in.bias.end(), 0.0f);
  return in;
}

}  // namespace

TEST(P74ThreeTf32, OddShapesAtTheFp32Bound) {
  SKIP_WITHOUT_GPU();
  ASSERT_EQ(rung12().precision, p74::Precision::Fp32);  // check_forward_rungs holds it to this bound
  for (const Case& c : tensor_core_shapes()) EXPECT_EQ(check_forward_rungs(c.p, {&rung12()}, c.name, true), 1);
  for (const char* name : {"kernelbench_shape_small", "output_padding_0", "kernelbench_family_mixed_output_padding",
                           "channel_tail_17_slope_0_01", "channel_tail_5_slope_1"})
    EXPECT_EQ(check_forward_rungs(case_named(name).p, {&rung12()}, name, true), 1);
  // Three 16-channel tiles, the last partial, and two k chunks.
  EXPECT_EQ(check_forward_rungs(base(1, 9, 40, {3, 4, 17}), {&rung12()}, "ci9_co40_three_channel_tiles", true), 1);
}

TEST(P74ThreeTf32, BetweenTf32ValuesAtTheFp32Bound) {
  // The inputs on which plain TF32 (rung 10) is outside the FP32 bound (P74ThreeTf32Bound in
  // test_p74_problem.cpp shows it on the CPU): rung 12's split must keep what TF32 drops.
  SKIP_WITHOUT_GPU();
  for (const Case& c : {Case{"ci4_co6", base(2, 4, 6, {3, 4, 5}), true}, Case{"ci9_co33", base(1, 9, 33, {3, 5, 17}), true},
                        case_named("kernelbench_shape_small")}) {
    const p74::Inputs in = between_tf32_values(c.p);
    const p74::Forward ref = p74::forward(c.p, in);
    const p74::ForwardCheck got = p74::check_forward(c.p, ref, p74::forward_tolerance(c.p, ref, p74::Precision::Fp32),
                                                     p74::run_forward_once(rung12(), c.p, in));
    EXPECT_TRUE(got.pass()) << c.name << ": " << got.summary();
  }
}

TEST(P74ThreeTf32, ExactWhereTheSumsAreExact) {
  // Exact inputs are TF32 values: their small parts are 0, the extra products add zeros, and every
  // sum is exact in fp32, so rung 12 must give the oracle's bits, as rung 10 does.
  SKIP_WITHOUT_GPU();
  expect_exact_forward(rung12());
}

TEST(P74ThreeTf32, OtherParametersAreRefused) {
  SKIP_WITHOUT_GPU();
  expect_forward_refuses_other_families(rung12());
}

TEST(P74ThreeTf32, KernelBenchSize) {
  SKIP_WITHOUT_GPU();
  forward_then_backward_at_kernelbench_size(rung12(), {"11"});  // the KernelBench pair 12 + 11
}
