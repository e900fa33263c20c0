#include "rows.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ladder::p38 {

RowCase row_case(const Problem38& p, const Inputs& in, int64_t n, int64_t c) {
  if (n < 0 || n >= p.batch || c < 0 || c >= p.out_channels)
    throw std::out_of_range("row_case: row (" + std::to_string(n) + ", " + std::to_string(c) + ") is outside " +
                            p.describe());
  RowCase r;
  r.problem = p;
  r.problem.batch = 1;
  r.problem.in_channels = p.in_per_group();
  r.problem.out_channels = 1;
  r.problem.conv.groups = 1;
  const int64_t group = c / p.out_per_group(), c_local = c % p.out_per_group();
  const int64_t plane = p.in_size.d * p.in_size.h * p.in_size.w, taps = p.conv_taps();
  const auto x0 = in.x.begin() + (n * p.in_channels + group * p.in_per_group()) * plane;
  r.inputs.x.assign(x0, x0 + p.in_per_group() * plane);
  for (int64_t ci = 0; ci < p.in_per_group(); ++ci) {
    const auto w0 = in.weight.begin() + ((group * p.in_per_group() + ci) * p.out_per_group() + c_local) * taps;
    r.inputs.weight.insert(r.inputs.weight.end(), w0, w0 + taps);
  }
  r.inputs.bias = {in.bias[size_t(c)]};
  r.inputs.scale = {in.scale[size_t(c)]};
  return r;
}

std::vector<int64_t> rows_to_check(const Problem38& p, int64_t full_limit, int samples) {
  const int64_t rows = p.batch * p.out_channels;
  std::vector<int64_t> out;
  if (p.out_elems() <= full_limit || rows <= samples) {
    for (int64_t r = 0; r < rows; ++r) out.push_back(r);
    return out;
  }
  for (int i = 0; i < samples; ++i) out.push_back(samples == 1 ? 0 : i * (rows - 1) / (samples - 1));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ladder::p38
