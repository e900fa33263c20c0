// Rung 00: the CPU reference. The model written as loops in fp32, one (sample, channel) row per
// OpenMP thread at a time: AvgPool3d, the ConvTranspose3d gather, clamp, then the row's softmax
// with the max subtracted (max, sum of exp, divide) and the scale. The GPU rungs are checked
// against the fp64 oracle, not against this; it is the starting point and a timing baseline.
#include <algorithm>
#include <cmath>

#include "../../oracle.hpp"
#include "../../rung.hpp"
#include "rung_id.hpp"  // LADDER_RUNG_ID, LADDER_RUNG_NAME, LADDER_RUNG_SYMBOL

namespace ladder::p38 {
namespace {

std::vector<float> run(const Problem38& p, const Inputs& in) {
  p.validate();
  const Triple ps = p.pooled_size(), os = p.out_size(), pst = p.pool.effective_stride();
  const int64_t P = ps.d * ps.h * ps.w, S = p.spatial(), rows = p.batch * p.out_channels;
  // Pool, in fp32, with PyTorch's divisor (oracle.hpp's pool_divisor).
  std::vector<float> pooled(size_t(p.batch * p.in_channels * P));
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < p.batch * p.in_channels; ++plane)
    for (int64_t od = 0; od < ps.d; ++od)
      for (int64_t oh = 0; oh < ps.h; ++oh)
        for (int64_t ow = 0; ow < ps.w; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          int64_t lo[3], hi[3], divisor = 1;
          for (int a = 0; a < 3; ++a) {
            const int64_t start = o[a] * pst[a] - p.pool.padding[a];
            lo[a] = std::max<int64_t>(start, 0);
            hi[a] = std::min(std::min(start + p.pool.kernel_size[a], p.in_size[a] + p.pool.padding[a]), p.in_size[a]);
            divisor *= pool_divisor(p, a, o[a]);
          }
          float sum = 0.f;
          for (int64_t d = lo[0]; d < hi[0]; ++d)
            for (int64_t h = lo[1]; h < hi[1]; ++h)
              for (int64_t w = lo[2]; w < hi[2]; ++w)
                sum += in.x[size_t((plane * p.in_size.d + d) * p.in_size.h + h) * size_t(p.in_size.w) + size_t(w)];
          pooled[size_t(plane * P + (od * ps.h + oh) * ps.w + ow)] = sum / float(divisor);
        }
  std::vector<float> out(size_t(rows * S));
  const float lo = float(clamp_lo(p)), hi = float(clamp_hi(p));
  const Triple k = p.conv.kernel_size, st = p.conv.stride, pad = p.conv.padding, dil = p.conv.dilation;
#pragma omp parallel for schedule(dynamic)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t n = row / p.out_channels, co = row % p.out_channels;
    const int64_t group = co / p.out_per_group(), co_local = co % p.out_per_group();
    float* z = out.data() + row * S;
    for (int64_t od = 0; od < os.d; ++od)
      for (int64_t oh = 0; oh < os.h; ++oh)
        for (int64_t ow = 0; ow < os.w; ++ow) {
          float acc = in.bias[size_t(co)];
          for (int64_t cig = 0; cig < p.in_per_group(); ++cig) {
            const int64_t ci = group * p.in_per_group() + cig;
            for (int64_t kd = 0; kd < k.d; ++kd) {
              const int64_t td = od + pad.d - kd * dil.d;
              if (td < 0 || td % st.d || td / st.d >= ps.d) continue;
              for (int64_t kh = 0; kh < k.h; ++kh) {
                const int64_t th = oh + pad.h - kh * dil.h;
                if (th < 0 || th % st.h || th / st.h >= ps.h) continue;
                for (int64_t kw = 0; kw < k.w; ++kw) {
                  const int64_t tw = ow + pad.w - kw * dil.w;
                  if (tw < 0 || tw % st.w || tw / st.w >= ps.w) continue;
                  const int64_t at = (td / st.d * ps.h + th / st.h) * ps.w + tw / st.w;  // in the pooled volume
                  const float v = pooled[size_t((n * p.in_channels + ci) * P + at)];
                  const int64_t w_at = ((ci * p.out_per_group() + co_local) * k.d + kd) * k.h * k.w + kh * k.w + kw;
                  acc += v * in.weight[size_t(w_at)];
                }
              }
            }
          }
          acc = acc < lo ? lo : acc;
          z[(od * os.h + oh) * os.w + ow] = acc > hi ? hi : acc;
        }
    float m = -INFINITY;
    for (int64_t i = 0; i < S; ++i) m = std::max(m, z[i]);
    float sum = 0.f;
    for (int64_t i = 0; i < S; ++i) sum += std::exp(z[i] - m);
    const float factor = in.scale[size_t(co)] / sum;
    for (int64_t i = 0; i < S; ++i) z[i] = std::exp(z[i] - m) * factor;
  }
  return out;
}

}  // namespace

const Rung& LADDER_RUNG_SYMBOL() {
  static const Rung r{LADDER_RUNG_ID, LADDER_RUNG_NAME, "the model as fp32 loops on the CPU (OpenMP over rows)", run};
  return r;
}

}  // namespace ladder::p38
