#include "oracle.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "common/toolkit/uniform01.hpp"

namespace ladder::p38 {

namespace {

enum Stream : uint64_t { kX = 1, kWeight, kBias, kScale };

float uniform_sym(uint64_t seed, uint64_t stream, uint64_t i, float bound) {
  return (2.0f * uniform01(seed, stream, i) - 1.0f) * bound;
}

// An integer in [lo, hi], each with probability 1/(hi - lo + 1).
int uniform_int(uint64_t seed, uint64_t stream, uint64_t i, int lo, int hi) {
  const int n = hi - lo + 1;
  return lo + std::min(int(uniform01(seed, stream, i) * float(n)), n - 1);
}

bool power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Per-axis window of pooled index o: [start, end) clipped to the padded input (for the divisor
// with count_include_pad) and [lo, hi) clipped to the input (the elements summed).
struct Window {
  int64_t start, end, lo, hi;
};
Window pool_window(const Problem38& p, int a, int64_t o) {
  const int64_t in = p.in_size[a], k = p.pool.kernel_size[a], pad = p.pool.padding[a];
  const int64_t start = o * p.pool.effective_stride()[a] - pad;
  const int64_t end = std::min(start + k, in + pad);
  return {start, end, std::max<int64_t>(start, 0), std::min(end, in)};
}

}  // namespace

int64_t pool_divisor(const Problem38& p, int axis, int64_t o) {
  const Window w = pool_window(p, axis, o);
  return p.pool.count_include_pad ? w.end - w.start : w.hi - w.lo;
}

void exact_check(const Problem38& p) {
  p.validate();
  const Triple pooled = p.pooled_size();
  int64_t max_divisor = 1;
  for (int a = 0; a < 3; ++a) {
    int64_t axis_max = 1;
    for (int64_t o = 0; o < pooled[a]; ++o) {
      const int64_t q = pool_divisor(p, a, o);
      if (!power_of_two(q)) {
        std::ostringstream m;
        m << "invalid problem: exact inputs need every AvgPool3d divisor to be a power of two, but pooled "
          << "index " << o << " of axis " << "dhw"[a] << " divides by " << q << " (" << p.describe() << ")";
        throw InvalidProblem(m.str());
      }
      axis_max = std::max(axis_max, q);
    }
    max_divisor *= axis_max;
  }
  // sum|terms| of one convolution output, in units of 2^-(t_max + 4), must stay below 2^24.
  const double terms = double(p.in_per_group()) * double(p.conv_taps());
  const double units = (0.25 + terms * 3.0 / 8.0) * double(max_divisor) * 16.0;
  const double pool_sum = 3.0 * double(p.pool_window());
  if (!(units < 16777216.0) || !(pool_sum < 16777216.0)) {
    std::ostringstream m;
    m << "invalid problem: too large for exact inputs: a convolution sum may reach " << units
      << " units of its least significant bit, not below 2^24 (in_channels/groups * taps = " << terms
      << ", largest pool divisor " << max_divisor << "; " << p.describe() << ")";
    throw InvalidProblem(m.str());
  }
}

Inputs make_inputs(const Problem38& p) {
  p.validate();
  const bool exact = p.distribution == Distribution::Exact;
  if (exact) exact_check(p);
  const uint64_t s = p.seed;
  Inputs in;
  in.weight.resize(size_t(p.weight_elems()));
  in.bias.resize(size_t(p.out_channels));
  in.scale.assign(size_t(p.out_channels), 1.0f);
  in.x.resize(size_t(p.x_elems()));
  const float b = float(1.0 / std::sqrt(double(p.out_per_group()) * double(p.conv_taps())));
  for (size_t i = 0; i < in.weight.size(); ++i)
    in.weight[i] = exact ? float(uniform_int(s, kWeight, i, -2, 2)) / 16.0f : uniform_sym(s, kWeight, i, b);
  for (size_t i = 0; i < in.bias.size(); ++i)
    in.bias[i] = exact ? float(uniform_int(s, kBias, i, -4, 4)) / 16.0f : uniform_sym(s, kBias, i, b);
  for (size_t i = 0; i < in.x.size(); ++i)
    in.x[i] = exact ? float(uniform_int(s, kX, i, 0, 3)) : uniform01(s, kX, i);
  if (p.random_scale)  // multiples of 1/16 in [1/2, 3/2): exact in fp32, never all ones
    for (size_t i = 0; i < in.scale.size(); ++i) in.scale[i] = float(uniform_int(s, kScale, i, 8, 23)) / 16.0f;
  return in;
}

std::vector<double> avg_pool3d(const Problem38& p, const std::vector<float>& x, bool absolute) {
  p.validate();
  if (x.size() != size_t(p.x_elems())) throw std::invalid_argument("avg_pool3d: x has the wrong size");
  const Triple I = p.in_size, P = p.pooled_size();
  const int64_t planes = p.batch * p.in_channels;
  std::vector<double> out(size_t(p.pooled_elems()));
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t od = 0; od < P.d; ++od)
      for (int64_t oh = 0; oh < P.h; ++oh)
        for (int64_t ow = 0; ow < P.w; ++ow) {
          const Window wd = pool_window(p, 0, od), wh = pool_window(p, 1, oh), ww = pool_window(p, 2, ow);
          double sum = 0;
          for (int64_t d = wd.lo; d < wd.hi; ++d)
            for (int64_t h = wh.lo; h < wh.hi; ++h)
              for (int64_t w = ww.lo; w < ww.hi; ++w) {
                const double v = double(x[size_t(((plane * I.d + d) * I.h + h) * I.w + w)]);
                sum += absolute ? std::fabs(v) : v;
              }
          const double divisor =
              double(pool_divisor(p, 0, od)) * double(pool_divisor(p, 1, oh)) * double(pool_divisor(p, 2, ow));
          out[size_t(((plane * P.d + od) * P.h + oh) * P.w + ow)] = sum / divisor;
        }
  return out;
}

namespace {

// The input index i that tap k of output o reads on axis a, or -1 when there is none.
int64_t source_index(const Problem38& p, const Triple& in, int a, int64_t o, int64_t k) {
  const int64_t t = o + p.conv.padding[a] - k * p.conv.dilation[a];
  if (t < 0 || t % p.conv.stride[a] != 0) return -1;
  const int64_t i = t / p.conv.stride[a];
  return i < in[a] ? i : -1;
}

}  // namespace

std::vector<double> conv_transpose3d(const Problem38& p, const std::vector<double>& in,
                                     const std::vector<double>& weight, const std::vector<double>& bias) {
  p.validate();
  if (in.size() != size_t(p.pooled_elems()) || weight.size() != size_t(p.weight_elems()) ||
      bias.size() != size_t(p.out_channels))
    throw std::invalid_argument("conv_transpose3d: an operand has the wrong size");
  const Triple I = p.pooled_size(), O = p.out_size(), K = p.conv.kernel_size;
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group(), taps = p.conv_taps();
  std::vector<double> out(size_t(p.out_elems()));
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t od = 0; od < O.d; ++od)
        for (int64_t oh = 0; oh < O.h; ++oh)
          for (int64_t ow = 0; ow < O.w; ++ow) {
            double acc = bias[size_t(co)];
            for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci)
              for (int64_t kd = 0; kd < K.d; ++kd) {
                const int64_t id = source_index(p, I, 0, od, kd);
                if (id < 0) continue;
                for (int64_t kh = 0; kh < K.h; ++kh) {
                  const int64_t ih = source_index(p, I, 1, oh, kh);
                  if (ih < 0) continue;
                  for (int64_t kw = 0; kw < K.w; ++kw) {
                    const int64_t iw = source_index(p, I, 2, ow, kw);
                    if (iw < 0) continue;
                    const double v = in[size_t((((n * p.in_channels + ci) * I.d + id) * I.h + ih) * I.w + iw)];
                    const double w = weight[size_t((ci * cout_g + co % cout_g) * taps + (kd * K.h + kh) * K.w + kw)];
                    acc += v * w;
                  }
                }
              }
            out[size_t((((n * p.out_channels + co) * O.d + od) * O.h + oh) * O.w + ow)] = acc;
          }
    }
  return out;
}

