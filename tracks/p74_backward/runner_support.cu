// The problem-74 runner's helpers: device buffers, timing with CUDA events, the sampled forward
// check, the backward's multiply-add count and bitwise comparison (runner_support.hpp, runner.hpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "cuda_check.hpp"
#include "run_loop.hpp"  // poison
#include "runner.hpp"
#include "runner_support.hpp"

namespace ladder::p74 {

namespace detail {

void DeviceForwardOut::poison(cudaStream_t s) const {
  ladder::poison(out, s);  // NaN
  ladder::poison(y, s);
  ladder::poison(argmax, s);  // -1
}

DeviceBackwardIo::DeviceBackwardIo(const Problem74& p, const Saved& saved, const std::vector<float>& g)
    : grad_out(upload(g, "grad_out")),
      y_saved(upload(saved.y, "saved y")),
      argmax(upload(saved.argmax, "saved argmax")),
      grad_x(size_t(std::max<int64_t>(p.x_elems(), 1)), "grad_x"),
      grad_weight(size_t(std::max<int64_t>(p.weight_elems(), 1)), "grad_weight"),
      grad_bias(size_t(p.out_channels), "grad_bias"), grad_multiplier(size_t(p.out_channels), "grad_multiplier"),
      nx(size_t(p.x_elems())), nw(size_t(p.weight_elems())), nc(size_t(p.out_channels)) {
  const size_t n = size_t(p.out_elems());
  if (saved.argmax.size() != n || saved.y.size() != n || g.size() != n)
    throw std::invalid_argument("backward: saved argmax (" + std::to_string(saved.argmax.size()) + "), saved y (" +
                                std::to_string(saved.y.size()) + ") and grad_out (" + std::to_string(g.size()) +
                                ") must each have " + std::to_string(n) + " elements for " + p.describe());
}

void DeviceBackwardIo::poison(cudaStream_t s) const {
  for (const DeviceBuffer<float>* b : {&grad_x, &grad_weight, &grad_bias, &grad_multiplier}) ladder::poison(*b, s);
}

double DeviceBackwardIo::bytes() const {
  return double(grad_out.bytes() + y_saved.bytes() + argmax.bytes() + grad_x.bytes() + grad_weight.bytes() +
                grad_bias.bytes() + grad_multiplier.bytes());
}

}  // namespace detail

// --- checks ------------------------------------------------------------------------------------

namespace {

template <typename T>
std::vector<T> slice(const std::vector<T>& v, int64_t begin, int64_t count) {
  return std::vector<T>(v.begin() + begin, v.begin() + begin + count);
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace

std::vector<int64_t> samples_to_check(const Problem74& p, double oracle_max_macs, int max_samples) {
  std::vector<int64_t> s;
  const double per_sample = p.conv_macs() / double(p.batch);
  int64_t n = p.conv_macs() <= oracle_max_macs ? p.batch : int64_t(oracle_max_macs / per_sample);
  if (p.conv_macs() > oracle_max_macs) n = std::min<int64_t>(n, std::max(max_samples, 0));
  n = std::min(n, p.batch);
  if (n == 1) return {0};
  for (int64_t i = 0; i < n; ++i) s.push_back(i * (p.batch - 1) / (n - 1));  // first, last, even between
  return s;
}

const ForwardTolerance& ForwardOracle::tolerance(const Problem74& p, Precision precision) {
  auto it = tols.find(precision);
  if (it == tols.end()) it = tols.emplace(precision, forward_tolerance(p, ref, precision)).first;
  return it->second;
}

ForwardCheck check_forward_samples(const Problem74& p, const Inputs& in, const ForwardResult& got,
                                   const std::vector<int64_t>& samples, std::vector<ForwardOracle>* cache,
                                   Precision precision) {
  const int64_t n = p.out_elems();
  if (int64_t(got.out.size()) != n || int64_t(got.argmax.size()) != n || int64_t(got.y.size()) != n)
    throw std::invalid_argument("check_forward_samples: the result's out, argmax and y must each have " +
                                std::to_string(n) + " elements for " + p.describe());
  std::vector<ForwardOracle> local;
  std::vector<ForwardOracle>& oracles = cache ? *cache : local;
  Problem74 one = p;
  one.batch = 1;
  const bool whole = int64_t(samples.size()) == p.batch;  // every sample: one oracle run over the whole problem
  const int64_t per_x = p.x_elems() / p.batch, per_out = n / p.batch;
  if (oracles.empty()) {
    if (whole) {
      oracles.push_back({-1, forward(p, in)});
    }
    for (int64_t s : whole ? std::vector<int64_t>{} : samples) {
      if (s < 0 || s >= p.batch)
        throw std::invalid_argument("check_forward_samples: sample " + std::to_string(s) + " outside the batch of " +
                                    std::to_string(p.batch));
      oracles.push_back({s, forward(one, Inputs{slice(in.x, s * per_x, per_x), in.weight, in.bias, in.multiplier})});
    }
  }
  if (oracles.size() == 1 && oracles[0].sample < 0)
    return check_forward(p, oracles[0].ref, oracles[0].tolerance(p, precision), got);
  ForwardCheck total;
  for (ForwardOracle& o : oracles) {
    const int64_t s = o.sample;
    const ForwardResult mine{slice(got.out, s * per_out, per_out), slice(got.argmax, s * per_out, per_out),
                             slice(got.y, s * per_out, per_out)};
    const ForwardCheck c = check_forward(one, o.ref, o.tolerance(one, precision), mine);
    total.out.merge(c.out, s * per_out);
    total.y.merge(c.y, s * per_out);
    total.argmax_failures += c.argmax_failures;
    total.argmax_differs += c.argmax_differs;
    if (total.first_bad_argmax < 0 && c.first_bad_argmax >= 0)
      total.first_bad_argmax = s * per_out + c.first_bad_argmax;
  }
  return total;
}

double backward_macs(const Problem74& p, const Saved& saved) {
  const int64_t n = p.out_elems();
  if (int64_t(saved.argmax.size()) != n)
    throw std::invalid_argument("backward_macs: the saved argmax has " + std::to_string(saved.argmax.size()) +
                                " elements, " + p.describe() + " has " + std::to_string(n));
  const Triple conv = p.conv_size(), out = p.out_size(), in = p.in_size;
  const Triple pk = p.pool.kernel_size, ps = p.pool.effective_stride(), pp = p.pool.padding, pd = p.pool.dilation;
  // taps[a][o]: kernel taps k of axis a with o = i*stride - padding + k*dilation for some input i.
  std::vector<int64_t> taps[3];
  for (int a = 0; a < 3; ++a) {
    taps[a].assign(size_t(conv[a]), 0);
    for (int64_t o = 0; o < conv[a]; ++o)
      for (int64_t k = 0; k < p.conv.kernel_size[a]; ++k) {
        const int64_t t = o + p.conv.padding[a] - k * p.conv.dilation[a];
        if (t >= 0 && t % p.conv.stride[a] == 0 && t / p.conv.stride[a] < in[a]) ++taps[a][size_t(o)];
      }
  }
  const int64_t out_sp = out.d * out.h * out.w, conv_sp = conv.d * conv.h * conv.w;
  std::vector<bool> seen(size_t(p.conv_elems()), false);  // a position routed by several windows counts once
  double macs = 0;
  for (int64_t e = 0; e < n; ++e) {
    const int32_t off = saved.argmax[size_t(e)];
    if (off < 0 || off >= p.pool_window()) continue;  // a broken argmax: the check reports it
    const int64_t q = e % out_sp, nc = e / out_sp;
    const int64_t qd = q / (out.h * out.w), qh = q / out.w % out.h, qw = q % out.w;
    const int64_t jd = off / (pk.h * pk.w), jh = off / pk.w % pk.h, jw = off % pk.w;
    const int64_t od = qd * ps.d - pp.d + jd * pd.d;
    const int64_t oh = qh * ps.h - pp.h + jh * pd.h;
    const int64_t ow = qw * ps.w - pp.w + jw * pd.w;
    if (od < 0 || od >= conv.d || oh < 0 || oh >= conv.h || ow < 0 || ow >= conv.w) continue;  // padding
    const int64_t pos = nc * conv_sp + (od * conv.h + oh) * conv.w + ow;
    if (seen[size_t(pos)]) continue;
    seen[size_t(pos)] = true;
    macs += double(taps[0][size_t(od)] * taps[1][size_t(oh)] * taps[2][size_t(ow)]);
  }
  return 2.0 * macs * double(p.in_per_group());
}

bool bitwise_equal(const ForwardResult& a, const ForwardResult& b) {
  return same_bits(a.out, b.out) && same_bits(a.argmax, b.argmax) && same_bits(a.y, b.y);
}

bool bitwise_equal(const GradResult& a, const GradResult& b) {
  return same_bits(a.grad_x, b.grad_x) && same_bits(a.grad_weight, b.grad_weight) &&
         same_bits(a.grad_bias, b.grad_bias) && same_bits(a.grad_multiplier, b.grad_multiplier);
}

bool RungResult::check_passed() const {
  if (!checked) return false;  // unchecked is never "passed" (all_passed does not count it as failed)
  if (forward_check) return forward_check->pass();
  return grad_check && grad_check->pass();
}

double RungResult::worst_ratio() const {
  double w = 0;
  if (forward_check) w = std::max(forward_check->out.worst_ratio, forward_check->y.worst_ratio);
  if (grad_check)
    for (const Agreement* a : {&grad_check->x, &grad_check->weight, &grad_check->bias, &grad_check->multiplier})
      w = std::max(w, a->worst_ratio);
  return w;
}

double TrackReport::fwd_compute_floor_ms() const {
  return fp32_peak_tflops > 0 ? 2.0 * problem.conv_macs() / (fp32_peak_tflops * 1e12) * 1e3 : 0.0;
}

double TrackReport::bwd_compute_floor_ms() const {
  return fp32_peak_tflops > 0 ? 2.0 * backward_macs / (fp32_peak_tflops * 1e12) * 1e3 : 0.0;
}

bool TrackReport::all_passed() const {
  for (const RungResult& r : rungs)
    if (r.failed || (r.ran && r.checked && !r.check_passed())) return false;
  return true;
}

}  // namespace ladder::p74
