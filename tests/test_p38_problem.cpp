// Tests for the second track's host side (tracks/p38_spatial_softmax): output sizes against
// values worked out by hand from PyTorch's formulas, validate() on every rule both ways (accepted
// at the edge, rejected past it, the message naming the parameter), the fp64 oracle on cases
// checkable by hand, exactness of the exact distribution, and the derived tolerance: an fp32
// pipeline passes it, a wrong one and a perturbation beyond the bound fail it, and NaN fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "expect_invalid.hpp"
#include "p38_spatial_softmax/oracle.hpp"
#include "p38_spatial_softmax/problem.hpp"
#include "p38_spatial_softmax/tolerance.hpp"

namespace p38 = ladder::p38;
using p38::Problem38;
using p38::Triple;

namespace {

/// Small and valid: pooled (2, 3, 2), output (4, 6, 4). Each invalid case breaks one field.
Problem38 small_problem() {
  Problem38 p;
  p.batch = 2;
  p.in_channels = 3;
  p.out_channels = 4;
  p.in_size = {4, 6, 5};
  return p;
}

enum class Bug { None, DropLastInputChannel };

/// The whole pipeline in fp32, as a straightforward kernel would do it: pool (sum, then divide),
/// gather-form convolution with fmaf, clamp with fp32 bounds, an online softmax (running max and
/// rescaled running sum), times scale. Independent of the oracle except for pool_divisor.
std::vector<float> fp32_pipeline(const Problem38& p, const p38::Inputs& in, Bug bug = Bug::None) {
  const Triple I = p.in_size, P = p.pooled_size(), O = p.out_size(), K = p.conv.kernel_size;
  const Triple ps = p.pool.effective_stride();
  std::vector<float> pooled(size_t(p.pooled_elems()));
  for (int64_t c = 0; c < p.batch * p.in_channels; ++c)
    for (int64_t od = 0; od < P.d; ++od)
      for (int64_t oh = 0; oh < P.h; ++oh)
        for (int64_t ow = 0; ow < P.w; ++ow) {
          float sum = 0;
          const int64_t o[3] = {od, oh, ow};
          int64_t lo[3], hi[3];
          for (int a = 0; a < 3; ++a) {
            const int64_t start = o[a] * ps[a] - p.pool.padding[a];
            lo[a] = std::max<int64_t>(start, 0);
            hi[a] = std::min(start + p.pool.kernel_size[a], I[a]);
          }
          for (int64_t d = lo[0]; d < hi[0]; ++d)
            for (int64_t h = lo[1]; h < hi[1]; ++h)
              for (int64_t w = lo[2]; w < hi[2]; ++w) sum += in.x[size_t(((c * I.d + d) * I.h + h) * I.w + w)];
          const float q = float(p38::pool_divisor(p, 0, od) * p38::pool_divisor(p, 1, oh) * p38::pool_divisor(p, 2, ow));
          pooled[size_t(((c * P.d + od) * P.h + oh) * P.w + ow)] = sum / q;
        }
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group(), S = p.spatial();
  const float lo = float(p.clamp_min), hi = float(p.clamp_max);
  std::vector<float> z(size_t(p.out_elems()));
  auto src = [&](int a, int64_t o, int64_t k) {
    const int64_t t = o + p.conv.padding[a] - k * p.conv.dilation[a];
    return (t < 0 || t % p.conv.stride[a] != 0 || t / p.conv.stride[a] >= P[a]) ? int64_t(-1) : t / p.conv.stride[a];
  };
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co) {
      const int64_t g = co / cout_g, ci_end = (g + 1) * cin_g - (bug == Bug::DropLastInputChannel ? 1 : 0);
      for (int64_t od = 0; od < O.d; ++od)
        for (int64_t oh = 0; oh < O.h; ++oh)
          for (int64_t ow = 0; ow < O.w; ++ow) {
            float acc = in.bias[size_t(co)];
            for (int64_t ci = g * cin_g; ci < ci_end; ++ci)
              for (int64_t kd = 0; kd < K.d; ++kd)
                for (int64_t kh = 0; kh < K.h; ++kh)
                  for (int64_t kw = 0; kw < K.w; ++kw) {
                    const int64_t id = src(0, od, kd), ih = src(1, oh, kh), iw = src(2, ow, kw);
                    if (id < 0 || ih < 0 || iw < 0) continue;
                    const float v = pooled[size_t((((n * p.in_channels + ci) * P.d + id) * P.h + ih) * P.w + iw)];
                    const float w = in.weight[size_t(((ci * cout_g + co % cout_g) * K.d + kd) * K.h * K.w + kh * K.w + kw)];
                    acc = std::fma(v, w, acc);
                  }
            z[size_t((((n * p.out_channels + co) * O.d + od) * O.h + oh) * O.w + ow)] =
                std::min(std::max(acc, lo), hi);
          }
    }
  std::vector<float> out(z.size());
  for (int64_t r = 0; r < p.batch * p.out_channels; ++r) {
    const float* row = z.data() + r * S;
    float m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < S; ++i) {
      if (row[i] > m) {
        sum = sum * std::exp(m - row[i]) + 1.0f;
        m = row[i];
      } else {
        sum += std::exp(row[i] - m);
      }
    }
    const float scale = in.scale[size_t(r % p.out_channels)];
    for (int64_t i = 0; i < S; ++i) out[size_t(r * S + i)] = std::exp(row[i] - m) / sum * scale;
  }
  return out;
}