std::vector<int64_t> taps_per_position(const Problem38& p) {
  p.validate();
  const Triple I = p.pooled_size(), O = p.out_size();
  std::vector<int64_t> count[3];
  for (int a = 0; a < 3; ++a) {
    count[a].assign(size_t(O[a]), 0);
    for (int64_t o = 0; o < O[a]; ++o)
      for (int64_t k = 0; k < p.conv.kernel_size[a]; ++k) count[a][size_t(o)] += source_index(p, I, a, o, k) >= 0;
  }
  std::vector<int64_t> taps;
  taps.reserve(size_t(p.spatial()));
  for (int64_t od = 0; od < O.d; ++od)
    for (int64_t oh = 0; oh < O.h; ++oh)
      for (int64_t ow = 0; ow < O.w; ++ow)
        taps.push_back(count[0][size_t(od)] * count[1][size_t(oh)] * count[2][size_t(ow)]);
  return taps;
}

double clamp_lo(const Problem38& p) { return double(float(p.clamp_min)); }
double clamp_hi(const Problem38& p) { return double(float(p.clamp_max)); }

double clamp_value(double v, double lo, double hi) {
  if (std::isnan(v)) return v;
  return std::min(std::max(v, lo), hi);
}

void softmax_scale(const Problem38& p, Reference& ref) {
  const int64_t rows = p.batch * p.out_channels, S = p.spatial();
  if (ref.z.size() != size_t(rows * S) || ref.scale.size() != size_t(p.out_channels))
    throw std::invalid_argument("softmax_scale: z or scale has the wrong size");
  ref.row_max.assign(size_t(rows), 0.0);
  ref.row_sum.assign(size_t(rows), 0.0);
  ref.out.assign(ref.z.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* z = ref.z.data() + r * S;
    const double m = *std::max_element(z, z + S);
    double sum = 0;
    for (int64_t i = 0; i < S; ++i) sum += std::exp(z[i] - m);
    const double scale = ref.scale[size_t(r % p.out_channels)];
    for (int64_t i = 0; i < S; ++i) ref.out[size_t(r * S + i)] = std::exp(z[i] - m) / sum * scale;
    ref.row_max[size_t(r)] = m;
    ref.row_sum[size_t(r)] = sum;
  }
}

