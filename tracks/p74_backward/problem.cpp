#include "problem.hpp"

#include <cmath>
#include <sstream>

namespace ladder::p74 {

namespace {

[[noreturn]] void reject(const std::string& what) { throw InvalidProblem("invalid problem: " + what); }

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) reject(std::string(what) + " overflows int64");
  return r;
}

bool any_non_positive(const Triple& t) { return tracks::any_of(t, tracks::non_positive); }
bool any_negative(const Triple& t) { return tracks::any_of(t, tracks::negative); }
using tracks::require;  // the shared parameter checks (tracks/shared/geometry3d.hpp)

int64_t volume(const Triple& t, const char* what) { return checked_mul(checked_mul(t.d, t.h, what), t.w, what); }

// True when window q of one axis has at least one position inside [0, in).
bool window_touches_input(int64_t q, int64_t in, int64_t kernel_size, int64_t stride, int64_t padding,
                          int64_t dilation) {
  for (int64_t j = 0; j < kernel_size; ++j) {
    const int64_t pos = q * stride - padding + j * dilation;
    if (pos >= 0 && pos < in) return true;
  }
  return false;
}

}  // namespace

int64_t max_pool_out_size(int64_t in, int64_t kernel_size, int64_t stride, int64_t padding, int64_t dilation,
                          bool ceil_mode) {
  // PyTorch's pooling_output_shape: floor division (div_rtn) of
  // in + 2*padding - dilation*(kernel_size - 1) - 1 (+ stride - 1 with ceil_mode), plus 1.
  const char* what = "MaxPool3d output size";
  int64_t num = checked_add(in, checked_mul(2, padding, what), what);
  num = checked_add(num, -checked_mul(dilation, kernel_size - 1, what), what);
  num = checked_add(num, -1, what);
  if (ceil_mode) num = checked_add(num, stride - 1, what);
  int64_t q = num / stride;
  if (num % stride != 0 && num < 0) --q;
  int64_t out = checked_add(q, 1, what);
  // ceil_mode drops a last window that would start in the right padding.
  if (ceil_mode && checked_mul(out - 1, stride, what) >= in + padding) --out;
  return out;
}

Problem74 Problem74::kernelbench() { return Problem74{}; }

void Problem74::validate() const {
  // Our restriction: PyTorch accepts batch 0 and returns an empty tensor.
  if (batch <= 0) reject("batch must be positive, got " + std::to_string(batch) + " (empty outputs are not modelled)");
  if (in_channels <= 0) reject("in_channels must be positive, got " + std::to_string(in_channels));
  require(!any_non_positive(in_size), "in_size", in_size, "every spatial size of x must be positive");

  // ConvTranspose3d: the module's and ATen's rules (tracks/shared), then a positive output.
  tracks::validate_conv_transpose3d(conv, in_channels, out_channels);
  const Triple cs = conv_size();
  require(!any_non_positive(cs), "ConvTranspose3d output size", cs,
          "output size is too small (in_size " + in_size.str() + ", conv.padding " + conv.padding.str() + ")");

  // MaxPool3d: PyTorch's pool3d_shape_check and pooling_output_shape.
  const Triple ps = pool.effective_stride();
  require(!any_non_positive(pool.kernel_size), "pool.kernel_size", pool.kernel_size,
          "kernel size should be greater than zero");
  require(!any_non_positive(ps), "pool.stride", ps, "stride should be greater than zero");
  require(!any_non_positive(pool.dilation), "pool.dilation", pool.dilation, "dilation should be greater than zero");
  require(!any_negative(pool.padding), "pool.padding", pool.padding, "pad must be non-negative");
  for (int a = 0; a < 3; ++a)
    if (pool.padding[a] > pool.kernel_size[a] / 2)
      reject("pool.padding " + pool.padding.str() + " exceeds half of pool.kernel_size " + pool.kernel_size.str() +
             " (MaxPool3d allows at most kernel_size/2, rounded down, per axis)");
  const Triple os = out_size();
  require(!any_non_positive(os), "MaxPool3d output size", os,
          "output size is too small (conv output " + cs.str() + ", pool.kernel_size " + pool.kernel_size.str() +
              ", pool.dilation " + pool.dilation.str() + ")");
  // Our restriction: a window made only of padding has no maximum (PyTorch outputs -inf there).
  for (int a = 0; a < 3; ++a)
    for (int64_t q = 0; q < os[a]; ++q)
      if (!window_touches_input(q, cs[a], pool.kernel_size[a], ps[a], pool.padding[a], pool.dilation[a]))
        reject("pool window " + std::to_string(q) + " of axis " + "dhw"[a] + " covers only padding (pool.padding " +
               pool.padding.str() + ", pool.dilation " + pool.dilation.str() + "); not modelled");

  if (!std::isfinite(negative_slope)) reject("negative_slope must be finite, got " + std::to_string(negative_slope));

  // Every element count must fit in int64 (each call throws naming the tensor otherwise).
  (void)x_elems();
  (void)weight_elems();
  (void)conv_elems();
  (void)out_elems();
}

