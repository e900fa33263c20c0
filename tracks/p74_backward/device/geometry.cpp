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

unsigned grid_for(int64_t n, int block, const char* kernel) {
  const int64_t blocks = (n + block - 1) / block;
  if (blocks > INT_MAX)
    throw InvalidProblem("invalid problem: " + std::string(kernel) + " would need " + std::to_string(blocks) +
                         " blocks, more than CUDA's 2^31 - 1");
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

}  // namespace ladder::p74
