// Rung 00: the CPU reference. The model and its backward pass as fp32 loops, one (sample,
// channel) plane per OpenMP thread at a time. Forward: the ConvTranspose3d gather per conv
// element, the chain lrelu -> * multiplier -> lrelu, then MaxPool3d keeping the first maximum
// and y there. Backward: route each window's gradient through the chain to its argmax position
// (overlapping windows add), then grad_weight and grad_x as gathers over that routed gradient.
// The GPU rungs are checked against the fp64 oracle, not against this; it is the starting point
// and a timing baseline.
#include <cmath>
#include <stdexcept>

#include "../../oracle.hpp"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p74 {
namespace {

float lrelu(float v, float s) { return v > 0.f ? v : s * v; }

void check_inputs(const Problem74& p, const Inputs& in) {
  p.validate();
  if (in.x.size() != size_t(p.x_elems()) || in.weight.size() != size_t(p.weight_elems()) ||
      in.bias.size() != size_t(p.out_channels) || in.multiplier.size() != size_t(p.out_channels))
    throw std::invalid_argument("rung 00: the inputs do not match " + p.describe());
}

// Conv position, per axis, of kernel position j of window q, or -1 on padding.
struct PoolAxes {
  int64_t stride[3], padding[3], dilation[3], conv[3];
  explicit PoolAxes(const Problem74& p) {
    const Triple ps = p.pool.effective_stride(), cs = p.conv_size();
    for (int a = 0; a < 3; ++a) {
      stride[a] = ps[a];
      padding[a] = p.pool.padding[a];
      dilation[a] = p.pool.dilation[a];
      conv[a] = cs[a];
    }
  }
  int64_t pos(int a, int64_t q, int64_t j) const {
    const int64_t v = q * stride[a] - padding[a] + j * dilation[a];
    return v >= 0 && v < conv[a] ? v : -1;
  }
};

ForwardResult forward(const Problem74& p, const Inputs& in) {
  check_inputs(p, in);
  const Triple I = p.in_size, C = p.conv_size(), O = p.out_size(), K = p.conv.kernel_size, PK = p.pool.kernel_size;
  const Triple st = p.conv.stride, pad = p.conv.padding, dil = p.conv.dilation;
  const int64_t planes = p.batch * p.out_channels, cin_g = p.in_per_group(), cout_g = p.out_per_group();
  const int64_t conv_sp = C.d * C.h * C.w, out_sp = O.d * O.h * O.w, in_sp = I.d * I.h * I.w;
  const float s = float(p.negative_slope);
  const PoolAxes pool(p);
  std::vector<float> y(size_t(p.conv_elems())), z(y.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const int64_t n = plane / p.out_channels, co = plane % p.out_channels, g = co / cout_g;
    const float mult = in.multiplier[size_t(co)];
    for (int64_t od = 0; od < C.d; ++od)
      for (int64_t oh = 0; oh < C.h; ++oh)
        for (int64_t ow = 0; ow < C.w; ++ow) {
          float acc = in.bias[size_t(co)];
          for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci) {
            const float* x = in.x.data() + (n * p.in_channels + ci) * in_sp;
            const float* w = in.weight.data() + (ci * cout_g + co % cout_g) * K.d * K.h * K.w;
            for (int64_t kd = 0; kd < K.d; ++kd) {
              const int64_t td = od + pad.d - kd * dil.d;
              if (td < 0 || td % st.d || td / st.d >= I.d) continue;
              for (int64_t kh = 0; kh < K.h; ++kh) {
                const int64_t th = oh + pad.h - kh * dil.h;
                if (th < 0 || th % st.h || th / st.h >= I.h) continue;
                for (int64_t kw = 0; kw < K.w; ++kw) {
                  const int64_t tw = ow + pad.w - kw * dil.w;
                  if (tw < 0 || tw % st.w || tw / st.w >= I.w) continue;
                  acc += x[(td / st.d * I.h + th / st.h) * I.w + tw / st.w] * w[(kd * K.h + kh) * K.w + kw];
                }
              }
            }
          }
          const size_t i = size_t(plane * conv_sp + (od * C.h + oh) * C.w + ow);
          y[i] = acc;
          z[i] = lrelu(mult * lrelu(acc, s), s);
        }
  }
  ForwardResult r;
  r.out.resize(size_t(p.out_elems()));
  r.argmax.resize(r.out.size());
  r.y.resize(r.out.size());
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t od = 0; od < O.d; ++od)
      for (int64_t oh = 0; oh < O.h; ++oh)
        for (int64_t ow = 0; ow < O.w; ++ow) {
          // PyTorch's rule: start at the first non-padding position, take v when v > max or NaN.
          float best = -INFINITY;
          int32_t arg = -1;
          int64_t at = -1;
          for (int64_t jd = 0; jd < PK.d; ++jd) {
            const int64_t pd = pool.pos(0, od, jd);
            if (pd < 0) continue;
            for (int64_t jh = 0; jh < PK.h; ++jh) {
              const int64_t ph = pool.pos(1, oh, jh);
              if (ph < 0) continue;
              for (int64_t jw = 0; jw < PK.w; ++jw) {
                const int64_t pw = pool.pos(2, ow, jw);
                if (pw < 0) continue;
                const int64_t pos = plane * conv_sp + (pd * C.h + ph) * C.w + pw;
                const int32_t j = int32_t((jd * PK.h + jh) * PK.w + jw);
                if (arg < 0) {
                  arg = j;
                  at = pos;
                }
                const float v = z[size_t(pos)];
                if (v > best || std::isnan(v)) {
                  best = v;
                  arg = j;
                  at = pos;
                }
              }
            }
          }
          const size_t e = size_t(plane * out_sp + (od * O.h + oh) * O.w + ow);
          r.out[e] = best;
          r.argmax[e] = arg;
          r.y[e] = y[size_t(at)];  // validate() guarantees a non-padding position per window
        }
  return r;
}