/// Problems covering every parameter (groups, dilation, per-axis strides and paddings,
/// ceil_mode, count_include_pad, a clamp with min > max).
std::vector<Problem38> varied_problems() {
  std::vector<Problem38> v;
  v.push_back(small_problem());
  Problem38 p = small_problem();
  p.in_channels = 4;
  p.out_channels = 6;
  p.in_size = {5, 6, 7};
  p.pool.kernel_size = {1, 2, 3};
  p.pool.stride = Triple{1, 1, 2};
  p.pool.padding = {0, 1, 1};
  p.pool.ceil_mode = true;
  p.pool.count_include_pad = false;
  p.conv.kernel_size = {2, 3, 3};
  p.conv.stride = {1, 2, 3};
  p.conv.padding = {0, 1, 1};
  p.conv.output_padding = {0, 1, 2};
  p.conv.dilation = {1, 2, 1};
  p.conv.groups = 2;
  p.clamp_min = -0.2;
  p.clamp_max = 0.3;
  p.seed = 7;
  v.push_back(p);
  p = small_problem();
  p.pool.kernel_size = Triple::cube(3);
  p.pool.stride = Triple::cube(2);
  p.pool.padding = Triple::cube(1);
  p.clamp_min = -10;
  p.clamp_max = 10;
  p.seed = 11;
  v.push_back(p);
  p = small_problem();
  p.clamp_min = 2;  // > clamp_max: everything becomes clamp_max
  p.clamp_max = 1;
  v.push_back(p);
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Output sizes.

TEST(P38Shapes, KernelBench) {
  const Problem38 p = Problem38::kernelbench();
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.pooled_size(), (Triple{16, 32, 32}));
  EXPECT_EQ(p.out_size(), (Triple{32, 64, 64}));
  EXPECT_EQ(p.spatial(), 131072);
  EXPECT_EQ(p.x_elems(), 134217728);
  EXPECT_EQ(p.out_elems(), 268435456);
  EXPECT_EQ(p.weight_elems(), 55296);
  // Taps that land, per axis: d 15 + 16 + 16 = 47, h and w 31 + 32 + 32 = 95.
  EXPECT_DOUBLE_EQ(p.conv_macs(), 32.0 * 32 * 64 * 47 * 95 * 95);
  EXPECT_EQ(p.distribution, p38::Distribution::Uniform);
  EXPECT_EQ(p.clamp_min, 0.0);
  EXPECT_EQ(p.clamp_max, 1.0);
}

