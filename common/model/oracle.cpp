#include "oracle.hpp"

#include <cmath>

#include "logsumexp.hpp"

namespace ladder {

std::vector<double> conv_transpose2d_literal(const Problem& p, const HostInputs& in) {
  const int64_t Hout = p.out_h(), Wout = p.out_w(), kH = p.kernel_size.h, kW = p.kernel_size.w;
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group();
  std::vector<double> out(size_t(p.out_elems()));
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co) {
      const int64_t g = co / cout_g, co_in_group = co % cout_g;
      double* plane = &out[size_t((n * p.out_channels + co) * Hout * Wout)];
      for (int64_t oh = 0; oh < Hout; ++oh)
        for (int64_t ow = 0; ow < Wout; ++ow) {
          double acc = in.conv_bias[size_t(co)];
          for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci)
            for (int64_t kh = 0; kh < kH; ++kh) {
              const int64_t ih_num = oh + p.padding.h - kh * p.dilation.h;
              if (ih_num < 0 || ih_num % p.stride.h != 0) continue;
              const int64_t ih = ih_num / p.stride.h;
              if (ih >= p.in_h) continue;
              for (int64_t kw = 0; kw < kW; ++kw) {
                const int64_t iw_num = ow + p.padding.w - kw * p.dilation.w;
                if (iw_num < 0 || iw_num % p.stride.w != 0) continue;
                const int64_t iw = iw_num / p.stride.w;
                if (iw >= p.in_w) continue;
                const double xv = in.x[size_t(((n * p.in_channels + ci) * p.in_h + ih) * p.in_w + iw)];
                const double wv = in.weight[size_t(((ci * cout_g + co_in_group) * kH + kh) * kW + kw)];
                acc += xv * wv;
              }
            }
          plane[oh * Wout + ow] = acc;
        }
    }
  return out;
}

std::vector<double> global_average_pool(const Problem& p, const std::vector<double>& conv_out) {
  const int64_t plane = p.out_h() * p.out_w();
  std::vector<double> pooled(size_t(p.pooled_elems()));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < p.pooled_elems(); ++i) {
    double sum = 0;
    for (int64_t j = 0; j < plane; ++j) sum += conv_out[size_t(i * plane + j)];
    pooled[size_t(i)] = sum / double(plane);
  }
  return pooled;
}

std::vector<double> bias_logsumexp_scale(const Problem& p, const std::vector<double>& pooled,
                                         const std::vector<float>& bias) {
  std::vector<double> y(size_t(p.batch));
  std::vector<double> z(size_t(p.out_channels));
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t co = 0; co < p.out_channels; ++co)
      z[size_t(co)] = pooled[size_t(n * p.out_channels + co)] + double(bias[size_t(co)]);
    y[size_t(n)] = p.scale * logsumexp(z.data(), z.size());
  }
  return y;
}

namespace {

// mean |terms| bound, shared by both oracles: |cb| + sum_{ci,taps} |w| * mean|x[n,ci]|.
std::vector<double> magnitude_bound(const Problem& p, const HostInputs& in,
                                    const std::vector<double>& plane_abs_mean) {
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group(), taps = p.taps();
  std::vector<double> mag(size_t(p.pooled_elems()));
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co) {
      const int64_t g = co / cout_g;
      double m = std::fabs(double(in.conv_bias[size_t(co)]));
      for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci) {
        double wsum = 0;
        for (int64_t t = 0; t < taps; ++t)
          wsum += std::fabs(double(in.weight[size_t((ci * cout_g + co % cout_g) * taps + t)]));
        m += wsum * plane_abs_mean[size_t(n * p.in_channels + ci)];
      }
      mag[size_t(n * p.out_channels + co)] = m;
    }
  return mag;
}

std::vector<double> plane_abs_means(const Problem& p, const HostInputs& in) {
  const int64_t planes = p.batch * p.in_channels, hw = p.in_h * p.in_w;
  std::vector<double> m(static_cast<size_t>(planes));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < planes; ++i) {
    double s = 0;
    for (int64_t j = 0; j < hw; ++j) s += std::fabs(double(in.x[size_t(i * hw + j)]));
    m[size_t(i)] = s / double(hw);
  }
  return m;
}

}  // namespace