GradResult backward(const Problem74& p, const Inputs& in, const Saved& saved, const std::vector<float>& grad_out) {
  check_inputs(p, in);
  const size_t outs = size_t(p.out_elems());
  if (saved.argmax.size() != outs || saved.y.size() != outs || grad_out.size() != outs)
    throw std::invalid_argument("rung 00: the saved state or grad_out does not match " + p.describe());
  const Triple I = p.in_size, C = p.conv_size(), K = p.conv.kernel_size;
  const Triple st = p.conv.stride, pad = p.conv.padding, dil = p.conv.dilation;
  const int64_t planes = p.batch * p.out_channels, cin_g = p.in_per_group(), cout_g = p.out_per_group();
  const int64_t conv_sp = C.d * C.h * C.w, out_sp = int64_t(outs) / planes, in_sp = I.d * I.h * I.w;
  const int64_t taps = K.d * K.h * K.w;
  const float s = float(p.negative_slope);
  // Where each window sends its gradient (checked here: nothing may throw inside OpenMP).
  const PoolAxes pool(p);
  const Triple O = p.out_size(), PK = p.pool.kernel_size;
  std::vector<int64_t> target(outs);
  for (size_t e = 0; e < outs; ++e) {
    const int64_t j = saved.argmax[e], q = int64_t(e) % out_sp;
    const bool in_window = j >= 0 && j < PK.d * PK.h * PK.w;
    const int64_t pd = in_window ? pool.pos(0, q / (O.h * O.w), j / (PK.h * PK.w)) : -1;
    const int64_t ph = in_window ? pool.pos(1, q / O.w % O.h, j / PK.w % PK.h) : -1;
    const int64_t pw = in_window ? pool.pos(2, q % O.w, j % PK.w) : -1;
    if (pd < 0 || ph < 0 || pw < 0)
      throw std::invalid_argument("rung 00: argmax " + std::to_string(j) + " of window " + std::to_string(e) +
                                  " is outside the window or on padding");
    target[e] = int64_t(e) / out_sp * conv_sp + (pd * C.h + ph) * C.w + pw;
  }
  // Route: g_y per window, added at its argmax; each plane's partial sums of the two
  // per-channel gradients (planes own disjoint positions, so no races).
  std::vector<float> routed(size_t(p.conv_elems()), 0.f);
  std::vector<float> part_mult(size_t(planes), 0.f), part_bias(size_t(planes), 0.f);
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float mult = in.multiplier[size_t(plane % p.out_channels)];
    float sum_mult = 0.f, sum_bias = 0.f;
    for (int64_t e = plane * out_sp; e < (plane + 1) * out_sp; ++e) {
      const float g = grad_out[size_t(e)], y = saved.y[size_t(e)];
      const float a = lrelu(y, s), m = mult * a;
      const float g_m = m > 0.f ? g : s * g;
      const float g_y = y > 0.f ? g_m * mult : s * (g_m * mult);
      sum_mult += g_m * a;
      sum_bias += g_y;
      routed[size_t(target[size_t(e)])] += g_y;
    }
    part_mult[size_t(plane)] = sum_mult;
    part_bias[size_t(plane)] = sum_bias;
  }
  GradResult r;
  r.grad_multiplier.assign(size_t(p.out_channels), 0.f);
  r.grad_bias.assign(size_t(p.out_channels), 0.f);
  for (int64_t plane = 0; plane < planes; ++plane) {
    r.grad_multiplier[size_t(plane % p.out_channels)] += part_mult[size_t(plane)];
    r.grad_bias[size_t(plane % p.out_channels)] += part_bias[size_t(plane)];
  }
  // The conv position tap (kd, kh, kw) of input (id, ih, iw) writes, flat within a plane, or -1.
  auto conv_pos = [&](int64_t id, int64_t ih, int64_t iw, int64_t kd, int64_t kh, int64_t kw) -> int64_t {
    const int64_t od = id * st.d - pad.d + kd * dil.d, oh = ih * st.h - pad.h + kh * dil.h,
                  ow = iw * st.w - pad.w + kw * dil.w;
    if (od < 0 || od >= C.d || oh < 0 || oh >= C.h || ow < 0 || ow >= C.w) return -1;
    return (od * C.h + oh) * C.w + ow;
  };
  // grad_weight[ci, co', k] = sum over n and inputs i of x[n, ci, i] * routed[n, co, o(i, k)].
  r.grad_weight.assign(in.weight.size(), 0.f);