TEST(P38Shapes, PooledSizeFloorAndCeil) {
  struct Case { int64_t in, k, s, pad; bool ceil; int64_t out; };
  for (const Case& c : {Case{32, 2, 2, 0, false, 16}, Case{5, 2, 2, 0, false, 2}, Case{5, 2, 2, 0, true, 3},
                        Case{5, 2, 2, 1, false, 3},
                        Case{5, 2, 2, 1, true, 3},  // the 4th window would start in the right padding
                        Case{6, 3, 2, 1, false, 3}, Case{6, 3, 2, 1, true, 4}, Case{6, 3, 2, 0, true, 3},
                        Case{6, 3, 2, 0, false, 2}, Case{1, 1, 1, 0, false, 1}, Case{7, 3, 3, 1, true, 3}})
    EXPECT_EQ(p38::pool_out_size(c.in, c.k, c.s, c.pad, c.ceil), c.out)
        << "in " << c.in << " kernel " << c.k << " stride " << c.s << " padding " << c.pad << " ceil " << c.ceil;
}

TEST(P38Shapes, ConvTransposeSize) {
  EXPECT_EQ(p38::conv_transpose_out_size(16, 3, 2, 1, 1, 1), 32);
  EXPECT_EQ(p38::conv_transpose_out_size(32, 3, 2, 1, 1, 1), 64);
  EXPECT_EQ(p38::conv_transpose_out_size(4, 3, 1, 0, 0, 2), 8);
  EXPECT_EQ(p38::conv_transpose_out_size(3, 2, 3, 0, 2, 1), 10);
  EXPECT_EQ(p38::conv_transpose_out_size(2, 3, 1, 2, 0, 1), 0);
  EXPECT_THROW(p38::conv_transpose_out_size(int64_t(1) << 62, 3, 4, 0, 0, 1), p38::InvalidProblem);
}

TEST(P38Shapes, TapsPerPositionSumToTheMacCount) {
  for (const Problem38& p : varied_problems()) {
    double taps = 0;
    for (int64_t t : p38::taps_per_position(p)) taps += double(t);
    EXPECT_DOUBLE_EQ(double(p.batch * p.in_channels * p.out_per_group()) * taps, p.conv_macs()) << p.describe();
  }
  Problem38 p = Problem38::kernelbench();
  p.in_size = {2, 2, 32};  // pooled (1, 1, 16), output (2, 2, 32)
  const std::vector<int64_t> t = p38::taps_per_position(p);
  // d and h (one input, two outputs): one tap each. w: even outputs take tap 1 only, odd ones
  // taps 0 and 2, except the last (31), whose tap 0 would read input 16 of 16.
  for (int64_t ow = 0; ow < 32; ++ow) EXPECT_EQ(t[size_t(3 * 32 + ow)], (ow % 2 == 1 && ow != 31) ? 2 : 1) << ow;
}

// ---------------------------------------------------------------------------------------------
// Validation: each rule accepted at its edge and rejected past it.

TEST(P38Validate, PositiveSizes) {
  Problem38 p = small_problem();
  p.batch = 1;
  EXPECT_NO_THROW(p.validate());
  p.batch = 0;
  expect_invalid(p, {"batch", "0"});
  p = small_problem();
  p.in_channels = 0;
  expect_invalid(p, {"in_channels", "0"});
  p = small_problem();
  p.out_channels = 0;
  expect_invalid(p, {"out_channels", "0"});
  p = small_problem();
  p.in_size = {0, 6, 5};
  expect_invalid(p, {"in_size", "(0, 6, 5)"});
}

