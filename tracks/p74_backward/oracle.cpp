#include "oracle.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "common/toolkit/uniform01.hpp"

namespace ladder::p74 {

namespace {

enum Stream : uint64_t { kX = 1, kWeight, kBias, kMultiplier, kGradOut };

float uniform_sym(uint64_t seed, uint64_t stream, uint64_t i, float bound) {
  return (2.0f * uniform01(seed, stream, i) - 1.0f) * bound;
}

// An integer in [lo, hi], each with probability 1/(hi - lo + 1).
int uniform_int(uint64_t seed, uint64_t stream, uint64_t i, int lo, int hi) {
  const int n = hi - lo + 1;
  return lo + std::min(int(uniform01(seed, stream, i) * float(n)), n - 1);
}

// N(0, 1) by Box-Muller from two uniforms of the counter-based generator (1 - u keeps log's
// argument in (0, 1]).
float normal(uint64_t seed, uint64_t stream, uint64_t i) {
  const double u1 = 1.0 - double(uniform01(seed, stream, 2 * i));
  const double u2 = double(uniform01(seed, stream, 2 * i + 1));
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

double lrelu(double v, double s) { return v > 0 ? v : s * v; }

// The input index i that tap k of conv position o reads on axis a, or -1 when there is none:
// o = i*stride - padding + k*dilation.
int64_t source_index(const Problem74& p, int a, int64_t o, int64_t k) {
  const int64_t t = o + p.conv.padding[a] - k * p.conv.dilation[a];
  if (t < 0 || t % p.conv.stride[a] != 0) return -1;
  const int64_t i = t / p.conv.stride[a];
  return i < p.in_size[a] ? i : -1;
}

// Flat offsets of (n, c, spatial) tensors.
int64_t flat(int64_t plane, const Triple& s, int64_t d, int64_t h, int64_t w) {
  return ((plane * s.d + d) * s.h + h) * s.w + w;
}

void check_inputs(const Problem74& p, const Inputs& in, const char* who) {
  if (in.x.size() != size_t(p.x_elems()) || in.weight.size() != size_t(p.weight_elems()) ||
      in.bias.size() != size_t(p.out_channels) || in.multiplier.size() != size_t(p.out_channels))
    throw std::invalid_argument(std::string(who) + ": the inputs do not match " + p.describe());
}

// The largest number of pooling windows that contain one conv position along axis a.
int64_t max_windows_per_position(const Problem74& p, int a) {
  const Triple cs = p.conv_size(), os = p.out_size(), ps = p.pool.effective_stride();
  std::vector<int64_t> count(size_t(cs[a]), 0);
  for (int64_t q = 0; q < os[a]; ++q)
    for (int64_t j = 0; j < p.pool.kernel_size[a]; ++j) {
      const int64_t pos = q * ps[a] - p.pool.padding[a] + j * p.pool.dilation[a];
      if (pos >= 0 && pos < cs[a]) ++count[size_t(pos)];
    }
  return *std::max_element(count.begin(), count.end());
}

}  // namespace

double slope(const Problem74& p) { return double(float(p.negative_slope)); }

void exact_check(const Problem74& p) {
  p.validate();
  const double s = slope(p);
  int exp2 = 0;
  if (s == 0.0 || std::frexp(std::fabs(s), &exp2) != 0.5) {
    std::ostringstream m;
    m << "invalid problem: exact inputs need negative_slope to be a power of two (+-2^k), got " << p.negative_slope
      << " (" << p.describe() << ")";
    throw InvalidProblem(m.str());
  }
  // slope = +-2^t. Grids (the unit every value is a multiple of), with T = min(t, 0):
  //   y: 2^-4 (x integer, weight and bias multiples of 2^-4); a = lrelu(y): 2^(T-4);
  //   m = multiplier*a: 2^(T-6); z = lrelu(m): 2^(2T-6); upstream g integer; g_m: 2^T;
  //   g_m*a and grad_multiplier: 2^(2T-4); g_y and grad_bias: 2^(2T-2);
  //   x*g_y and grad_weight: 2^(2T-2); weight*g_y and grad_x: 2^(2T-6).
  // Magnitudes, with L = max(1, |slope|), |x| <= 3, |weight| <= 1/8, |bias| <= 1/4,
  // |multiplier| <= 1, |g| <= 3: |y| <= Y = 1/4 + (in_channels/groups)*taps*3/8, |a|, |m| <= L*Y,
  // |z| <= L^2*Y, |g_m| <= 3L, |g_y| <= 3L^2. Every partial sum, in any order, is bounded by the
  // sum of its terms' magnitudes; that sum, in units of its grid, must stay below 2^24 (then
  // fp32 holds every partial sum exactly). In units the L and 2^-T factors combine to 2^|t|.
  const int t = exp2 - 1;
  const double e = std::ldexp(1.0, std::abs(t));  // 2^|t|
  const double Y = 0.25 + double(p.in_per_group()) * double(p.conv_taps()) * 3.0 / 8.0;
  const Triple os = p.out_size();
  const double windows = double(p.batch) * double(os.d) * double(os.h) * double(os.w);  // per channel
  double overlap = 1;  // windows that may route their gradient to one conv position
  for (int a = 0; a < 3; ++a) overlap *= double(max_windows_per_position(p, a));
  struct Bound {
    const char* what;
    double units;
  };
  const Bound bounds[] = {
      {"the ConvTranspose3d sum y", Y * 16},
      {"z = lrelu(multiplier*lrelu(y))", Y * 64 * e * e},
      {"grad_multiplier (sum of g_m*lrelu(y) over a channel's windows)", windows * 3 * Y * 16 * e * e},
      {"grad_bias (sum of g_y over a channel's windows)", windows * 3 * 4 * e * e},
      {"the routed gradient (sum of g_y over windows sharing an argmax)", overlap * 3 * 4 * e * e},
      {"grad_weight (sum of x*g_y over a channel's windows)", windows * 9 * 4 * e * e},
      {"grad_x (sum of weight*g_y over channels, taps and windows)",
       double(p.out_per_group()) * double(p.conv_taps()) * overlap * 3.0 / 8.0 * 64 * e * e},
  };
  for (const Bound& b : bounds)
    if (!(b.units < 16777216.0)) {
      std::ostringstream m;
      m << "invalid problem: too large for exact inputs: " << b.what << " may reach " << b.units
        << " units of its grid, not below 2^24 (negative_slope " << p.negative_slope << "; " << p.describe() << ")";
      throw InvalidProblem(m.str());
    }
}

Inputs make_inputs(const Problem74& p) {
  p.validate();
  const bool exact = p.distribution == Distribution::Exact;
  if (exact) exact_check(p);
  const uint64_t s = p.seed;
  Inputs in;
  in.x.resize(size_t(p.x_elems()));
  in.weight.resize(size_t(p.weight_elems()));
  in.bias.resize(size_t(p.out_channels));
  in.multiplier.resize(size_t(p.out_channels));
  // PyTorch's default ConvTranspose3d initialization: bound 1/sqrt(fan_in), fan_in = weight.size(1)*taps.
  const float b = float(1.0 / std::sqrt(double(p.out_per_group()) * double(p.conv_taps())));
  for (size_t i = 0; i < in.x.size(); ++i) in.x[i] = exact ? float(uniform_int(s, kX, i, 0, 3)) : uniform01(s, kX, i);
  for (size_t i = 0; i < in.weight.size(); ++i)
    in.weight[i] = exact ? float(uniform_int(s, kWeight, i, -2, 2)) / 16.0f : uniform_sym(s, kWeight, i, b);
  for (size_t i = 0; i < in.bias.size(); ++i)
    in.bias[i] = exact ? float(uniform_int(s, kBias, i, -4, 4)) / 16.0f : uniform_sym(s, kBias, i, b);
  for (size_t i = 0; i < in.multiplier.size(); ++i) {
    if (exact) {
      const int j = uniform_int(s, kMultiplier, i, 0, 7);  // -4..-1, 1..4
      in.multiplier[i] = float(j < 4 ? j - 4 : j - 3) / 4.0f;
    } else {
      in.multiplier[i] = normal(s, kMultiplier, i);
    }
  }
  return in;
}

std::vector<float> make_grad_out(const Problem74& p) {
  p.validate();
  const bool exact = p.distribution == Distribution::Exact;
  std::vector<float> g(size_t(p.out_elems()));
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = exact ? float(uniform_int(p.seed + 1, kGradOut, i, -3, 3)) : uniform_sym(p.seed + 1, kGradOut, i, 1.0f);
  return g;
}

int64_t argmax_position(const Problem74& p, int64_t q, int32_t offset) {
  if (offset < 0 || offset >= p.pool_window())
    throw std::out_of_range("argmax_position: window offset " + std::to_string(offset) + " is outside [0, " +
                            std::to_string(p.pool_window()) + ")");
  if (q < 0 || q >= p.out_elems())
    throw std::out_of_range("argmax_position: window " + std::to_string(q) + " is outside the output");
  const Triple os = p.out_size(), cs = p.conv_size(), ps = p.pool.effective_stride(), K = p.pool.kernel_size;
  const int64_t o[3] = {q / (os.h * os.w) % os.d, q / os.w % os.h, q % os.w};
  const int64_t j[3] = {offset / (K.h * K.w), offset / K.w % K.h, offset % K.w};
  int64_t pos[3] = {0, 0, 0};
  for (int a = 0; a < 3; ++a) {
    pos[a] = o[a] * ps[a] - p.pool.padding[a] + j[a] * p.pool.dilation[a];
    if (pos[a] < 0 || pos[a] >= cs[a]) return -1;
  }
  return flat(q / (os.d * os.h * os.w), cs, pos[0], pos[1], pos[2]);
}

Forward forward(const Problem74& p, const Inputs& in) {
  p.validate();
  check_inputs(p, in, "forward");
  const Triple cs = p.conv_size(), K = p.conv.kernel_size;
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group(), taps = p.conv_taps();
  const double s = slope(p);
  Forward f;
  f.y.resize(size_t(p.conv_elems()));
  f.magnitude.resize(f.y.size());
  f.z.resize(f.y.size());
  f.multiplier.assign(in.multiplier.begin(), in.multiplier.end());
  // ConvTranspose3d, gather form: y[n,co,o] = bias[co] + sum over ci in co's group and taps k of
  // x[n,ci,i]*weight[ci, co mod cout_g, k].
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co) {
      const int64_t g = co / cout_g, plane = n * p.out_channels + co;
      const double mult = in.multiplier[size_t(co)];
      for (int64_t od = 0; od < cs.d; ++od)
        for (int64_t oh = 0; oh < cs.h; ++oh)
          for (int64_t ow = 0; ow < cs.w; ++ow) {
            double acc = in.bias[size_t(co)], mag = std::fabs(acc);
            for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci)
              for (int64_t kd = 0; kd < K.d; ++kd) {
                const int64_t id = source_index(p, 0, od, kd);
                if (id < 0) continue;
                for (int64_t kh = 0; kh < K.h; ++kh) {
                  const int64_t ih = source_index(p, 1, oh, kh);
                  if (ih < 0) continue;
                  for (int64_t kw = 0; kw < K.w; ++kw) {
                    const int64_t iw = source_index(p, 2, ow, kw);
                    if (iw < 0) continue;
                    const double v = in.x[size_t(flat(n * p.in_channels + ci, p.in_size, id, ih, iw))];
                    const double w = in.weight[size_t((ci * cout_g + co % cout_g) * taps + (kd * K.h + kh) * K.w + kw)];
                    acc += v * w;
                    mag += std::fabs(v * w);
                  }
                }
              }
            const size_t i = size_t(flat(plane, cs, od, oh, ow));
            f.y[i] = acc;
            f.magnitude[i] = mag;
            f.z[i] = lrelu(mult * lrelu(acc, s), s);
          }
    }
  // MaxPool3d: the first maximum in window order, compared as PyTorch does (val > max or NaN);
  // the argmax starts at the first non-padding position, so padding never wins.
  f.out.resize(size_t(p.out_elems()));
  f.argmax.resize(f.out.size());
  f.y_at_argmax.resize(f.out.size());
  const Triple os = p.out_size(), pk = p.pool.kernel_size;
  const int64_t out_spatial = os.d * os.h * os.w;
  for (int64_t q = 0; q < p.out_elems(); ++q) {
    // Per axis, the conv position of kernel position j, or -1 on padding.
    const int64_t o[3] = {q / (os.h * os.w) % os.d, q / os.w % os.h, q % os.w};
    std::vector<int64_t> at[3];
    for (int a = 0; a < 3; ++a)
      for (int64_t j = 0; j < pk[a]; ++j) {
        const int64_t v = o[a] * p.pool.effective_stride()[a] - p.pool.padding[a] + j * p.pool.dilation[a];
        at[a].push_back(v >= 0 && v < cs[a] ? v : -1);
      }
    double best = -INFINITY;
    int32_t arg = -1;
    int64_t arg_pos = -1;
    for (int64_t jd = 0; jd < pk.d; ++jd)
      for (int64_t jh = 0; jh < pk.h; ++jh)
        for (int64_t jw = 0; jw < pk.w; ++jw) {
          if (at[0][size_t(jd)] < 0 || at[1][size_t(jh)] < 0 || at[2][size_t(jw)] < 0) continue;
          const int32_t j = int32_t((jd * pk.h + jh) * pk.w + jw);
          const int64_t pos = flat(q / out_spatial, cs, at[0][size_t(jd)], at[1][size_t(jh)], at[2][size_t(jw)]);
          if (arg < 0) {  // PyTorch starts the argmax at the first non-padding position
            arg = j;
            arg_pos = pos;
          }
          const double v = f.z[size_t(pos)];
          if (v > best || std::isnan(v)) {
            best = v;
            arg = j;
            arg_pos = pos;
          }
        }
    if (arg < 0) throw std::logic_error("forward: a pooling window without a non-padding position");  // validate()
    f.out[size_t(q)] = best;
    f.argmax[size_t(q)] = arg;
    f.y_at_argmax[size_t(q)] = f.y[size_t(arg_pos)];
  }
  return f;
}