#pragma omp parallel for schedule(dynamic)
  for (int64_t pair = 0; pair < p.in_channels * cout_g; ++pair) {
    const int64_t ci = pair / cout_g, co = ci / cin_g * cout_g + pair % cout_g;
    for (int64_t k = 0; k < taps; ++k) {
      const int64_t kd = k / (K.h * K.w), kh = k / K.w % K.h, kw = k % K.w;
      float acc = 0.f;
      for (int64_t n = 0; n < p.batch; ++n) {
        const float* x = in.x.data() + (n * p.in_channels + ci) * in_sp;
        const float* gy = routed.data() + (n * p.out_channels + co) * conv_sp;
        for (int64_t id = 0; id < I.d; ++id)
          for (int64_t ih = 0; ih < I.h; ++ih)
            for (int64_t iw = 0; iw < I.w; ++iw) {
              const int64_t o = conv_pos(id, ih, iw, kd, kh, kw);
              if (o >= 0) acc += x[(id * I.h + ih) * I.w + iw] * gy[o];
            }
      }
      r.grad_weight[size_t(pair * taps + k)] = acc;
    }
  }
  // grad_x[n, ci, i] = sum over co in ci's group and taps k of weight[ci, co', k] * routed[n, co, o(i, k)].
  r.grad_x.assign(in.x.size(), 0.f);
#pragma omp parallel for schedule(dynamic)
  for (int64_t nc = 0; nc < p.batch * p.in_channels; ++nc) {
    const int64_t n = nc / p.in_channels, ci = nc % p.in_channels, g = ci / cin_g;
    for (int64_t id = 0; id < I.d; ++id)
      for (int64_t ih = 0; ih < I.h; ++ih)
        for (int64_t iw = 0; iw < I.w; ++iw) {
          float acc = 0.f;
          for (int64_t col = 0; col < cout_g; ++col) {
            const float* w = in.weight.data() + (ci * cout_g + col) * taps;
            const float* gy = routed.data() + (n * p.out_channels + g * cout_g + col) * conv_sp;
            for (int64_t k = 0; k < taps; ++k) {
              const int64_t o = conv_pos(id, ih, iw, k / (K.h * K.w), k / K.w % K.h, k % K.w);
              if (o >= 0) acc += w[k] * gy[o];
            }
          }
          r.grad_x[size_t(nc * in_sp + (id * I.h + ih) * I.w + iw)] = acc;
        }
  }
  return r;
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r = [] {
    Rung x;
    x.id = LADDER_RUNG_ID;
    x.name = LADDER_RUNG_NAME;
    x.idea = "the model and its backward as fp32 loops on the CPU (OpenMP over planes)";
    x.cpu_forward = forward;
    x.cpu_backward = backward;
    return x;
  }();
  return r;
}

}  // namespace ladder::p74
