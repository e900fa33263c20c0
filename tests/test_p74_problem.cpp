// Tests for the problem-74 track's host side (tracks/p74_backward): sizes against values worked
// out by hand from PyTorch's formulas, validate() naming each rejected parameter, the fp64
// forward and backward oracles on cases checkable by hand (ties, padding, overlapping windows),
// the backward oracle against finite differences of the forward oracle, exactness of the exact
// distribution, and the checks: the CPU rung 00 passes them, and known-bad results fail them;
// the TF32 bound: an emulated TF32 forward passes it, truncation, a shifted tap or a dropped
// channel fail it, and a near-tie within it is accepted; the FP32 bound against 3xTF32: an
// emulated TF32 forward fails it, an emulated 3xTF32 forward passes it; the TF32 gradient bound
// likewise: an emulated TF32 backward passes it, the fp32 bound and truncation do not.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "expect_invalid.hpp"
#include "tf32.hpp"  // common/toolkit/: round_to_tf32, the host's cvt.rna
#include "p74_backward/oracle.hpp"
#include "p74_backward/problem.hpp"
#include "p74_backward/rung.hpp"
#include "p74_backward/tolerance.hpp"

namespace p74 = ladder::p74;
using p74::Problem74;
using p74::Triple;

namespace ladder::p74 {
const Rung& rung_00();  // rungs/00_cpu_reference/cpu_reference.cpp, compiled into this test
}