Saved saved_from(const Forward& f) {
  Saved s;
  s.argmax = f.argmax;
  s.y.assign(f.y_at_argmax.begin(), f.y_at_argmax.end());
  return s;
}

Grads backward(const Problem74& p, const Inputs& in, const Saved& saved, const std::vector<float>& grad_out) {
  p.validate();
  check_inputs(p, in, "backward");
  const size_t outs = size_t(p.out_elems());
  if (saved.argmax.size() != outs || saved.y.size() != outs || grad_out.size() != outs)
    throw std::invalid_argument("backward: the saved state or grad_out does not match " + p.describe());
  const Triple cs = p.conv_size(), K = p.conv.kernel_size;
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group(), taps = p.conv_taps();
  const int64_t out_spatial = int64_t(outs) / (p.batch * p.out_channels);
  const double s = slope(p);
  Grads r;
  r.grad_x.assign(in.x.size(), 0.0);
  r.grad_weight.assign(in.weight.size(), 0.0);
  r.grad_bias.assign(in.bias.size(), 0.0);
  r.grad_multiplier.assign(in.multiplier.size(), 0.0);
  r.mag_x = r.grad_x;
  r.mag_weight = r.grad_weight;
  r.mag_bias = r.grad_bias;
  r.mag_multiplier = r.grad_multiplier;
  r.terms_x.assign(in.x.size(), 0);
  r.terms_weight.assign(in.weight.size(), 0);
  r.terms_bias.assign(in.bias.size(), 0);
  r.terms_multiplier.assign(in.multiplier.size(), 0);
  auto add = [](std::vector<double>& sum, std::vector<double>& mag, std::vector<int64_t>& terms, size_t i, double v) {
    sum[i] += v;
    mag[i] += std::fabs(v);
    terms[i] += v != 0.0;
  };
  for (int64_t q = 0; q < int64_t(outs); ++q) {
    const int32_t offset = saved.argmax[size_t(q)];
    if (offset < 0 || offset >= p.pool_window())
      throw std::invalid_argument("backward: argmax offset " + std::to_string(offset) + " of window " +
                                  std::to_string(q) + " is outside [0, " + std::to_string(p.pool_window()) + ")");
    const int64_t pos = argmax_position(p, q, offset);
    if (pos < 0)
      throw std::invalid_argument("backward: argmax offset " + std::to_string(offset) + " of window " +
                                  std::to_string(q) + " points at padding");
    const int64_t plane = q / out_spatial, n = plane / p.out_channels, co = plane % p.out_channels;
    const double g = grad_out[size_t(q)], y = saved.y[size_t(q)], mult = in.multiplier[size_t(co)];
    const double a = lrelu(y, s), m = mult * a;
    const double g_m = m > 0 ? g : s * g;
    const double g_y = y > 0 ? g_m * mult : s * (g_m * mult);
    add(r.grad_multiplier, r.mag_multiplier, r.terms_multiplier, size_t(co), g_m * a);
    add(r.grad_bias, r.mag_bias, r.terms_bias, size_t(co), g_y);
    // The taps that wrote conv position pos: per axis o = i*stride - padding + k*dilation.
    const int64_t spatial = pos % (cs.d * cs.h * cs.w);
    const int64_t o[3] = {spatial / (cs.h * cs.w), spatial / cs.w % cs.h, spatial % cs.w};
    const int64_t g0 = co / cout_g;
    for (int64_t kd = 0; kd < K.d; ++kd) {
      const int64_t id = source_index(p, 0, o[0], kd);
      if (id < 0) continue;
      for (int64_t kh = 0; kh < K.h; ++kh) {
        const int64_t ih = source_index(p, 1, o[1], kh);
        if (ih < 0) continue;
        for (int64_t kw = 0; kw < K.w; ++kw) {
          const int64_t iw = source_index(p, 2, o[2], kw);
          if (iw < 0) continue;
          for (int64_t ci = g0 * cin_g; ci < (g0 + 1) * cin_g; ++ci) {
            const size_t xi = size_t(flat(n * p.in_channels + ci, p.in_size, id, ih, iw));
            const size_t wi = size_t((ci * cout_g + co % cout_g) * taps + (kd * K.h + kh) * K.w + kw);
            add(r.grad_weight, r.mag_weight, r.terms_weight, wi, double(in.x[xi]) * g_y);
            add(r.grad_x, r.mag_x, r.terms_x, xi, double(in.weight[wi]) * g_y);
          }
        }
      }
    }
  }
  return r;
}

}  // namespace ladder::p74