TEST(P38Validate, PoolKernelStridePadding) {
  Problem38 p = small_problem();
  p.pool.kernel_size = {1, 2, 2};
  EXPECT_NO_THROW(p.validate());
  p.pool.kernel_size = {0, 2, 2};
  expect_invalid(p, {"pool.kernel_size", "(0, 2, 2)", "greater than zero"});
  p = small_problem();
  p.pool.stride = Triple{1, 1, 1};
  EXPECT_NO_THROW(p.validate());
  p.pool.stride = Triple{1, 0, 1};
  expect_invalid(p, {"pool.stride", "(1, 0, 1)"});
  p = small_problem();
  p.pool.padding = {1, 1, 1};  // kernel 2: at most 1
  EXPECT_NO_THROW(p.validate());
  p.pool.padding = {1, 2, 1};
  expect_invalid(p, {"pool.padding", "(1, 2, 1)", "half"});
  p = small_problem();
  p.pool.kernel_size = Triple::cube(3);
  p.pool.padding = {0, 0, 1};  // 3/2 = 1
  EXPECT_NO_THROW(p.validate());
  p.pool.padding = {0, 0, 2};
  expect_invalid(p, {"pool.padding", "(0, 0, 2)"});
  p = small_problem();
  p.pool.padding = {0, -1, 0};
  expect_invalid(p, {"pool.padding", "-1", "non-negative"});
}

TEST(P38Validate, PoolInputAtLeastTheWindow) {
  Problem38 p = small_problem();
  p.in_size = {2, 6, 5};  // pool kernel 2: pooled depth 1
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.pooled_size().d, 1);
  p.in_size = {1, 6, 5};
  p.pool.padding = {1, 0, 0};  // padding does not help: avg_pool3d compares the input itself
  expect_invalid(p, {"in_size", "(1, 6, 5)", "pool.kernel_size", "smaller than kernel size"});
}

TEST(P38Validate, ConvGroups) {
  Problem38 p = small_problem();
  p.in_channels = 4;
  p.out_channels = 6;
  p.conv.groups = 2;
  EXPECT_NO_THROW(p.validate());
  p.conv.groups = 0;
  expect_invalid(p, {"conv.groups", "0"});
  p.conv.groups = 2;
  p.in_channels = 3;
  expect_invalid(p, {"in_channels 3", "conv.groups 2"});
  p.in_channels = 4;
  p.out_channels = 5;
  expect_invalid(p, {"out_channels 5", "conv.groups 2"});
}

TEST(P38Validate, ConvKernelStridePaddingDilation) {
  Problem38 p = small_problem();
  p.conv.kernel_size = {0, 3, 3};
  expect_invalid(p, {"conv.kernel_size", "(0, 3, 3)"});
  p = small_problem();
  p.conv.stride = {1, 1, 1};
  p.conv.output_padding = {0, 0, 0};
  EXPECT_NO_THROW(p.validate());
  p.conv.stride = {1, 0, 1};
  expect_invalid(p, {"conv.stride", "(1, 0, 1)"});
  p = small_problem();
  p.conv.padding = {0, -1, 0};
  expect_invalid(p, {"conv.padding", "-1", "negative padding"});
  p = small_problem();
  p.conv.output_padding = {-1, 0, 0};
  expect_invalid(p, {"conv.output_padding", "-1"});
  p = small_problem();
  p.conv.dilation = {1, 1, 0};
  expect_invalid(p, {"conv.dilation", "(1, 1, 0)"});
}

TEST(P38Validate, OutputPaddingBelowStrideOrDilation) {
  Problem38 p = small_problem();  // stride 2
  p.conv.output_padding = {0, 0, 1};
  EXPECT_NO_THROW(p.validate());
  p.conv.output_padding = {0, 0, 2};
  expect_invalid(p, {"conv.output_padding", "(0, 0, 2)", "conv.stride", "conv.dilation"});
  p.conv.stride = {2, 2, 1};
  p.conv.dilation = {1, 1, 3};  // smaller than the dilation is enough
  EXPECT_NO_THROW(p.validate());
  p.conv.output_padding = {0, 0, 3};
  expect_invalid(p, {"conv.output_padding", "(0, 0, 3)"});
}

