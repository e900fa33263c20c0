#include "geometry.hpp"

#include <limits>
#include <string>

#include "../oracle.hpp"

namespace ladder::p38 {

namespace {
int to_int(int64_t v, const char* what) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw InvalidProblem(std::string("invalid problem for the GPU rungs: ") + what + " = " + std::to_string(v) +
                         " does not fit in an int");
  return int(v);
}
}  // namespace

Geometry make_geometry(const Problem38& p) {
  p.validate();
  Geometry g{};
  g.batch = to_int(p.batch, "batch");
  g.in_channels = to_int(p.in_channels, "in_channels");
  g.out_channels = to_int(p.out_channels, "out_channels");
  g.groups = to_int(p.conv.groups, "groups");
  g.in_per_group = g.in_channels / g.groups;
  g.out_per_group = g.out_channels / g.groups;
  const Triple pooled = p.pooled_size(), out = p.out_size(), pstride = p.pool.effective_stride();
  for (int a = 0; a < 3; ++a) {
    g.in[a] = to_int(p.in_size[a], "input size");
    g.pooled[a] = to_int(pooled[a], "pooled size");
    g.out[a] = to_int(out[a], "output size");
    g.pool_kernel[a] = to_int(p.pool.kernel_size[a], "pool kernel_size");
    g.pool_stride[a] = to_int(pstride[a], "pool stride");
    g.pool_padding[a] = to_int(p.pool.padding[a], "pool padding");
    g.kernel[a] = to_int(p.conv.kernel_size[a], "kernel_size");
    g.stride[a] = to_int(p.conv.stride[a], "stride");
    g.padding[a] = to_int(p.conv.padding[a], "padding");
    g.dilation[a] = to_int(p.conv.dilation[a], "dilation");
  }
  g.count_include_pad = p.pool.count_include_pad;
  g.clamp_lo = float(clamp_lo(p));
  g.clamp_hi = float(clamp_hi(p));
  g.spatial = p.spatial();
  g.pooled_spatial = int64_t(pooled.d) * pooled.h * pooled.w;
  g.rows = int64_t(g.batch) * g.out_channels;
  g.taps = to_int(p.conv_taps(), "kernel volume");
  // The rungs index one sample's pooled tensor and one row with ints.
  to_int(g.pooled_spatial * g.in_channels, "pooled elements per sample");
  to_int(g.spatial, "output elements per row");
  return g;
}

}  // namespace ladder::p38
