#include "problem.hpp"

#include <cmath>
#include <optional>
#include <sstream>


namespace ladder::p38 {

namespace {

[[noreturn]] void reject(const std::string& what) { throw InvalidProblem("invalid problem: " + what); }

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) reject(std::string(what) + " overflows int64");
  return r;
}

using tracks::any_of;  // the shared parameter checks (tracks/shared/geometry3d.hpp)
using tracks::negative;
using tracks::non_positive;
using tracks::require;

}  // namespace

int64_t pool_out_size(int64_t in, int64_t kernel_size, int64_t stride, int64_t padding, bool ceil_mode) {
  // floor division (PyTorch's div_rtn) of in + 2*padding - kernel_size (+ stride - 1 for ceil).
  int64_t num = checked_add(in, checked_mul(2, padding, "pool padding"), "pooled size");
  num = checked_add(num, -kernel_size, "pooled size");
  if (ceil_mode) num = checked_add(num, stride - 1, "pooled size");
  int64_t q = num / stride;
  if (num % stride != 0 && num < 0) --q;
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * stride >= in + padding) --out;  // last window starts in the right padding
  return out;
}

Problem38 Problem38::kernelbench() { return Problem38{}; }

void Problem38::validate() const {
  // Our restrictions: PyTorch accepts batch 0 and out_channels 0 and returns empty tensors.
  if (batch <= 0) reject("batch must be positive, got " + std::to_string(batch) + " (empty outputs are not modelled)");
  // avg_pool3d: "Expected input's non-batch dimensions to have positive length".
  if (in_channels <= 0) reject("in_channels must be positive, got " + std::to_string(in_channels));
  require(!any_of(in_size, non_positive), "in_size", in_size, "AvgPool3d needs non-batch dimensions of positive length");

  // AvgPool3d (PyTorch's pool3d_shape_check for avg_pool3d, and the AvgPool3d page's note).
  const Triple ps = pool.effective_stride();
  require(!any_of(pool.kernel_size, non_positive), "pool.kernel_size", pool.kernel_size,
          "kernel size should be greater than zero");
  require(!any_of(ps, non_positive), "pool.stride", ps, "stride should be greater than zero");
  require(!any_of(pool.padding, negative), "pool.padding", pool.padding, "pad must be non-negative");
  for (int a = 0; a < 3; ++a) {
    // avg_pool3d also requires the input to be at least the window, padding notwithstanding.
    if (in_size[a] < pool.kernel_size[a])
      reject("in_size " + in_size.str() + " is smaller than pool.kernel_size " + pool.kernel_size.str() +
             " (avg_pool3d: input image smaller than kernel size)");
    if (pool.padding[a] > pool.kernel_size[a] / 2)
      reject("pool.padding " + pool.padding.str() + " exceeds half of pool.kernel_size " + pool.kernel_size.str() +
             " (AvgPool3d: pad should be at most half of effective kernel size)");
  }
  const Triple pooled = pooled_size();
  require(!any_of(pooled, non_positive), "pooled size", pooled,
          "AvgPool3d output size is too small (in_size " + in_size.str() + ")");

  validate_conv_transpose3d(conv, in_channels, out_channels);
  const Triple out = out_size();
  require(!any_of(out, non_positive), "ConvTranspose3d output size", out,
          "output size is too small (pooled size " + pooled.str() + ", conv.padding " + conv.padding.str() + ")");

  // torch.clamp accepts clamp_min > clamp_max (see problem.hpp); NaN bounds are our restriction.
  if (std::isnan(clamp_min) || std::isnan(clamp_max)) reject("clamp_min and clamp_max must not be NaN");

  // Every element count must fit in int64 (each call throws naming the tensor otherwise).
  (void)x_elems();
  (void)weight_elems();
  (void)out_elems();
}

Triple Problem38::pooled_size() const {
  const Triple s = pool.effective_stride();
  auto f = [&](int a) { return pool_out_size(in_size[a], pool.kernel_size[a], s[a], pool.padding[a], pool.ceil_mode); };
  return {f(0), f(1), f(2)};
}

Triple Problem38::out_size() const {
  const Triple in = pooled_size();
  auto f = [&](int a) {
    return conv_transpose_out_size(in[a], conv.kernel_size[a], conv.stride[a], conv.padding[a],
                                   conv.output_padding[a], conv.dilation[a]);
  };
  return {f(0), f(1), f(2)};
}

namespace {
int64_t volume(const Triple& t, const char* what) {
  return checked_mul(checked_mul(t.d, t.h, what), t.w, what);
}
}  // namespace

int64_t Problem38::x_elems() const {
  return checked_mul(checked_mul(batch, in_channels, "x elements"), volume(in_size, "x elements"), "x elements");
}
int64_t Problem38::pooled_elems() const {
  return checked_mul(checked_mul(batch, in_channels, "pooled elements"), volume(pooled_size(), "pooled elements"),
                     "pooled elements");
}
int64_t Problem38::weight_elems() const {
  return checked_mul(checked_mul(in_channels, out_per_group(), "weight elements"),
                     volume(conv.kernel_size, "weight elements"), "weight elements");
}
int64_t Problem38::out_elems() const {
  return checked_mul(checked_mul(batch, out_channels, "output elements"), spatial(), "output elements");
}
int64_t Problem38::spatial() const { return volume(out_size(), "output D*H*W"); }
int64_t Problem38::pool_window() const { return volume(pool.kernel_size, "pool window"); }
int64_t Problem38::conv_taps() const { return volume(conv.kernel_size, "conv taps"); }

double Problem38::conv_macs() const {
  const Triple in = pooled_size(), out = out_size();
  double taps_in_range[3] = {0, 0, 0};  // per axis: sum over taps k of the inputs i it maps inside
  for (int a = 0; a < 3; ++a)
    for (int64_t k = 0; k < conv.kernel_size[a]; ++k)
      for (int64_t i = 0; i < in[a]; ++i) {
        const int64_t o = i * conv.stride[a] - conv.padding[a] + k * conv.dilation[a];
        if (o >= 0 && o < out[a]) taps_in_range[a] += 1;
      }
  return double(batch) * double(in_channels) * double(out_per_group()) * taps_in_range[0] * taps_in_range[1] *
         taps_in_range[2];
}

std::string Problem38::describe() const {
  std::ostringstream s;
  s << "batch=" << batch << " in_channels=" << in_channels << " out_channels=" << out_channels
    << " input=" << in_size.d << "x" << in_size.h << "x" << in_size.w << " | AvgPool3d(kernel_size="
    << pool.kernel_size.str() << " stride=" << (pool.stride ? pool.stride->str() : std::string("None"))
    << " padding=" << pool.padding.str() << " ceil_mode=" << (pool.ceil_mode ? "True" : "False")
    << " count_include_pad=" << (pool.count_include_pad ? "True" : "False") << ") | ConvTranspose3d(kernel_size="
    << conv.kernel_size.str() << " stride=" << conv.stride.str() << " padding=" << conv.padding.str()
    << " output_padding=" << conv.output_padding.str() << " dilation=" << conv.dilation.str()
    << " groups=" << conv.groups << ") | clamp(" << clamp_min << ", " << clamp_max << ") | x~"
    << to_string(distribution) << " seed=" << seed << (random_scale ? " random_scale" : "");
  return s.str();
}

}  // namespace ladder::p38