TEST(P38Validate, ConvOutputAtLeastOne) {
  Problem38 p = small_problem();
  p.in_size = {2, 6, 5};  // pooled depth 1
  p.conv.stride = Triple::cube(1);
  p.conv.output_padding = Triple::cube(0);
  p.conv.padding = {1, 0, 0};  // depth: 0 - 2 + 2 + 0 + 1 = 1
  EXPECT_NO_THROW(p.validate());
  EXPECT_EQ(p.out_size().d, 1);
  p.conv.padding = {2, 0, 0};  // -1
  expect_invalid(p, {"output size", "(-1, 5, 4)", "conv.padding"});
}

TEST(P38Validate, ClampAndOverflow) {
  Problem38 p = small_problem();
  p.clamp_min = 2;  // torch.clamp accepts min > max
  p.clamp_max = 1;
  EXPECT_NO_THROW(p.validate());
  p.clamp_min = NAN;
  expect_invalid(p, {"clamp_min"});
  p = small_problem();
  p.batch = int64_t(1) << 40;
  p.in_channels = int64_t(1) << 20;
  expect_invalid(p, {"x elements", "overflows int64"});
  EXPECT_EQ(p38::distribution_from_string("exact"), p38::Distribution::Exact);
  EXPECT_THROW(p38::distribution_from_string("normal"), p38::InvalidProblem);
}

// ---------------------------------------------------------------------------------------------
// The oracle on cases checkable by hand.

TEST(P38Oracle, ZeroInputsGiveExactlyUniform) {
  const Problem38 p = small_problem();
  p38::Inputs in = p38::make_inputs(p);
  std::fill(in.x.begin(), in.x.end(), 0.0f);
  std::fill(in.bias.begin(), in.bias.end(), 0.0f);
  const p38::Reference ref = p38::reference(p, in);
  const double S = double(p.spatial());
  for (size_t i = 0; i < ref.out.size(); ++i) {
    ASSERT_EQ(ref.z[i], 0.0) << i;
    ASSERT_EQ(ref.out[i], 1.0 / S) << i;
  }
  for (double s : ref.row_sum) EXPECT_EQ(s, S);
}

TEST(P38Oracle, PoolDivisorsAsPyTorch) {
  Problem38 p;
  p.batch = p.in_channels = p.out_channels = 1;
  p.in_size = {1, 1, 6};
  p.pool.kernel_size = {1, 1, 3};
  p.pool.stride = Triple{1, 1, 2};
  p.pool.ceil_mode = true;  // windows [0,3), [2,5), [4,6): the last is cut at the input's end
  p.conv = {};
  p.conv.kernel_size = Triple::cube(1);
  p.conv.stride = Triple::cube(1);
  p.conv.padding = p.conv.output_padding = Triple::cube(0);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(p38::avg_pool3d(p, x), (std::vector<double>{2.0, 4.0, 5.5}));

  p.in_size = {1, 1, 4};
  p.pool.stride = Triple{1, 1, 1};
  p.pool.padding = {0, 0, 1};
  p.pool.ceil_mode = false;  // windows [-1,2), [0,3), [1,4), [2,5)
  const std::vector<float> x4 = {1, 2, 3, 4};
  EXPECT_EQ(p38::avg_pool3d(p, x4), (std::vector<double>{3.0 / 3, 2.0, 3.0, 7.0 / 3}));
  p.pool.count_include_pad = false;
  EXPECT_EQ(p38::avg_pool3d(p, x4), (std::vector<double>{1.5, 2.0, 3.0, 3.5}));
}

