#include "problem.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <utility>

#include "conv_shape.hpp"  // conv_transpose_out_size
#include "tap_range.hpp"

namespace ladder {

Problem Problem::kernelbench() { return Problem{}; }

Problem Problem::kernelbench_v1() {
  Problem p;
  p.batch = 128;
  p.in_channels = 3;
  p.out_channels = 16;
  p.in_h = p.in_w = 32;
  p.distribution = Distribution::Normal;
  return p;
}

namespace {

[[noreturn]] void reject(const std::string& what) { throw InvalidProblem("invalid problem: " + what); }

std::string pair_str(const Pair& p) {
  return "(" + std::to_string(p.h) + ", " + std::to_string(p.w) + ")";
}

void require_positive(const char* name, int64_t v) {
  if (v <= 0) reject(std::string(name) + " must be positive, got " + std::to_string(v));
}

void require_positive(const char* name, const Pair& v) {
  if (v.h <= 0 || v.w <= 0) reject(std::string(name) + " must be positive, got " + pair_str(v));
}

// validate() bounds every parameter before out_h()/out_w() are used, so no overflow reaches here.
int64_t out_size(int64_t in, int64_t stride, int64_t padding, int64_t dilation, int64_t kernel,
                 int64_t output_padding) {
  return conv_transpose_out_size(in, kernel, stride, padding, output_padding, dilation).value();
}

}  // namespace

// Limits of the kernels' index arithmetic (common/model/conv_params.hpp): sizes, parameters and
// indices within one plane, one kernel window or one channel range are held in 32-bit int;
// only offsets into whole tensors are 64-bit. A block-stride loop steps past the end of its
// range by up to one block (at most 1024 threads in CUDA) and a tile overhangs the edge of a
// plane or channel range by less than that, so kIndexHeadroom is kept free below 2^31 - 1.
constexpr int64_t kInt32Max = 2147483647;
constexpr int64_t kIndexHeadroom = 1024;
// Whole tensors: element counts (and their byte counts) must fit in int64 with room to spare.
constexpr double kMaxTensorElems = 4611686018427387904.0;  // 2^62
// The input's sizes as the user gave them (the programs' --size), not as fields of Problem.
constexpr const char* kInputHeight = "input height (--size H [W])";
constexpr const char* kInputWidth = "input width (--size H W)";

void Problem::validate() const {
  require_positive("batch", batch);
  require_positive("in_channels", in_channels);
  require_positive("out_channels", out_channels);
  require_positive(kInputHeight, in_h);
  require_positive(kInputWidth, in_w);
  require_positive("kernel_size", kernel_size);
  require_positive("stride", stride);
  require_positive("dilation", dilation);
  require_positive("groups", groups);
  if (padding.h < 0 || padding.w < 0) reject("padding must be non-negative, got " + pair_str(padding));
  if (output_padding.h < 0 || output_padding.w < 0)
    reject("output_padding must be non-negative, got " + pair_str(output_padding));
  // Every size and parameter the kernels hold in an int; also keeps out_h() and the products
  // below far from int64 overflow.
  for (const auto& [name, v] : {std::pair<const char*, Pair>{"kernel_size", kernel_size}, {"stride", stride},
                                {"padding", padding}, {"output_padding", output_padding}, {"dilation", dilation}})
    if (v.h > kInt32Max || v.w > kInt32Max)
      reject(std::string(name) + " " + pair_str(v) + " exceeds 2^31 - 1 (kernels hold it in a 32-bit int)");
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{kInputHeight, in_h}, {kInputWidth, in_w},
                                {"in_channels", in_channels}, {"out_channels", out_channels}, {"groups", groups}})
    if (v > kInt32Max - kIndexHeadroom)
      reject(std::string(name) + " = " + std::to_string(v) + " exceeds 2^31 - 1 - " +
             std::to_string(kIndexHeadroom) + " (kernels hold it in a 32-bit int; loops and tiles run up to " +
             std::to_string(kIndexHeadroom) + " past the end)");
  // The output size in double first: with every parameter below 2^31, PyTorch's formula can still
  // exceed int64 ((in - 1)*stride + dilation*(kernel - 1) reaches 2^63), so out_h() and out_w()
  // are only evaluated once this bound holds.
  for (const auto& [axis, in, k, s, pad, op, d] :
       {std::tuple<const char*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>{
            "h", in_h, kernel_size.h, stride.h, padding.h, output_padding.h, dilation.h},
        {"w", in_w, kernel_size.w, stride.w, padding.w, output_padding.w, dilation.w}}) {
    const double out = double(in - 1) * double(s) - 2.0 * double(pad) + double(d) * double(k - 1) + double(op) + 1.0;
    if (out > double(kInt32Max)) {
      std::ostringstream m;
      m << "in-plane index arithmetic needs 32 bits: out_" << axis << " = (in_" << axis << " - 1)*stride_" << axis
        << " - 2*padding_" << axis << " + dilation_" << axis << "*(kernel_" << axis << " - 1) + output_padding_"
        << axis << " + 1 = (" << in << " - 1)*" << s << " - 2*" << pad << " + " << d << "*" << (k - 1) << " + "
        << op << " + 1 = " << out << " exceeds 2^31 - 1";
      reject(m.str());
    }
  }
  // PyTorch: "output padding must be smaller than either stride or dilation".
  if (!(output_padding.h < stride.h || output_padding.h < dilation.h) ||
      !(output_padding.w < stride.w || output_padding.w < dilation.w))
    reject("output_padding " + pair_str(output_padding) +
           " must be smaller than either stride " + pair_str(stride) + " or dilation " +
           pair_str(dilation));
  if (in_channels % groups != 0)
    reject("in_channels " + std::to_string(in_channels) + " must be divisible by groups " +
           std::to_string(groups));
  if (out_channels % groups != 0)
    reject("out_channels " + std::to_string(out_channels) + " must be divisible by groups " +
           std::to_string(groups));
  if (out_h() <= 0 || out_w() <= 0)
    reject("output size (" + std::to_string(out_h()) + ", " + std::to_string(out_w()) +
           ") is not positive; padding " + pair_str(padding) + " is too large for the input");
  if (!(scale == scale)) reject("scale must not be NaN");
  if (!std::isfinite(bias_scale)) reject("bias_scale must be finite");

  // In-plane index arithmetic, per axis. The largest magnitudes the kernels form are
  //   oh + padding - kh*dilation        (gather form: up to out - 1 + padding, down to
  //                                      -dilation*(kernel - 1)),
  //   out + padding - kh*dilation + stride - 1   (tap_span's ceil division, stages 12 and 13),
  //   a tile's row or column index       (up to out - 1 + padding + the tile's overhang),
  //   a loop over rows or columns        (up to one block past its end),
  // all bounded by out + padding + dilation*(kernel - 1) + stride + kIndexHeadroom.
  struct Axis {
    const char* s;  // "h" or "w"
    int64_t out, padding, dilation, kernel, stride;
  };
  for (const Axis& a : {Axis{"h", out_h(), padding.h, dilation.h, kernel_size.h, stride.h},
                        Axis{"w", out_w(), padding.w, dilation.w, kernel_size.w, stride.w}}) {
    const int64_t reach = a.out + a.padding + a.dilation * (a.kernel - 1) + a.stride + kIndexHeadroom;
    if (reach > kInt32Max) {
      const std::string s = a.s;
      reject("in-plane index arithmetic needs 32 bits: out_" + s + " + padding_" + s + " + dilation_" + s +
             "*(kernel_" + s + " - 1) + stride_" + s + " + " + std::to_string(kIndexHeadroom) +
             " (headroom) = " + std::to_string(a.out) + " + " + std::to_string(a.padding) + " + " +
             std::to_string(a.dilation) + "*" + std::to_string(a.kernel - 1) + " + " +
             std::to_string(a.stride) + " + " + std::to_string(kIndexHeadroom) + " = " +
             std::to_string(reach) + " exceeds 2^31 - 1");
    }
  }
  // Element indices within a plane (ih*in_w + iw, a pixel or chunk index of the output plane)
  // and within the weights of one input channel (co_in_group*taps + tap).
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"input height*width (--size H W)", in_h * in_w},
                                {"out_h*out_w", out_h() * out_w()},
                                {"(out_channels/groups)*kernel_h*kernel_w", out_per_group() * taps()}})
    if (v > kInt32Max - kIndexHeadroom)
      reject("in-plane index arithmetic needs 32 bits: " + std::string(name) + " = " + std::to_string(v) +
             " exceeds 2^31 - 1 - " + std::to_string(kIndexHeadroom) +
             " (headroom for loops and tiles that run past the end)");
  // Whole tensors: 64-bit offsets (computed in double here, where the product cannot overflow).
  for (const auto& [name, v] :
       {std::pair<const char*, double>{"x", double(batch) * double(in_channels) * double(in_h) * double(in_w)},
        {"weight", double(in_channels) * double(out_per_group()) * double(taps())},
        {"the convT output", double(batch) * double(out_channels) * double(out_h()) * double(out_w())}})
    if (v > kMaxTensorElems)
      reject(std::string(name) + " would have " + std::to_string(v) + " elements, more than 2^62");
}