Reference reference(const Problem38& p, const Inputs& in) {
  p.validate();
  if (in.x.size() != size_t(p.x_elems()) || in.weight.size() != size_t(p.weight_elems()) ||
      in.bias.size() != size_t(p.out_channels) || in.scale.size() != size_t(p.out_channels))
    throw std::invalid_argument("reference: the inputs do not match the problem's sizes (" + p.describe() + ")");
  Reference ref;
  ref.pooled = avg_pool3d(p, in.x);
  ref.pooled_abs = avg_pool3d(p, in.x, /*absolute=*/true);
  std::vector<double> w(in.weight.begin(), in.weight.end()), b(in.bias.begin(), in.bias.end());
  ref.conv = conv_transpose3d(p, ref.pooled, w, b);
  for (double& v : w) v = std::fabs(v);
  for (double& v : b) v = std::fabs(v);
  ref.magnitude = conv_transpose3d(p, ref.pooled_abs, w, b);
  const double lo = clamp_lo(p), hi = clamp_hi(p);
  ref.z.resize(ref.conv.size());
  for (size_t i = 0; i < ref.z.size(); ++i) ref.z[i] = clamp_value(ref.conv[i], lo, hi);
  ref.scale.assign(in.scale.begin(), in.scale.end());
  softmax_scale(p, ref);
  return ref;
}

}  // namespace ladder::p38