TEST(P38Oracle, OneChannelUnitKernelByHand) {
  // x[d][h][w] = 8d + 4h + w on 2x2x4, AvgPool3d(2): pooled (1, 1, 2) = (6.5, 8.5). A 1x1x1
  // ConvTranspose3d with weight 0.5, bias 0.25 and stride 2 along w: outputs at w = 0, 2 get
  // 0.5*pooled + 0.25 = 3.5, 4.5; w = 1 gets the bias alone.
  Problem38 p;
  p.batch = p.in_channels = p.out_channels = 1;
  p.in_size = {2, 2, 4};
  p.conv.kernel_size = Triple::cube(1);
  p.conv.stride = {1, 1, 2};
  p.conv.padding = p.conv.output_padding = Triple::cube(0);
  p.clamp_min = 0;
  p.clamp_max = 10;
  p38::Inputs in;
  for (int d = 0; d < 2; ++d)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 4; ++w) in.x.push_back(float(8 * d + 4 * h + w));
  in.weight = {0.5f};
  in.bias = {0.25f};
  in.scale = {2.0f};
  const p38::Reference ref = p38::reference(p, in);
  EXPECT_EQ(p.out_size(), (Triple{1, 1, 3}));
  EXPECT_EQ(ref.pooled, (std::vector<double>{6.5, 8.5}));
  EXPECT_EQ(ref.z, (std::vector<double>{3.5, 0.25, 4.5}));
  const double sum = std::exp(3.5 - 4.5) + std::exp(0.25 - 4.5) + 1.0;
  EXPECT_EQ(ref.row_max[0], 4.5);
  EXPECT_DOUBLE_EQ(ref.row_sum[0], sum);
  EXPECT_DOUBLE_EQ(ref.out[0], 2.0 * std::exp(-1.0) / sum);
  EXPECT_DOUBLE_EQ(ref.out[1], 2.0 * std::exp(-4.25) / sum);
  EXPECT_DOUBLE_EQ(ref.out[2], 2.0 / sum);
}

TEST(P38Oracle, ClampSaturationGivesUniform) {
  Problem38 p = small_problem();
  p38::Inputs in = p38::make_inputs(p);
  std::fill(in.bias.begin(), in.bias.end(), 100.0f);  // every z far above clamp_max = 1
  p38::Reference ref = p38::reference(p, in);
  const double S = double(p.spatial());
  for (size_t i = 0; i < ref.out.size(); ++i) {
    ASSERT_GT(ref.conv[i], 1.0);
    ASSERT_EQ(ref.z[i], 1.0);
    ASSERT_EQ(ref.out[i], 1.0 / S);
  }
  // clamp_min > clamp_max: torch.clamp sets everything to clamp_max, whatever z was.
  p.clamp_min = 3;
  p.clamp_max = -1;
  in = p38::make_inputs(p);
  ref = p38::reference(p, in);
  for (size_t i = 0; i < ref.out.size(); ++i) {
    ASSERT_EQ(ref.z[i], -1.0);
    ASSERT_EQ(ref.out[i], 1.0 / S);
  }
}