namespace {

/// Small and valid: conv output (4, 6, 6), pooled (2, 3, 3).
Problem74 small_problem() {
  Problem74 p;
  p.batch = 2;
  p.in_channels = 3;
  p.out_channels = 4;
  p.in_size = {2, 3, 3};
  return p;
}

/// Exercises every parameter: groups, dilation, per-axis strides, overlapping padded pool
/// windows with dilation and ceil_mode.
Problem74 varied_problem() {
  Problem74 p = small_problem();
  p.in_channels = 4;
  p.out_channels = 6;
  p.in_size = {2, 3, 4};
  p.conv.kernel_size = {2, 3, 3};
  p.conv.stride = {1, 2, 2};
  p.conv.padding = {0, 1, 0};
  p.conv.output_padding = {0, 1, 1};
  p.conv.dilation = {1, 1, 2};
  p.conv.groups = 2;
  p.pool.kernel_size = {2, 3, 2};
  p.pool.stride = Triple{1, 2, 1};
  p.pool.padding = {1, 1, 0};
  p.pool.dilation = {1, 1, 2};
  p.pool.ceil_mode = true;
  p.seed = 7;
  return p;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// The oracle's forward rounded to fp32, as a perfect fp32 rung would return it.
p74::ForwardResult rounded(const p74::Forward& f) {
  p74::ForwardResult r;
  r.out.assign(f.out.begin(), f.out.end());
  r.argmax = f.argmax;
  r.y.assign(f.y_at_argmax.begin(), f.y_at_argmax.end());
  return r;
}
p74::GradResult rounded(const p74::Grads& g) {
  return {{g.grad_x.begin(), g.grad_x.end()},
          {g.grad_weight.begin(), g.grad_weight.end()},
          {g.grad_bias.begin(), g.grad_bias.end()},
          {g.grad_multiplier.begin(), g.grad_multiplier.end()}};
}

/// 1x1x1-channel problem along w only: x (1 element) = 2, ConvTranspose3d kernel (1, 1, 3),
/// stride 1: y[w] = bias + 2*weight[w]; negative_slope 0.25; MaxPool3d kernel (1, 1, 2).
Problem74 tiny_problem() {
  Problem74 p;
  p.batch = p.in_channels = p.out_channels = 1;
  p.in_size = {1, 1, 1};
  p.conv.kernel_size = {1, 1, 3};
  p.conv.stride = Triple::cube(1);
  p.conv.padding = p.conv.output_padding = Triple::cube(0);
  p.negative_slope = 0.25;
  p.pool.kernel_size = {1, 1, 2};
  p.pool.stride = Triple{1, 1, 1};
  return p;
}
p74::Inputs tiny_inputs() { return {{2.0f}, {0.5f, -1.0f, 0.25f}, {0.25f}, {-0.5f}}; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sizes.

TEST(P74Shapes, KernelBench) {
  const Problem74 p = Problem74::kernelbench();
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.conv_size(), (Triple{32, 64, 64}));
  EXPECT_EQ(p.out_size(), (Triple{16, 32, 32}));
  EXPECT_EQ(p.x_elems(), 16LL * 16 * 16 * 32 * 32);
  EXPECT_EQ(p.weight_elems(), 16LL * 32 * 27);
  EXPECT_EQ(p.conv_elems(), 16LL * 32 * 32 * 64 * 64);
  EXPECT_EQ(p.out_elems(), 16LL * 32 * 16 * 32 * 32);
  EXPECT_EQ(p.pool_window(), 8);
  EXPECT_EQ(p.conv_taps(), 27);
  // Taps landing inside, per axis (o = 2i - 1 + k): d 15 + 16 + 16 = 47, h and w 31 + 32 + 32 = 95.
  EXPECT_DOUBLE_EQ(p.conv_macs(), 16.0 * 16 * 32 * 47 * 95 * 95);
  EXPECT_EQ(p.negative_slope, 0.2);
  EXPECT_FALSE(p.pool.stride.has_value());
  EXPECT_EQ(p.pool.effective_stride(), Triple::cube(2));
  EXPECT_EQ(p74::slope(p), double(0.2f));
}

TEST(P74Shapes, MaxPoolOutSizeFloorAndCeil) {
  // (in + 2*padding - dilation*(kernel_size - 1) - 1)/stride + 1, floor or ceil; with ceil_mode a
  // last window starting in the right padding is dropped.
  struct Case { int64_t in, k, s, pad, dil; bool ceil; int64_t out; };
  for (const Case& c : {Case{64, 2, 2, 0, 1, false, 32}, Case{5, 2, 2, 0, 1, false, 2}, Case{5, 2, 2, 0, 1, true, 3},
                        Case{5, 2, 2, 1, 1, true, 3},  // a 4th window would start at 5, in the right padding
                        Case{6, 3, 2, 1, 1, false, 3}, Case{6, 3, 2, 1, 1, true, 4}, Case{8, 3, 2, 0, 2, false, 2},
                        Case{8, 3, 2, 0, 2, true, 3}, Case{4, 2, 3, 0, 1, false, 1}, Case{4, 2, 3, 0, 1, true, 2},
                        Case{7, 3, 3, 1, 1, true, 3}, Case{3, 3, 1, 0, 2, false, -1}})
    EXPECT_EQ(p74::max_pool_out_size(c.in, c.k, c.s, c.pad, c.dil, c.ceil), c.out)
        << "in " << c.in << " kernel " << c.k << " stride " << c.s << " padding " << c.pad << " dilation " << c.dil
        << " ceil " << c.ceil;
  EXPECT_THROW(p74::max_pool_out_size(int64_t(1) << 62, 2, 1, int64_t(1) << 61, 1, false), p74::InvalidProblem);
}

TEST(P74Shapes, VariedProblem) {
  const Problem74 p = varied_problem();
  ASSERT_NO_THROW(p.validate());
  // conv: d (2-1)*1 + 1*1 + 0 + 1 = 3; h (3-1)*2 - 2 + 2 + 1 + 1 = 6; w (4-1)*2 + 2*2 + 1 + 1 = 12.
  EXPECT_EQ(p.conv_size(), (Triple{3, 6, 12}));
  // pool, ceil: d (3+2-1-1+0)/1+1 = 4, 4th start 3 < 3+1 kept; h (6+2-2-1+1)/2+1 = 4, start 6 < 7
  // kept; w (12-2-1)/1+1 = 10.
  EXPECT_EQ(p.out_size(), (Triple{4, 4, 10}));
}

// ---------------------------------------------------------------------------------------------
// Validation: each message names the parameter.

TEST(P74Validate, SizesAndChannels) {
  Problem74 p = small_problem();
  p.batch = 0;
  expect_invalid(p, {"batch", "0"});
  p = small_problem();
  p.in_channels = 0;
  expect_invalid(p, {"in_channels", "0"});
  p = small_problem();
  p.out_channels = -1;
  expect_invalid(p, {"out_channels", "-1"});
  p = small_problem();
  p.in_size = {2, 0, 3};
  expect_invalid(p, {"in_size", "(2, 0, 3)"});
  p = small_problem();
  p.conv.groups = 2;  // in_channels 3
  expect_invalid(p, {"in_channels 3", "conv.groups 2"});
  p = small_problem();
  p.batch = int64_t(1) << 40;
  p.in_channels = int64_t(1) << 22;
  expect_invalid(p, {"elements", "overflows int64"});
}

TEST(P74Validate, ConvTranspose3dRules) {
  Problem74 p = small_problem();  // stride 2, dilation 1
  p.conv.output_padding = {1, 1, 1};
  EXPECT_NO_THROW(p.validate());
  p.conv.output_padding = {0, 2, 0};
  expect_invalid(p, {"conv.output_padding", "(0, 2, 0)", "conv.stride", "conv.dilation"});
  p.conv.dilation = {1, 3, 1};  // smaller than the dilation suffices
  EXPECT_NO_THROW(p.validate());
  p = small_problem();
  p.conv.dilation = {1, 0, 1};
  expect_invalid(p, {"conv.dilation", "(1, 0, 1)"});
  p = small_problem();
  p.conv.stride = {0, 2, 2};
  expect_invalid(p, {"conv.stride", "(0, 2, 2)"});
  p = small_problem();
  p.in_size = {1, 3, 3};
  p.conv.kernel_size = {1, 3, 3};
  p.conv.output_padding = {0, 1, 1};
  p.conv.padding = {1, 1, 1};  // depth 0 - 2 + 0 + 0 + 1 = -1
  expect_invalid(p, {"ConvTranspose3d output size", "(-1, 6, 6)"});
}

TEST(P74Validate, MaxPool3dRules) {
  Problem74 p = small_problem();
  p.pool.kernel_size = {0, 2, 2};
  expect_invalid(p, {"pool.kernel_size", "(0, 2, 2)"});
  p = small_problem();
  p.pool.stride = Triple{2, 0, 2};
  expect_invalid(p, {"pool.stride", "(2, 0, 2)"});
  p = small_problem();
  p.pool.dilation = {1, 1, 0};
  expect_invalid(p, {"pool.dilation", "(1, 1, 0)"});
  p = small_problem();
  p.pool.padding = {0, -1, 0};
  expect_invalid(p, {"pool.padding", "(0, -1, 0)", "non-negative"});
  // At most kernel_size/2, rounded down, per axis: kernel 2 allows 1, kernel 3 allows 1.
  p = small_problem();
  p.pool.padding = {1, 1, 1};
  EXPECT_NO_THROW(p.validate());
  p.pool.padding = {1, 2, 1};
  expect_invalid(p, {"pool.padding", "(1, 2, 1)", "half", "pool.kernel_size"});
  p.pool.kernel_size = {2, 3, 2};
  p.pool.padding = {0, 1, 0};
  EXPECT_NO_THROW(p.validate());
  p.pool.padding = {0, 2, 0};
  expect_invalid(p, {"pool.padding", "(0, 2, 0)"});
  // Output size: conv depth 4, kernel 3 with dilation 2 spans 5.
  p = small_problem();
  p.pool.kernel_size = {3, 2, 2};
  p.pool.dilation = {2, 1, 1};
  expect_invalid(p, {"MaxPool3d output size", "(0, 3, 3)"});
  // A window of padding only: conv width 2, kernel 2 with dilation 3 and padding 1 reads -1 and 2.
  p = small_problem();
  p.in_size = {2, 3, 1};
  p.conv.kernel_size = {3, 3, 2};
  p.conv.padding = {1, 1, 0};
  p.conv.output_padding = {1, 1, 0};  // width (1 - 1)*2 - 0 + 1 + 0 + 1 = 2
  ASSERT_EQ(p.conv_size(), (Triple{4, 6, 2}));
  p.pool.kernel_size = {2, 2, 2};
  p.pool.stride = Triple{2, 2, 1};
  p.pool.padding = {0, 0, 1};
  p.pool.dilation = {1, 1, 3};
  ASSERT_EQ(p.out_size().w, 1);  // (2 + 2 - 3 - 1)/1 + 1
  expect_invalid(p, {"pool window 0 of axis w", "covers only padding"});
}

TEST(P74Validate, NegativeSlope) {
  Problem74 p = small_problem();
  p.negative_slope = -3.5;  // LeakyReLU accepts any value
  EXPECT_NO_THROW(p.validate());
  p.negative_slope = INFINITY;
  expect_invalid(p, {"negative_slope"});
  p.negative_slope = NAN;
  expect_invalid(p, {"negative_slope"});
}

// ---------------------------------------------------------------------------------------------
// The oracles by hand.

TEST(P74Oracle, TinyForwardAndBackwardByHand) {
  // y = 0.25 + 2*(0.5, -1, 0.25) = (1.25, -1.75, 0.75); a = lrelu(y) = (1.25, -0.4375, 0.75);
  // m = -0.5*a = (-0.625, 0.21875, -0.375); z = lrelu(m) = (-0.15625, 0.21875, -0.09375).
  // Windows [0, 1] and [1, 2] (stride 1: they overlap) both peak at position 1: offsets 1, 0.
  const Problem74 p = tiny_problem();
  const p74::Inputs in = tiny_inputs();
  const p74::Forward f = p74::forward(p, in);
  EXPECT_EQ(f.y, (std::vector<double>{1.25, -1.75, 0.75}));
  EXPECT_EQ(f.magnitude, (std::vector<double>{1.25, 2.25, 0.75}));
  EXPECT_EQ(f.z, (std::vector<double>{-0.15625, 0.21875, -0.09375}));
  EXPECT_EQ(f.out, (std::vector<double>{0.21875, 0.21875}));
  EXPECT_EQ(f.argmax, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(f.y_at_argmax, (std::vector<double>{-1.75, -1.75}));
  // Backward with g = (1, 2), both routed to position 1 (y < 0, m > 0):
  // g_m = g; grad_multiplier = (1 + 2)*a = -1.3125; g_y = 0.25*(g*-0.5) = (-0.125, -0.25):
  // grad_bias = -0.375, grad_weight = x*sum g_y at tap 1 = -0.75, grad_x = weight[1]*sum = 0.375.
  const p74::Grads g = p74::backward(p, in, p74::saved_from(f), {1.0f, 2.0f});
  EXPECT_EQ(g.grad_multiplier, (std::vector<double>{-1.3125}));
  EXPECT_EQ(g.grad_bias, (std::vector<double>{-0.375}));
  EXPECT_EQ(g.grad_weight, (std::vector<double>{0.0, -0.75, 0.0}));
  EXPECT_EQ(g.grad_x, (std::vector<double>{0.375}));
  // The overlapping windows add: two terms each, and magnitudes sum |term|.
  EXPECT_EQ(g.terms_bias, (std::vector<int64_t>{2}));
  EXPECT_EQ(g.terms_weight, (std::vector<int64_t>{0, 2, 0}));
  EXPECT_EQ(g.terms_x, (std::vector<int64_t>{2}));
  EXPECT_EQ(g.mag_bias, (std::vector<double>{0.375}));
  EXPECT_EQ(g.mag_multiplier, (std::vector<double>{1.3125}));
  // The same upstream gradient on one window only routes half as much.
  const p74::Grads one = p74::backward(p, in, p74::saved_from(f), {0.0f, 2.0f});
  EXPECT_EQ(one.grad_bias, (std::vector<double>{-0.25}));
  EXPECT_EQ(one.terms_bias, (std::vector<int64_t>{1}));
}

TEST(P74Oracle, SlopeAtExactlyZeroIsNegativeSlope) {
  // PyTorch's leaky_relu_backward takes the slope unless the input is > 0, so at y = 0 (and then
  // m = mult*lrelu(0) = 0) both activations contribute slope: g_y = slope*(slope*g*mult), and
  // grad_multiplier = g_m*a = 0. A rung testing y >= 0 would give g*mult instead.
  const Problem74 p = tiny_problem();
  const p74::Inputs in = tiny_inputs();
  const p74::Saved saved{{1, 0}, {0.0f, 0.0f}};  // both windows at position 1, y exactly 0 there
  const std::vector<float> g{1.0f, 2.0f};
  const double s = p74::slope(p), mult = in.multiplier[0];
  const p74::Grads ref = p74::backward(p, in, saved, g);
  EXPECT_EQ(ref.grad_bias, (std::vector<double>{s * s * mult * 3.0}));
  EXPECT_EQ(ref.grad_multiplier, (std::vector<double>{0.0}));
  const p74::GradResult cpu = p74::rung_00().cpu_backward(p, in, saved, g);
  const float sf = float(s), expect = sf * (sf * 1.0f * in.multiplier[0]) + sf * (sf * 2.0f * in.multiplier[0]);
  EXPECT_FLOAT_EQ(cpu.grad_bias[0], expect);
  EXPECT_EQ(cpu.grad_multiplier[0], 0.0f);
}

TEST(P74Oracle, PaddingNeverWins) {
  // Pool padding 1 along w, stride 2: window 0 reads (padding, 0), window 1 reads (1, 2). z[0] is
  // negative, yet padding does not win: the argmax is offset 1 and out is z[0].
  Problem74 p = tiny_problem();
  p.pool.stride = Triple{1, 1, 2};
  p.pool.padding = {0, 0, 1};
  ASSERT_EQ(p.out_size(), (Triple{1, 1, 2}));
  const p74::Forward f = p74::forward(p, tiny_inputs());
  EXPECT_EQ(f.out, (std::vector<double>{-0.15625, 0.21875}));
  EXPECT_EQ(f.argmax, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(p74::argmax_position(p, 0, 0), -1);
  EXPECT_EQ(p74::argmax_position(p, 0, 1), 0);
  EXPECT_EQ(p74::argmax_position(p, 1, 1), 2);
  EXPECT_THROW(p74::argmax_position(p, 0, 2), std::out_of_range);
  // The backward refuses an argmax on padding.
  p74::Saved bad = p74::saved_from(f);
  bad.argmax[0] = 0;
  EXPECT_THROW(p74::backward(p, tiny_inputs(), bad, {1.0f, 1.0f}), std::invalid_argument);
}

TEST(P74Oracle, TiesKeepTheFirstNonPaddingOffset) {
  Problem74 p = small_problem();
  p.distribution = p74::Distribution::Exact;
  p.negative_slope = 0.25;
  p74::Inputs in = p74::make_inputs(p);
  std::fill(in.weight.begin(), in.weight.end(), 0.0f);  // y = bias: every window is one tie
  p74::Forward f = p74::forward(p, in);
  for (int32_t a : f.argmax) ASSERT_EQ(a, 0);
  // With pool padding 1 (kernel 2, stride 2), window q of an axis starts at 2q - 1: the first
  // non-padding kernel position is j = 1 for q = 0, else 0, unless j = 0 runs past the end.
  p.pool.padding = {1, 1, 1};
  const Triple os = p.out_size(), cs = p.conv_size();
  ASSERT_EQ(os, (Triple{3, 4, 4}));
  f = p74::forward(p, in);
  auto first = [&](int a, int64_t q) -> int32_t {
    const int64_t start = 2 * q - 1;
    return start < 0 ? 1 : (start < cs[a] ? 0 : -1);
  };
  for (int64_t e = 0; e < p.out_elems(); ++e) {
    const int64_t q = e % (os.d * os.h * os.w);
    const int32_t jd = first(0, q / (os.h * os.w)), jh = first(1, q / os.w % os.h), jw = first(2, q % os.w);
    ASSERT_EQ(f.argmax[size_t(e)], (jd * 2 + jh) * 2 + jw) << "window " << e;
  }
  // The CPU rung breaks the ties the same way.
  const p74::ForwardResult r = p74::rung_00().cpu_forward(p, in);
  EXPECT_EQ(r.argmax, f.argmax);
}

// ---------------------------------------------------------------------------------------------
// Inputs.

TEST(P74Inputs, DistributionsAsDocumented) {
  Problem74 p = small_problem();
  p.out_channels = 4096;
  const p74::Inputs in = p74::make_inputs(p);
  double sum = 0, sq = 0;
  for (float m : in.multiplier) {
    sum += m;
    sq += double(m) * m;
  }
  const double mean = sum / 4096, var = sq / 4096 - mean * mean;
  EXPECT_LT(std::fabs(mean), 0.1);  // N(0, 1): mean's standard error 1/64
  EXPECT_LT(std::fabs(var - 1.0), 0.1);
  const float b = float(1.0 / std::sqrt(4096.0 * 27));
  for (float w : in.weight) ASSERT_LE(std::fabs(w), b);
  for (float x : in.x) ASSERT_TRUE(x >= 0.0f && x < 1.0f);
  for (float g : p74::make_grad_out(small_problem())) ASSERT_TRUE(g >= -1.0f && g <= 1.0f);

  p = small_problem();
  p.distribution = p74::Distribution::Exact;
  p.negative_slope = 0.25;
  const p74::Inputs e = p74::make_inputs(p);
  for (float x : e.x) ASSERT_TRUE(x == 0 || x == 1 || x == 2 || x == 3) << x;
  for (float w : e.weight) ASSERT_TRUE(w * 16 == std::round(w * 16) && std::fabs(w) <= 0.125f) << w;
  for (float v : e.bias) ASSERT_TRUE(v * 16 == std::round(v * 16) && std::fabs(v) <= 0.25f) << v;
  for (float m : e.multiplier) ASSERT_TRUE(m * 4 == std::round(m * 4) && m != 0 && std::fabs(m) <= 1) << m;
  for (float g : p74::make_grad_out(p)) ASSERT_TRUE(g == std::round(g) && std::fabs(g) <= 3) << g;
}

TEST(P74Inputs, ExactCheckNamesTheCause) {
  Problem74 p = small_problem();
  p.distribution = p74::Distribution::Exact;  // negative_slope 0.2
  try {
    p74::make_inputs(p);
    ADD_FAILURE() << "exact inputs accepted negative_slope 0.2";
  } catch (const p74::InvalidProblem& e) {
    EXPECT_NE(std::string(e.what()).find("power of two"), std::string::npos) << e.what();
  }
  p.negative_slope = -0.5;
  EXPECT_NO_THROW(p74::exact_check(p));
  p.negative_slope = 0.25;
  p.in_channels = 1 << 16;  // 65536 * 27 taps: z outgrows 2^24 units of its grid
  try {
    p74::exact_check(p);
    ADD_FAILURE() << "exact inputs accepted in_channels 65536";
  } catch (const p74::InvalidProblem& e) {
    EXPECT_NE(std::string(e.what()).find("2^24"), std::string::npos) << e.what();
  }
  p = small_problem();
  p.negative_slope = 0.25;
  p.batch = 1 << 16;  // grad_multiplier sums batch * 18 windows per channel
  EXPECT_THROW(p74::exact_check(p), p74::InvalidProblem);
}

// ---------------------------------------------------------------------------------------------
// The backward oracle against finite differences of the forward oracle.

namespace {

double loss(const Problem74& p, const p74::Inputs& in, const std::vector<float>& g) {
  const p74::Forward f = p74::forward(p, in);
  double l = 0;
  for (size_t i = 0; i < g.size(); ++i) l += double(g[i]) * f.out[i];
  return l;
}

// The loss is piecewise linear in each input (conv, LeakyReLU, scaling and max are), so a
// central difference that crosses no kink equals the derivative up to the oracle's fp64
// rounding. The loss sums N = out_elems terms g*out, each |out| <= L^2*|mult|*(magnitude at the
// argmax) after a chain of at most 60 roundings; with A the sum of |g| times that bound, one
// loss is off by at most (N + 60)*2^-53*A <= 1e-12*A for N <= 8000, and the quotient by
// 1e-12*A/h per evaluation. The backward uses y rounded to fp32 (the saved state), which moves
// each grad_multiplier term by at most 2^-24 of itself: 2^-23*mag covers it. A kink inside
// [-h, h] shows as one-sided slopes that differ by more than that noise; such elements are
// skipped and counted.
void check_against_differences(const Problem74& p, const char* name, std::vector<float> p74::Inputs::*field,
                               const std::vector<double>& grad, const std::vector<double>& mag) {
  const p74::Inputs in = p74::make_inputs(p);
  const std::vector<float> g = p74::make_grad_out(p);
  const p74::Forward f = p74::forward(p, in);
  const double L = std::max(1.0, std::fabs(p74::slope(p)));
  double A = 0;
  for (size_t e = 0; e < g.size(); ++e) {
    const int64_t pos = p74::argmax_position(p, int64_t(e), f.argmax[e]);
    const int64_t c = int64_t(e) / (int64_t(g.size()) / (p.batch * p.out_channels)) % p.out_channels;
    A += std::fabs(g[e]) * L * L * std::fabs(f.multiplier[size_t(c)]) * f.magnitude[size_t(pos)];
  }
  ASSERT_LE(g.size(), 8000u);
  const double h = std::ldexp(1.0, -12), l0 = loss(p, in, g);
  int64_t checked = 0, skipped = 0;
  for (size_t i = 0; i < grad.size(); ++i) {
    p74::Inputs up = in, down = in;
    const float v = (in.*field)[i];
    (up.*field)[i] = float(v + h);
    (down.*field)[i] = float(v - h);
    const double dp = double((up.*field)[i]) - v, dm = v - double((down.*field)[i]);
    const double lp = loss(p, up, g), lm = loss(p, down, g);
    const double noise = 1e-12 * A / std::min(dp, dm);
    if (std::fabs((lp - l0) / dp - (l0 - lm) / dm) > 4 * noise) {
      ++skipped;
      continue;
    }
    ++checked;
    const double fd = (lp - lm) / (dp + dm);
    ASSERT_NEAR(fd, grad[i], 2 * noise + std::ldexp(mag[i], -23)) << name << "[" << i << "] of " << p.describe();
  }
  EXPECT_GT(checked, 0) << name;
  EXPECT_LE(skipped * 10, checked + skipped) << name << ": too many kinks within " << h;
}

}  // namespace

TEST(P74Oracle, BackwardMatchesFiniteDifferences) {
  Problem74 overlapping = small_problem();  // groups, and pool windows that overlap and pad
  overlapping.in_channels = 2;
  overlapping.conv.groups = 2;
  overlapping.pool.kernel_size = Triple::cube(3);
  overlapping.pool.stride = Triple::cube(1);
  overlapping.pool.padding = Triple::cube(1);
  for (const Problem74& p : {small_problem(), overlapping, varied_problem()}) {
    const p74::Inputs in = p74::make_inputs(p);
    const p74::Grads g = p74::backward(p, in, p74::saved_from(p74::forward(p, in)), p74::make_grad_out(p));
    check_against_differences(p, "grad_x", &p74::Inputs::x, g.grad_x, g.mag_x);
    check_against_differences(p, "grad_weight", &p74::Inputs::weight, g.grad_weight, g.mag_weight);
    check_against_differences(p, "grad_bias", &p74::Inputs::bias, g.grad_bias, g.mag_bias);
    check_against_differences(p, "grad_multiplier", &p74::Inputs::multiplier, g.grad_multiplier, g.mag_multiplier);
  }
}

// ---------------------------------------------------------------------------------------------
// Checks: rung 00 passes them; mutants fail them.

TEST(P74Checks, CpuRungPassesOnUniformInputs) {
  for (const Problem74& p : {small_problem(), varied_problem()}) {
    const p74::Inputs in = p74::make_inputs(p);
    const p74::Forward ref = p74::forward(p, in);
    const p74::ForwardTolerance tol = p74::forward_tolerance(p, ref);
    const p74::ForwardResult got = p74::rung_00().cpu_forward(p, in);
    const p74::ForwardCheck fc = p74::check_forward(p, ref, tol, got);
    EXPECT_TRUE(fc.pass()) << fc.summary() << " | " << p.describe();
    // The backward from the rung's own saved state, against the oracle from that state.
    const std::vector<float> g = p74::make_grad_out(p);
    const p74::Grads gref = p74::backward(p, in, got.saved(), g);
    const p74::GradResult mine = p74::rung_00().cpu_backward(p, in, got.saved(), g);
    const p74::GradCheck gc = p74::check_grads(gref, p74::grad_tolerance(p, gref), mine);
    EXPECT_TRUE(gc.pass()) << gc.summary() << " | " << p.describe();
  }
}

TEST(P74Checks, CpuRungIsExactOnExactInputs) {
  Problem74 p = varied_problem();
  p.distribution = p74::Distribution::Exact;
  p.negative_slope = 0.25;
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Forward ref = p74::forward(p, in);
  const p74::ForwardResult got = p74::rung_00().cpu_forward(p, in);
  EXPECT_EQ(to_double(got.out), ref.out);
  EXPECT_EQ(got.argmax, ref.argmax);
  EXPECT_EQ(to_double(got.y), ref.y_at_argmax);
  const p74::ForwardTolerance tol = p74::forward_tolerance(p, ref);
  EXPECT_TRUE(std::all_of(tol.out.begin(), tol.out.end(), [](double t) { return t == 0; }));
  EXPECT_TRUE(p74::check_forward(p, ref, tol, got).pass());
  const std::vector<float> g = p74::make_grad_out(p);
  const p74::Grads gref = p74::backward(p, in, got.saved(), g);
  const p74::GradResult gg = p74::rung_00().cpu_backward(p, in, got.saved(), g);
  EXPECT_EQ(to_double(gg.grad_x), gref.grad_x);
  EXPECT_EQ(to_double(gg.grad_weight), gref.grad_weight);
  EXPECT_EQ(to_double(gg.grad_bias), gref.grad_bias);
  EXPECT_EQ(to_double(gg.grad_multiplier), gref.grad_multiplier);
  EXPECT_TRUE(p74::check_grads(gref, p74::grad_tolerance(p, gref), gg).pass());
  // Not vacuous: most of grad_x is fractional.
  int64_t fractional = 0;
  for (double v : gref.grad_x) fractional += v != std::round(v);
  EXPECT_GT(fractional, int64_t(gref.grad_x.size() / 4));
}

TEST(P74Checks, MutantsFail) {
  const Problem74 p = varied_problem();
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Forward ref = p74::forward(p, in);
  const p74::ForwardTolerance tol = p74::forward_tolerance(p, ref);
  const p74::ForwardResult good = rounded(ref);
  ASSERT_TRUE(p74::check_forward(p, ref, tol, good).pass());

  p74::ForwardResult bad = good;  // out shifted by twice its tolerance at one element
  bad.out[5] = float(ref.out[5] + 2 * tol.out[5] + std::fabs(ref.out[5]) * 1.2e-7);
  EXPECT_FALSE(p74::check_forward(p, ref, tol, bad).pass());

  // An argmax moved to a clearly smaller valid position (its y is the oracle's there, so only
  // the argmax is wrong).
  bool moved = false;
  for (int64_t e = 0; e < p.out_elems() && !moved; ++e)
    for (int32_t j = 0; j < p.pool_window() && !moved; ++j) {
      const int64_t pos = p74::argmax_position(p, e, j);
      if (pos < 0 || ref.z[size_t(pos)] > ref.out[size_t(e)] - 0.01) continue;
      bad = good;
      bad.argmax[size_t(e)] = j;
      bad.y[size_t(e)] = float(ref.y[size_t(pos)]);
      const p74::ForwardCheck c = p74::check_forward(p, ref, tol, bad);
      EXPECT_FALSE(c.pass());
      EXPECT_EQ(c.argmax_failures, 1);
      EXPECT_EQ(c.first_bad_argmax, e);
      EXPECT_TRUE(c.out.pass() && c.y.pass()) << c.summary();
      moved = true;
    }
  EXPECT_TRUE(moved);
  bad = good;  // an argmax outside the window
  bad.argmax[0] = int32_t(p.pool_window());
  EXPECT_FALSE(p74::check_forward(p, ref, tol, bad).pass());

  const std::vector<float> g = p74::make_grad_out(p);
  const p74::Grads gref = p74::backward(p, in, good.saved(), g);
  const p74::GradTolerance gtol = p74::grad_tolerance(p, gref);
  const p74::GradResult ok = rounded(gref);
  ASSERT_TRUE(p74::check_grads(gref, gtol, ok).pass());

  p74::GradResult m = ok;  // grad_weight: the largest element 1% off
  const size_t big = size_t(std::max_element(gref.grad_weight.begin(), gref.grad_weight.end(),
                                             [](double a, double b) { return std::fabs(a) < std::fabs(b); }) -
                            gref.grad_weight.begin());
  m.grad_weight[big] *= 1.01f;
  p74::GradCheck c = p74::check_grads(gref, gtol, m);
  EXPECT_FALSE(c.pass());
  EXPECT_FALSE(c.weight.pass());
  EXPECT_NE(c.summary().find("grad_weight"), std::string::npos) << c.summary();

  m = ok;  // a NaN in grad_x
  m.grad_x[3] = NAN;
  EXPECT_FALSE(p74::check_grads(gref, gtol, m).pass());

  m = ok;  // grad_bias in the wrong channel order
  std::reverse(m.grad_bias.begin(), m.grad_bias.end());
  EXPECT_FALSE(p74::check_grads(gref, gtol, m).pass());

  m = ok;  // a wrong size is an error, not a verdict
  m.grad_multiplier.pop_back();
  EXPECT_THROW(p74::check_grads(gref, gtol, m), std::invalid_argument);
}

TEST(P74Checks, ZeroTermsMeanExactlyZero) {
  // Taps 0 and 2 of the tiny problem's weight get no gradient (both windows route to position
  // 1, which only tap 1 writes): no terms, tolerance 0 on Uniform inputs, so a stray value fails.
  const Problem74 p = tiny_problem();
  const p74::Inputs in = tiny_inputs();
  const p74::Grads g = p74::backward(p, in, p74::saved_from(p74::forward(p, in)), {1.0f, 2.0f});
  const p74::GradTolerance tol = p74::grad_tolerance(p, g);
  EXPECT_EQ(tol.grad_weight[0], 0.0);
  EXPECT_GT(tol.grad_weight[1], 0.0);
  p74::GradResult m = rounded(g);
  ASSERT_TRUE(p74::check_grads(g, tol, m).pass());
  m.grad_weight[0] = 1e-30f;
  EXPECT_FALSE(p74::check_grads(g, tol, m).pass());
}

// ---------------------------------------------------------------------------------------------
// The TF32 bound (Precision::Tf32, rung 10): a host emulation of a tensor-core forward (x and
// weights rounded to TF32 as cvt.rna rounds them, then exact sums: the oracle on the rounded
// inputs) passes it; the slips a tensor-core rung can make fail it.

namespace {

/// The KernelBench geometry family at a small size: two input-channel chunks' worth of taps.
Problem74 tf32_problem() {
  Problem74 p;
  p.batch = 2, p.in_channels = 4, p.out_channels = 6, p.in_size = {3, 4, 5};
  return p;
}

/// Inputs whose every product has the same sign and is far from a TF32 value: x in [1, 1.25),
/// weights in [1, 1.25)/32, each 3/4 of the way between TF32 values (the mantissa below 1.25
/// keeps truncation's relative error of each operand at least 0.75/1.25 of a TF32 step, so a
/// truncated product is off by more than the 2u_t the bound allows); bias 0, so the error is
/// relative to the whole magnitude.
p74::Inputs between_tf32_values(const Problem74& p) {
  p74::Inputs in = p74::make_inputs(p);
  for (float& v : in.x) v = ladder::tf32_three_quarters(1.0f + 0.25f * v);
  for (float& v : in.weight) v = ladder::tf32_three_quarters(std::ldexp(1.0f + 0.25f * std::fabs(v), -5));
  std::fill(in.bias.begin(), in.bias.end(), 0.0f);
  return in;
}

/// The emulated forward: `round` applied to x and every weight, then the fp64 oracle, rounded to
/// fp32 at the end (an FP32 accumulation's last rounding).
p74::ForwardResult emulated_forward(const Problem74& p, p74::Inputs in, float (*round)(float)) {
  for (float& v : in.x) v = round(v);
  for (float& v : in.weight) v = round(v);
  return rounded(p74::forward(p, in));
}

bool passes(const Problem74& p, const p74::Forward& ref, p74::Precision precision, const p74::ForwardResult& r) {
  return p74::check_forward(p, ref, p74::forward_tolerance(p, ref, precision), r).pass();
}

}  // namespace

TEST(P74Tf32Bound, RoundedToNearestPassesTruncatedFails) {
  const Problem74 p = tf32_problem();
  const p74::Inputs in = between_tf32_values(p);
  const p74::Forward ref = p74::forward(p, in);
  const p74::ForwardResult tf32 = emulated_forward(p, in, ladder::round_to_tf32);
  EXPECT_TRUE(passes(p, ref, p74::Precision::Tf32, tf32))
      << p74::check_forward(p, ref, p74::forward_tolerance(p, ref, p74::Precision::Tf32), tf32).summary();
  EXPECT_FALSE(passes(p, ref, p74::Precision::Fp32, tf32)) << "the fp32 bound would accept TF32 inputs: it is loose";
  const p74::ForwardResult truncated = emulated_forward(p, in, ladder::truncate_to_tf32);
  const p74::ForwardCheck c =
      p74::check_forward(p, ref, p74::forward_tolerance(p, ref, p74::Precision::Tf32), truncated);
  EXPECT_FALSE(c.pass()) << "truncation instead of rounding to nearest passed the TF32 bound: " << c.summary();
  EXPECT_FALSE(c.y.pass()) << c.summary();  // every y is off by about 1.2 bounds
}

TEST(P74Tf32Bound, ShiftedTapOrDroppedChannelFails) {
  const Problem74 p = tf32_problem();
  const p74::Inputs in = between_tf32_values(p);
  const p74::Forward ref = p74::forward(p, in);
  const int64_t taps = p.conv_taps(), per_ci = p.out_channels * taps;
  p74::Inputs shifted = in;  // every weight's taps rotated by one (tap k reads tap k + 1's weight)
  for (size_t base = 0; base < shifted.weight.size(); base += size_t(taps))
    std::rotate(shifted.weight.begin() + int64_t(base), shifted.weight.begin() + int64_t(base) + 1,
                shifted.weight.begin() + int64_t(base) + taps);
  EXPECT_FALSE(passes(p, ref, p74::Precision::Tf32, emulated_forward(p, shifted, ladder::round_to_tf32)));
  p74::Inputs dropped = in;  // the last input channel's weights never reach the sums
  std::fill(dropped.weight.end() - per_ci, dropped.weight.end(), 0.0f);
  EXPECT_FALSE(passes(p, ref, p74::Precision::Tf32, emulated_forward(p, dropped, ladder::round_to_tf32)));
  // ... and the emulation itself passes (the damage, not the emulation, fails above).
  EXPECT_TRUE(passes(p, ref, p74::Precision::Tf32, emulated_forward(p, in, ladder::round_to_tf32)));
}

TEST(P74Tf32Bound, ExactInputsStayExact) {
  Problem74 p = tf32_problem();
  p.distribution = p74::Distribution::Exact;
  p.negative_slope = 0.25;
  const p74::Inputs in = p74::make_inputs(p);
  for (float v : in.x) ASSERT_EQ(ladder::round_to_tf32(v), v) << "an exact input that TF32 does not hold";
  for (float v : in.weight) ASSERT_EQ(ladder::round_to_tf32(v), v) << "an exact weight that TF32 does not hold";
  const p74::Forward ref = p74::forward(p, in);
  const p74::ForwardTolerance tol = p74::forward_tolerance(p, ref, p74::Precision::Tf32);
  EXPECT_TRUE(std::all_of(tol.y.begin(), tol.y.end(), [](double t) { return t == 0; }));
  EXPECT_TRUE(std::all_of(tol.out.begin(), tol.out.end(), [](double t) { return t == 0; }));
}

TEST(P74Tf32Bound, NearTieWithinTheBoundIsAcceptedWrongPositionIsNot) {
  // One channel, one input channel: window offset 0 is w111*x, offset 1 is w112*x with
  // w112 = w111*(1 + 2^-12) (w110 = 0), every other offset 0. The oracle's maximum is offset 1; a
  // rung that picks offset 0 is off by 2^-12 of the value: inside the TF32 bound (about 2^-10),
  // far outside the fp32 one. Offset 2 (value 0) is a wrong position under either bound.
  Problem74 p;
  p.batch = 1, p.in_channels = 1, p.out_channels = 1, p.in_size = {2, 2, 2};
  p74::Inputs in{std::vector<float>(8, 0.75f), std::vector<float>(27, 0.0f), {0.0f}, {1.0f}};
  in.weight[(1 * 3 + 1) * 3 + 1] = 0.5f;
  in.weight[(1 * 3 + 1) * 3 + 2] = 0.5f * (1.0f + std::ldexp(1.0f, -12));
  const p74::Forward ref = p74::forward(p, in);
  const p74::ForwardResult good = rounded(ref);
  for (int32_t a : ref.argmax) ASSERT_EQ(a, 1);
  auto picking = [&](int32_t offset) {
    p74::ForwardResult r = good;
    for (size_t q = 0; q < r.out.size(); ++q) {
      const int64_t pos = p74::argmax_position(p, int64_t(q), offset);
      r.argmax[q] = offset;
      r.out[q] = float(ref.z[size_t(pos)]);
      r.y[q] = float(ref.y[size_t(pos)]);
    }
    return r;
  };
  EXPECT_TRUE(passes(p, ref, p74::Precision::Tf32, good));
  EXPECT_TRUE(passes(p, ref, p74::Precision::Tf32, picking(0)));
  EXPECT_FALSE(passes(p, ref, p74::Precision::Fp32, picking(0)));
  const p74::ForwardCheck wrong =
      p74::check_forward(p, ref, p74::forward_tolerance(p, ref, p74::Precision::Tf32), picking(2));
  EXPECT_FALSE(wrong.pass());
  EXPECT_EQ(wrong.argmax_failures, int64_t(good.out.size())) << wrong.summary();
}

// ---------------------------------------------------------------------------------------------
// The FP32 bound against 3xTF32 (Precision::Fp32, rung 12): on inputs between TF32 values, a host
// emulation of plain TF32 (rung 10's arithmetic) fails the FP32 bound, a host emulation of 3xTF32
// (every product as big*big + big*small + small*big of split_tf32's parts, summed exactly) passes
// it, and 3xTF32 with the weights' small parts lost (rung 10's rounded weight layout carried over)
// fails it again.

namespace {

/// The 3xTF32 forward on the host: the convolution is bilinear in x and the weights, so its sum of
/// three products per term is the sum of three oracle runs on the parts (big x with big weights and
/// the bias, big x with small weights, small x with big weights); then the chain and the max in
/// window order as the oracle takes them, rounded to fp32 at the end. `weight_small`: false drops
/// the weights' small parts (the weights rounded to TF32 before the split).
p74::ForwardResult emulated_three_tf32_forward(const Problem74& p, const p74::Inputs& in, bool weight_small = true) {
  p74::Inputs bb = in, bs = in, sb = in;  // (x part, weight part): big big, big small, small big
  for (size_t i = 0; i < in.x.size(); ++i) {
    const ladder::Tf32Split s = ladder::split_tf32(in.x[i]);
    bb.x[i] = bs.x[i] = s.big;
    sb.x[i] = s.small;
  }
  for (size_t i = 0; i < in.weight.size(); ++i) {
    const ladder::Tf32Split s = ladder::split_tf32(in.weight[i]);
    bb.weight[i] = sb.weight[i] = s.big;
    bs.weight[i] = weight_small ? s.small : 0.0f;
  }
  std::fill(bs.bias.begin(), bs.bias.end(), 0.0f);
  std::fill(sb.bias.begin(), sb.bias.end(), 0.0f);
  const p74::Forward f_bb = p74::forward(p, bb), f_bs = p74::forward(p, bs), f_sb = p74::forward(p, sb);
  const double slope = p74::slope(p);
  auto lrelu = [slope](double v) { return v > 0 ? v : slope * v; };
  const Triple o = p.out_size();
  const int64_t out_spatial = o[0] * o[1] * o[2];
  p74::ForwardResult r;
  for (int64_t q = 0; q < p.out_elems(); ++q) {
    const double mult = in.multiplier[size_t(q / out_spatial % p.out_channels)];
    double best = -INFINITY, y_best = 0;
    int32_t at = -1;
    for (int32_t offset = 0; offset < int32_t(p.pool_window()); ++offset) {
      const int64_t pos = p74::argmax_position(p, q, offset);
      if (pos < 0) continue;
      const double y = f_bb.y[size_t(pos)] + f_bs.y[size_t(pos)] + f_sb.y[size_t(pos)];
      const double z = lrelu(mult * lrelu(y));
      if (at < 0 || z > best) best = z, y_best = y, at = offset;
    }
    r.out.push_back(float(best));
    r.argmax.push_back(at);
    r.y.push_back(float(y_best));
  }
  return r;
}

}  // namespace

TEST(P74ThreeTf32Bound, Fp32BoundRejectsTf32AcceptsThreeTf32) {
  const Problem74 p = tf32_problem();
  const p74::Inputs in = between_tf32_values(p);
  const p74::Forward ref = p74::forward(p, in);
  for (float v : in.x) ASSERT_NE(ladder::round_to_tf32(v), v) << "an input that TF32 holds: nothing to split";
  // The emulation itself: with the parts' sum exact (inputs that are TF32 values), it is the oracle.
  p74::Inputs tf32_in = in;
  for (float& v : tf32_in.x) v = ladder::round_to_tf32(v);
  for (float& v : tf32_in.weight) v = ladder::round_to_tf32(v);
  const p74::ForwardResult same = emulated_three_tf32_forward(p, tf32_in);
  EXPECT_EQ(same.argmax, rounded(p74::forward(p, tf32_in)).argmax);
  // Plain TF32 (rung 10) is outside the FP32 bound; 3xTF32 (rung 12) inside it.
  EXPECT_FALSE(passes(p, ref, p74::Precision::Fp32, emulated_forward(p, in, ladder::round_to_tf32)))
      << "the FP32 bound accepts plain TF32: it cannot tell rung 12 from rung 10";
  const p74::ForwardResult three = emulated_three_tf32_forward(p, in);
  EXPECT_TRUE(passes(p, ref, p74::Precision::Fp32, three))
      << p74::check_forward(p, ref, p74::forward_tolerance(p, ref, p74::Precision::Fp32), three).summary();
  // Half of the correction lost (the weights rounded before the split: their small parts 0).
  const p74::ForwardResult half = emulated_three_tf32_forward(p, in, false);
  EXPECT_FALSE(passes(p, ref, p74::Precision::Fp32, half)) << "3xTF32 without the weights' small parts passed";
}

// ---------------------------------------------------------------------------------------------
// The TF32 gradient bound (grad_tolerance with Precision::Tf32, rung 11): a host emulation of the
// tensor-core gradients (both operands of every product rounded to TF32 as cvt.rna rounds them,
// then exact sums) passes it; the fp32 bound rejects that emulation, and the TF32 bound rejects
// truncation.

namespace {

/// tf32_problem with slope 1 (both LeakyReLUs the identity) and multipliers 1: g_y is then grad_out
/// itself, so rounding grad_out rounds the routed gradient g_y, the operand the rung rounds.
Problem74 tf32_grad_problem() {
  Problem74 p = tf32_problem();
  p.negative_slope = 1.0;
  return p;
}

/// Every product of both gradients has the same sign and both operands lie 3/4 of the way between
/// TF32 values (between_tf32_values), grad_out too: in [1, 1.25)/4.
std::vector<float> grad_out_between_tf32_values(const Problem74& p) {
  std::vector<float> g = p74::make_grad_out(p);
  for (float& v : g) v = ladder::tf32_three_quarters(std::ldexp(1.0f + 0.25f * std::fabs(v), -2));
  return g;
}

/// The emulated tensor-core backward: `round` applied to x, the weights and grad_out (= g_y), then
/// the fp64 oracle, rounded to fp32 at the end; grad_bias and grad_multiplier from the unrounded
/// inputs, as the rung computes them in fp32.
p74::GradResult emulated_backward(const Problem74& p, const p74::Inputs& in, const p74::Saved& saved,
                                  std::vector<float> grad_out, float (*round)(float)) {
  p74::GradResult exact = rounded(p74::backward(p, in, saved, grad_out));
  p74::Inputs r = in;
  for (float& v : r.x) v = round(v);
  for (float& v : r.weight) v = round(v);
  for (float& v : grad_out) v = round(v);
  const p74::GradResult tf32 = rounded(p74::backward(p, r, saved, grad_out));
  exact.grad_x = tf32.grad_x;
  exact.grad_weight = tf32.grad_weight;
  return exact;
}

}  // namespace

TEST(P74Tf32GradBound, RoundedToNearestPassesTruncatedFails) {
  const Problem74 p = tf32_grad_problem();
  p74::Inputs in = between_tf32_values(p);
  std::fill(in.multiplier.begin(), in.multiplier.end(), 1.0f);
  const p74::Saved saved = p74::saved_from(p74::forward(p, in));
  const std::vector<float> g = grad_out_between_tf32_values(p);
  const p74::Grads ref = p74::backward(p, in, saved, g);
  const p74::GradTolerance tf32_tol = p74::grad_tolerance(p, ref, p74::Precision::Tf32);

  const p74::GradResult near = emulated_backward(p, in, saved, g, ladder::round_to_tf32);
  const p74::GradCheck ok = p74::check_grads(ref, tf32_tol, near);
  EXPECT_TRUE(ok.pass()) << ok.summary();
  const p74::GradCheck loose = p74::check_grads(ref, p74::grad_tolerance(p, ref), near);
  EXPECT_FALSE(loose.x.pass()) << "the fp32 bound would accept TF32 grad_x: it is loose";
  EXPECT_FALSE(loose.weight.pass()) << "the fp32 bound would accept TF32 grad_weight: it is loose";

  // Truncation errs by about 2.4u_t a product (0.75 of a TF32 step on each operand of mantissa
  // below 1.25), above the 2u_t + u_t^2 the bound allows.
  const p74::GradCheck cut =
      p74::check_grads(ref, tf32_tol, emulated_backward(p, in, saved, g, ladder::truncate_to_tf32));
  EXPECT_FALSE(cut.x.pass()) << cut.summary();
  EXPECT_FALSE(cut.weight.pass()) << cut.summary();
  EXPECT_TRUE(cut.bias.pass() && cut.multiplier.pass()) << cut.summary();
}

TEST(P74Tf32GradBound, WiderOnlyForTheConvolutionGradients) {
  const Problem74 p = small_problem();
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Grads ref = p74::backward(p, in, p74::saved_from(p74::forward(p, in)), p74::make_grad_out(p));
  const p74::GradTolerance fp32 = p74::grad_tolerance(p, ref), tf32 = p74::grad_tolerance(p, ref, p74::Precision::Tf32);
  EXPECT_EQ(tf32.grad_bias, fp32.grad_bias);
  EXPECT_EQ(tf32.grad_multiplier, fp32.grad_multiplier);
  const double rel = 2 * ladder::kTf32UnitRoundoff + ladder::kTf32UnitRoundoff * ladder::kTf32UnitRoundoff;
  for (size_t i = 0; i < ref.grad_x.size(); ++i) {
    if (ref.terms_x[i] == 0) {
      EXPECT_EQ(tf32.grad_x[i], 0.0) << "no terms: exactly 0 under either bound";
      continue;
    }
    EXPECT_GE(tf32.grad_x[i], rel * ref.mag_x[i]);
    EXPECT_GT(tf32.grad_x[i], fp32.grad_x[i]);
  }
  for (size_t i = 0; i < ref.grad_weight.size(); ++i) {
    if (ref.terms_weight[i] > 0) {
      EXPECT_GT(tf32.grad_weight[i], fp32.grad_weight[i]);
    }
  }
}

TEST(P74Tf32GradBound, ExactInputsStayExact) {
  Problem74 p = tf32_problem();
  p.distribution = p74::Distribution::Exact;
  p.negative_slope = 0.25;
  const p74::Inputs in = p74::make_inputs(p);
  const p74::Saved saved = p74::saved_from(p74::forward(p, in));
  const std::vector<float> g = p74::make_grad_out(p);
  for (float v : g) ASSERT_EQ(ladder::round_to_tf32(v), v) << "an exact upstream gradient that TF32 does not hold";
  const p74::Grads ref = p74::backward(p, in, saved, g);
  // g_y = lrelu'(y) * lrelu'(m) * g * multiplier: a few bits each, so TF32 holds it.
  for (size_t q = 0; q < saved.argmax.size(); ++q) {
    const int64_t c = int64_t(q) / (p.out_elems() / (p.batch * p.out_channels)) % p.out_channels;
    const float y = saved.y[q], a = y > 0 ? y : 0.25f * y, m = in.multiplier[size_t(c)] * a;
    const float gm = m > 0 ? g[q] : 0.25f * g[q], g_mult = gm * in.multiplier[size_t(c)];
    const float gy = y > 0 ? g_mult : 0.25f * g_mult;
    ASSERT_EQ(ladder::round_to_tf32(gy), gy) << "a routed gradient that TF32 does not hold, window " << q;
  }
  const p74::GradTolerance tol = p74::grad_tolerance(p, ref, p74::Precision::Tf32);
  for (const std::vector<double>* t : {&tol.grad_x, &tol.grad_weight, &tol.grad_bias, &tol.grad_multiplier})
    EXPECT_TRUE(std::all_of(t->begin(), t->end(), [](double v) { return v == 0; }));
  const p74::GradResult emulated = emulated_backward(p, in, saved, g, ladder::round_to_tf32);
  EXPECT_EQ(to_double(emulated.grad_x), ref.grad_x);
  EXPECT_EQ(to_double(emulated.grad_weight), ref.grad_weight);
}