Reference literal_pipeline(const Problem& p, const HostInputs& in) {
  p.validate();
  Reference r;
  r.pooled = global_average_pool(p, conv_transpose2d_literal(p, in));
  r.y = bias_logsumexp_scale(p, r.pooled, in.bias);
  r.magnitude = magnitude_bound(p, in, plane_abs_means(p, in));
  r.conv_mean.resize(r.pooled.size());
  for (size_t i = 0; i < r.pooled.size(); ++i)
    r.conv_mean[i] = r.pooled[i] - double(in.conv_bias[i % size_t(p.out_channels)]);
  return r;
}

Reference linearity_pipeline(const Problem& p, const HostInputs& in) {
  p.validate();
  const int64_t kH = p.kernel_size.h, kW = p.kernel_size.w, H = p.in_h, W = p.in_w;
  std::vector<InputRange> rows(static_cast<size_t>(kH)), cols(static_cast<size_t>(kW));
  for (int64_t kh = 0; kh < kH; ++kh)
    rows[size_t(kh)] = valid_input_range(H, p.out_h(), p.stride.h, p.padding.h, p.dilation.h, kh);
  for (int64_t kw = 0; kw < kW; ++kw)
    cols[size_t(kw)] = valid_input_range(W, p.out_w(), p.stride.w, p.padding.w, p.dilation.w, kw);

  // R[n, ci, kh, kw]: sum of x over rows[kh] x cols[kw], from prefix sums in double.
  const int64_t planes = p.batch * p.in_channels;
  std::vector<double> R(size_t(planes * kH * kW)), abs_mean(static_cast<size_t>(planes));
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const float* x = &in.x[size_t(plane * H * W)];
    std::vector<double> row_prefix(size_t(W + 1));
    std::vector<double> col_prefix(size_t(kW * (H + 1)), 0.0);  // per kw: prefix over rows
    double abs_sum = 0;
    for (int64_t ih = 0; ih < H; ++ih) {
      row_prefix[0] = 0;
      for (int64_t iw = 0; iw < W; ++iw) {
        row_prefix[size_t(iw + 1)] = row_prefix[size_t(iw)] + double(x[ih * W + iw]);
        abs_sum += std::fabs(double(x[ih * W + iw]));
      }
      for (int64_t kw = 0; kw < kW; ++kw) {
        const double part = row_prefix[size_t(cols[size_t(kw)].hi)] - row_prefix[size_t(cols[size_t(kw)].lo)];
        col_prefix[size_t(kw * (H + 1) + ih + 1)] = col_prefix[size_t(kw * (H + 1) + ih)] + part;
      }
    }
    for (int64_t kh = 0; kh < kH; ++kh)
      for (int64_t kw = 0; kw < kW; ++kw)
        R[size_t((plane * kH + kh) * kW + kw)] = col_prefix[size_t(kw * (H + 1) + rows[size_t(kh)].hi)] -
                                                 col_prefix[size_t(kw * (H + 1) + rows[size_t(kh)].lo)];
    abs_mean[size_t(plane)] = abs_sum / double(H * W);
  }

  // The contraction with the weights, divided by the output plane size.
  const double P = double(p.out_h()) * double(p.out_w());
  const int64_t cin_g = p.in_per_group(), cout_g = p.out_per_group(), taps = kH * kW;
  Reference r;
  r.pooled.resize(size_t(p.pooled_elems()));
  r.conv_mean.resize(size_t(p.pooled_elems()));
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t co = 0; co < p.out_channels; ++co) {
      const int64_t g = co / cout_g;
      double acc = 0;
      for (int64_t ci = g * cin_g; ci < (g + 1) * cin_g; ++ci)
        for (int64_t t = 0; t < taps; ++t)
          acc += double(in.weight[size_t((ci * cout_g + co % cout_g) * taps + t)]) *
                 R[size_t((n * p.in_channels + ci) * taps + t)];
      // (P*cb + acc)/P rather than cb + acc/P: the plane sum first, one rounding, as literally.
      r.pooled[size_t(n * p.out_channels + co)] = (P * double(in.conv_bias[size_t(co)]) + acc) / P;
      r.conv_mean[size_t(n * p.out_channels + co)] = acc / P;
    }
  r.y = bias_logsumexp_scale(p, r.pooled, in.bias);
  r.magnitude = magnitude_bound(p, in, abs_mean);
  return r;
}

}  // namespace ladder