TEST(P38Oracle, ExactInputsMakeEveryFp32SumExact) {
  Problem38 p = small_problem();
  p.in_channels = 4;
  p.out_channels = 6;
  p.conv.groups = 2;
  p.pool.padding = {1, 0, 1};  // count_include_pad: every divisor is still 2 per axis
  p.distribution = p38::Distribution::Exact;
  const p38::Inputs in = p38::make_inputs(p);
  const p38::Reference ref = p38::reference(p, in);
  const Triple I = p.in_size, P = p.pooled_size(), O = p.out_size(), K = p.conv.kernel_size;
  const Triple ps = p.pool.effective_stride();
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group();
  // The pool folded into the weights: z = bias + sum over ci, taps, window of x * (w / divisor),
  // in fp32: a different order and grouping from the oracle's, and still bit for bit the same.
  int64_t inside = 0, fractional = 0;
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co)
      for (int64_t od = 0; od < O.d; ++od)
        for (int64_t oh = 0; oh < O.h; ++oh)
          for (int64_t ow = 0; ow < O.w; ++ow) {
            float acc = in.bias[size_t(co)];
            const int64_t o[3] = {od, oh, ow};
            const int64_t g = co / cout_g;
            for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci)
              for (int64_t kd = 0; kd < K.d; ++kd)
                for (int64_t kh = 0; kh < K.h; ++kh)
                  for (int64_t kw = 0; kw < K.w; ++kw) {
                    const int64_t k[3] = {kd, kh, kw};
                    int64_t src[3], lo[3], hi[3];
                    bool valid = true;
                    int64_t q = 1;
                    for (int a = 0; a < 3 && valid; ++a) {
                      const int64_t t = o[a] + p.conv.padding[a] - k[a] * p.conv.dilation[a];
                      valid = t >= 0 && t % p.conv.stride[a] == 0 && t / p.conv.stride[a] < P[a];
                      if (!valid) break;
                      src[a] = t / p.conv.stride[a];
                      const int64_t start = src[a] * ps[a] - p.pool.padding[a];
                      lo[a] = std::max<int64_t>(start, 0);
                      hi[a] = std::min(start + p.pool.kernel_size[a], I[a]);
                      q *= p38::pool_divisor(p, a, src[a]);
                    }
                    if (!valid) continue;
                    const float w = in.weight[size_t(((ci * cout_g + co % cout_g) * K.d + kd) * K.h * K.w + kh * K.w + kw)];
                    const float wq = w / float(q);
                    for (int64_t d = lo[0]; d < hi[0]; ++d)
                      for (int64_t h = lo[1]; h < hi[1]; ++h)
                        for (int64_t x = lo[2]; x < hi[2]; ++x)
                          acc += in.x[size_t((((n * p.in_channels + ci) * I.d + d) * I.h + h) * I.w + x)] * wq;
                  }
            const size_t i = size_t((((n * p.out_channels + co) * O.d + od) * O.h + oh) * O.w + ow);
            ASSERT_EQ(double(acc), ref.conv[i]) << "output " << i;
            inside += ref.conv[i] > p.clamp_min && ref.conv[i] < p.clamp_max;
            fractional += ref.conv[i] != std::floor(ref.conv[i]);
          }
  // Not vacuous: many values fall inside the clamp range and most are not integers.
  EXPECT_GT(inside, int64_t(ref.conv.size() / 10));
  EXPECT_GT(fractional, int64_t(ref.conv.size() / 2));
  // The straightforward fp32 pipeline's z is exact too, so its output passes with e_z = 0.
  const p38::Agreement a = p38::compare(fp32_pipeline(p, in), ref.out, p38::output_tolerance(p, ref));
  EXPECT_TRUE(a.pass()) << a.summary();
}