Triple Problem74::conv_size() const {
  auto f = [&](int a) {
    return tracks::conv_transpose_out_size(in_size[a], conv.kernel_size[a], conv.stride[a], conv.padding[a],
                                        conv.output_padding[a], conv.dilation[a]);
  };
  return {f(0), f(1), f(2)};
}

Triple Problem74::out_size() const {
  const Triple cs = conv_size(), ps = pool.effective_stride();
  auto f = [&](int a) {
    return max_pool_out_size(cs[a], pool.kernel_size[a], ps[a], pool.padding[a], pool.dilation[a], pool.ceil_mode);
  };
  return {f(0), f(1), f(2)};
}

int64_t Problem74::x_elems() const {
  return checked_mul(checked_mul(batch, in_channels, "x elements"), volume(in_size, "x elements"), "x elements");
}
int64_t Problem74::weight_elems() const {
  return checked_mul(checked_mul(in_channels, out_per_group(), "weight elements"),
                     volume(conv.kernel_size, "weight elements"), "weight elements");
}
int64_t Problem74::conv_elems() const {
  return checked_mul(checked_mul(batch, out_channels, "conv elements"), volume(conv_size(), "conv elements"),
                     "conv elements");
}
int64_t Problem74::out_elems() const {
  return checked_mul(checked_mul(batch, out_channels, "output elements"), volume(out_size(), "output elements"),
                     "output elements");
}
int64_t Problem74::pool_window() const { return volume(pool.kernel_size, "pool window"); }
int64_t Problem74::conv_taps() const { return volume(conv.kernel_size, "conv taps"); }

double Problem74::conv_macs() const {
  const Triple out = conv_size();
  double taps_in_range[3] = {0, 0, 0};  // per axis: pairs (tap k, input i) that land inside the output
  for (int a = 0; a < 3; ++a)
    for (int64_t k = 0; k < conv.kernel_size[a]; ++k)
      for (int64_t i = 0; i < in_size[a]; ++i) {
        const int64_t o = i * conv.stride[a] - conv.padding[a] + k * conv.dilation[a];
        if (o >= 0 && o < out[a]) taps_in_range[a] += 1;
      }
  return double(batch) * double(in_channels) * double(out_per_group()) * taps_in_range[0] * taps_in_range[1] *
         taps_in_range[2];
}

std::string Problem74::describe() const {
  std::ostringstream s;
  s << "batch=" << batch << " in_channels=" << in_channels << " out_channels=" << out_channels
    << " input=" << in_size.d << "x" << in_size.h << "x" << in_size.w << " | ConvTranspose3d(kernel_size="
    << conv.kernel_size.str() << " stride=" << conv.stride.str() << " padding=" << conv.padding.str()
    << " output_padding=" << conv.output_padding.str() << " dilation=" << conv.dilation.str()
    << " groups=" << conv.groups << ") | LeakyReLU(negative_slope=" << negative_slope
    << ") | * multiplier | LeakyReLU | MaxPool3d(kernel_size=" << pool.kernel_size.str()
    << " stride=" << (pool.stride ? pool.stride->str() : std::string("None")) << " padding=" << pool.padding.str()
    << " dilation=" << pool.dilation.str() << " ceil_mode=" << (pool.ceil_mode ? "True" : "False")
    << ") | inputs~" << tracks::to_string(distribution) << " seed=" << seed;
  return s.str();
}

}  // namespace ladder::p74