int64_t Problem::out_h() const {
  return out_size(in_h, stride.h, padding.h, dilation.h, kernel_size.h, output_padding.h);
}
int64_t Problem::out_w() const {
  return out_size(in_w, stride.w, padding.w, dilation.w, kernel_size.w, output_padding.w);
}

InputRange valid_input_range(int64_t in, int64_t out, int64_t stride, int64_t padding,
                             int64_t dilation, int64_t k) {
  // The formula the device code instantiates too (common/model/tap_range.hpp).
  const TapRange<int64_t> r = tap_range<int64_t>(in, out, stride, padding, dilation, k);
  return InputRange{r.lo, r.hi};
}

double Problem::conv_macs() const {
  double rows = 0, cols = 0;  // sum over taps of valid rows/cols; the 2-D count factorizes
  for (int64_t kh = 0; kh < kernel_size.h; ++kh)
    rows += double(valid_input_range(in_h, out_h(), stride.h, padding.h, dilation.h, kh).count());
  for (int64_t kw = 0; kw < kernel_size.w; ++kw)
    cols += double(valid_input_range(in_w, out_w(), stride.w, padding.w, dilation.w, kw).count());
  return double(batch) * double(in_channels) * double(out_per_group()) * rows * cols;
}

ProblemCost cost_of(const Problem& p) {
  const double f = 4.0;  // bytes per fp32
  const double x = f * double(p.x_elems());
  const double params = f * double(p.weight_elems() + p.out_channels);  // weight, conv_bias
  const double out = f * double(p.out_elems());
  const double pooled = f * double(p.pooled_elems());
  const double y = f * double(p.batch);
  ProblemCost c;
  c.conv = {x + params + out, 2.0 * p.conv_macs()};
  c.pool = {out + pooled, double(p.out_elems())};
  c.epilogue = {pooled + f * double(p.out_channels) + y, 4.0 * double(p.pooled_elems())};
  c.fused = {x + params + f * double(p.out_channels) + y, c.conv.flops + c.pool.flops + c.epilogue.flops};
  return c;
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "batch=" << batch << " in_channels=" << in_channels << " out_channels=" << out_channels
    << " input=" << in_h << "x" << in_w << " kernel_size=" << pair_str(kernel_size)
    << " stride=" << pair_str(stride) << " padding=" << pair_str(padding)
    << " output_padding=" << pair_str(output_padding) << " dilation=" << pair_str(dilation)
    << " groups=" << groups << " scale=" << scale;
  if (bias_scale != 1.0) s << " bias_scale=" << bias_scale;  // shown only when not KernelBench's
  s << " x~" << to_string(distribution) << " seed=" << seed << " -> convT output " << out_h() << "x"
    << out_w();
  return s.str();
}

const char* to_string(Distribution d) {
  switch (d) {
    case Distribution::Uniform: return "uniform";
    case Distribution::Normal: return "normal";
    case Distribution::Structured: return "structured";
    case Distribution::Exact: return "exact";
  }
  return "?";
}

Distribution distribution_from_string(const std::string& s) {
  if (s == "uniform") return Distribution::Uniform;
  if (s == "normal") return Distribution::Normal;
  if (s == "structured") return Distribution::Structured;
  if (s == "exact") return Distribution::Exact;
  throw InvalidProblem("invalid problem: distribution must be uniform, normal, structured or exact, got '" +
                       s + "'");
}

}  // namespace ladder