TEST(P38Oracle, ExactInputsRefuseWhatTheyCannotMakeExact) {
  Problem38 p = small_problem();
  p.distribution = p38::Distribution::Exact;
  p.pool.kernel_size = Triple::cube(3);  // divisor 27
  try {
    p38::make_inputs(p);
    ADD_FAILURE() << "exact inputs accepted a pool divisor of 3 per axis";
  } catch (const p38::InvalidProblem& e) {
    EXPECT_NE(std::string(e.what()).find("power of two"), std::string::npos) << e.what();
  }
  p = small_problem();
  p.in_channels = 1 << 16;  // 65536 * 27 taps: the convolution sum outgrows fp32's 24 bits
  try {
    p38::exact_check(p);
    ADD_FAILURE() << "exact inputs accepted in_channels 65536";
  } catch (const p38::InvalidProblem& e) {
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Tolerances: they pass a correct fp32 pipeline and can fail.

TEST(P38Tolerance, Fp32PipelinePassesAndABugFails) {
  for (const Problem38& p : varied_problems()) {
    const p38::Inputs in = p38::make_inputs(p);
    const p38::Reference ref = p38::reference(p, in);
    const std::vector<double> tol = p38::output_tolerance(p, ref);
    const p38::Agreement good = p38::compare(fp32_pipeline(p, in), ref.out, tol);
    EXPECT_TRUE(good.pass()) << good.summary() << "\n  " << p.describe();
    std::printf("fp32 pipeline: %s\n", good.summary().c_str());
    EXPECT_GT(good.max_abs, 0.0) << "the fp32 pipeline agrees exactly: the comparison tests nothing";
    if (p.clamp_min > p.clamp_max) continue;  // every output is uniform: no bug can show
    const p38::Agreement bad = p38::compare(fp32_pipeline(p, in, Bug::DropLastInputChannel), ref.out, tol);
    EXPECT_FALSE(bad.pass()) << "dropping an input channel passed: " << bad.summary() << "\n  " << p.describe();
  }
}

TEST(P38Tolerance, PerturbationWithinTheBoundPassesBeyondItFails) {
  Problem38 p = small_problem();
  p.clamp_min = -10;  // nothing clamps: every z reaches the softmax
  p.clamp_max = 10;
  const p38::Inputs in = p38::make_inputs(p);
  const p38::Reference ref = p38::reference(p, in);
  const std::vector<double> tol = p38::output_tolerance(p, ref), ez = p38::z_error_bound(p, ref);
  const int64_t S = p.spatial();

  // Every z moved by its full e_z, with signs that favour element 0 of each row: inside the
  // tolerance, and inside step 3's bound s*(exp(2e) - 1) alone.
  p38::Reference moved = ref;
  for (size_t i = 0; i < moved.z.size(); ++i) moved.z[i] += (i % size_t(S) == 0 ? 1.0 : -1.0) * ez[i];
  p38::softmax_scale(p, moved);
  const p38::Agreement within = p38::compare(moved.out, ref.out, tol);
  EXPECT_TRUE(within.pass()) << within.summary();
  for (int64_t r = 0; r < p.batch * p.out_channels; ++r) {
    double e = 0;
    for (int64_t i = 0; i < S; ++i) e = std::max(e, ez[size_t(r * S + i)]);
    const size_t i0 = size_t(r * S);
    EXPECT_LE(std::fabs(moved.out[i0] - ref.out[i0]), ref.out[i0] * std::expm1(2 * e) * (1 + 1e-9)) << r;
  }
  EXPECT_GT(within.max_abs, 0.0);

  // One z moved by three times what its tolerance allows (relative change about delta*(1 - s)).
  const size_t k = size_t(S + 5);
  const double allowed = tol[k] / ref.out[k];
  ASSERT_GT(allowed, 2 * ez[k]);
  p38::Reference bumped = ref;
  bumped.z[k] += 3 * allowed / (1 - ref.out[k]);
  p38::softmax_scale(p, bumped);
  const p38::Agreement beyond = p38::compare(bumped.out, ref.out, tol);
  EXPECT_FALSE(beyond.pass()) << beyond.summary();
  EXPECT_EQ(beyond.worst_index, int64_t(k));
  EXPECT_GT(beyond.worst_ratio, 2.0);
}

TEST(P38Tolerance, NaNFails) {
  const Problem38 p = small_problem();
  const p38::Reference ref = p38::reference(p, p38::make_inputs(p));
  const std::vector<double> tol = p38::output_tolerance(p, ref);
  EXPECT_TRUE(p38::compare(ref.out, ref.out, tol).pass());
  std::vector<double> poisoned = ref.out;
  poisoned[17] = NAN;  // an output the kernel never wrote
  const p38::Agreement a = p38::compare(poisoned, ref.out, tol);
  EXPECT_FALSE(a.pass());
  EXPECT_EQ(a.nan_count, 1);
  EXPECT_EQ(a.failures, 1);
  EXPECT_EQ(a.worst_index, 17);
  std::vector<double> ref_nan = ref.out;
  ref_nan[17] = NAN;
  EXPECT_FALSE(p38::compare(ref.out, ref_nan, tol).pass());  // a number where the reference has NaN
  EXPECT_TRUE(p38::compare(poisoned, ref_nan, tol).pass());  // NaN on both sides agrees
  poisoned.pop_back();
  EXPECT_THROW(p38::compare(poisoned, ref.out, tol), std::invalid_argument);
}
