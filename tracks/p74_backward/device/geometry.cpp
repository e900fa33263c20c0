#include "geometry.hpp"

#include <climits>
#include <string>

namespace ladder::p74 {

namespace {
int narrow(int64_t v, const char* what) {
  if (v > INT_MAX || v < INT_MIN)
    throw InvalidProblem("invalid problem: " + std::string(what) + " = " + std::to_string(v) +
                         " does not fit in an int, which the kernels index with");
  return static_cast<int>(v);
}
}  // namespace

Geometry make_geometry(const Problem74& p) {
  p.validate();
  Geometry g{};
  g.batch = narrow(p.batch, "batch");
  g.in_channels = narrow(p.in_channels, "in_channels");
  g.out_channels = narrow(p.out_channels, "out_channels");
  g.groups = narrow(p.conv.groups, "groups");
  g.in_per_group = g.in_channels / g.groups;
  g.out_per_group = g.out_channels / g.groups;
  const Triple cs = p.conv_size(), os = p.out_size(), ps = p.pool.effective_stride();
  for (int a = 0; a < 3; ++a) {
    g.in[a] = narrow(p.in_size[a], "in_size");
    g.conv[a] = narrow(cs[a], "conv_size");
    g.out[a] = narrow(os[a], "out_size");
    g.kernel[a] = narrow(p.conv.kernel_size[a], "conv.kernel_size");
    g.stride[a] = narrow(p.conv.stride[a], "conv.stride");
    g.padding[a] = narrow(p.conv.padding[a], "conv.padding");
    g.dilation[a] = narrow(p.conv.dilation[a], "conv.dilation");
    g.pool_kernel[a] = narrow(p.pool.kernel_size[a], "pool.kernel_size");
    g.pool_stride[a] = narrow(ps[a], "pool.stride");
    g.pool_padding[a] = narrow(p.pool.padding[a], "pool.padding");
    g.pool_dilation[a] = narrow(p.pool.dilation[a], "pool.dilation");
  }
  g.taps = narrow(p.conv_taps(), "conv taps");
  g.pool_window = narrow(p.pool_window(), "pool window");
  g.slope = static_cast<float>(p.negative_slope);
  g.in_spatial = int64_t(g.in[0]) * g.in[1] * g.in[2];
  g.conv_spatial = int64_t(g.conv[0]) * g.conv[1] * g.conv[2];
  g.out_spatial = int64_t(g.out[0]) * g.out[1] * g.out[2];
  narrow(g.in_spatial, "D*H*W of x");
  narrow(g.conv_spatial, "D*H*W of the ConvTranspose3d output");
  g.x_elems = p.x_elems();
  g.conv_elems = p.conv_elems();
  g.out_elems = p.out_elems();
  g.weight_elems = p.weight_elems();
  return g;
}

std::string kernelbench_family_mismatch(const Problem74& p, const std::string& rung) {
  const auto all = [](const Triple& t, int64_t v) { return t.d == v && t.h == v && t.w == v; };
  const auto zero_or_one = [](int64_t v) { return v == 0 || v == 1; };
  const ConvTranspose3dParams& c = p.conv;
  const MaxPool3dParams& pool = p.pool;
  std::string got;
  if (!all(c.kernel_size, 3))
    got = "conv.kernel_size = " + c.kernel_size.str();
  else if (!all(c.stride, 2))
    got = "conv.stride = " + c.stride.str();
  else if (!all(c.padding, 1))
    got = "conv.padding = " + c.padding.str();
  else if (!all(c.dilation, 1))
    got = "conv.dilation = " + c.dilation.str();
  else if (!zero_or_one(c.output_padding.d) || !zero_or_one(c.output_padding.h) || !zero_or_one(c.output_padding.w))
    got = "conv.output_padding = " + c.output_padding.str();
  else if (c.groups != 1)
    got = "conv.groups = " + std::to_string(c.groups);
  else if (!all(pool.kernel_size, 2))
    got = "pool.kernel_size = " + pool.kernel_size.str();
  else if (!all(pool.effective_stride(), 2))
    got = "pool.stride = " + pool.effective_stride().str();
  else if (!all(pool.padding, 0))
    got = "pool.padding = " + pool.padding.str();
  else if (!all(pool.dilation, 1))
    got = "pool.dilation = " + pool.dilation.str();
  else if (pool.ceil_mode)
    got = "pool.ceil_mode = True";
  if (got.empty()) return "";
  return "rung " + rung +
         " handles only the KernelBench geometry family (ConvTranspose3d kernel_size 3, stride 2, padding 1, "
         "dilation 1, output_padding 0 or 1, groups 1; MaxPool3d kernel_size 2, stride 2, padding 0, dilation 1, "
         "ceil_mode False): got " +
         got;
}

unsigned grid_for(int64_t n, int block, const char* kernel) {
  const int64_t blocks = (n + block - 1) / block;
  if (blocks > INT_MAX)
    throw InvalidProblem("invalid problem: " + std::string(kernel) + " would need " + std::to_string(blocks) +
                         " blocks, more than CUDA's 2^31 - 1");
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

}  // namespace ladder::p74
