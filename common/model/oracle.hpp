// fp64 host oracles. Both take the fp32 inputs, widen them to double, and compute every
// intermediate in double, so their own rounding (~1e-16 relative) is invisible next to fp32.
#pragma once

#include <vector>

#include "inputs.hpp"
#include "problem.hpp"

namespace ladder {

/// pooled (batch, out_channels) and y (batch), plus the scale that fp32 error bounds need.
struct Reference {
  std::vector<double> pooled;
  std::vector<double> y;
  /// |conv_bias| + sum over taps of |w| * mean|x| of the plane: an upper bound on the mean of
  /// sum |terms| that fp32 rounding errors are proportional to (see tolerance.hpp).
  std::vector<double> magnitude;
  /// pooled - conv_bias: the plane mean of the convolution without its bias. A stage that adds
  /// conv_bias after the mean rounds this part on its own (exact_tolerance, tolerance.hpp).
  std::vector<double> conv_mean;
};

/// Step 1 of the literal pipeline: the ConvTranspose2d output, (batch, out_channels, Hout, Wout),
/// by the gather form out = cb + sum_{ci,kh,kw} x[ih,iw] * w, ih = (oh + padding - kh*dilation)/stride
/// when that division is exact and 0 <= ih < in_h (same for iw). OpenMP over (n, co).
std::vector<double> conv_transpose2d_literal(const Problem& p, const HostInputs& in);
/// Step 2: mean over each (n, co) plane of a (batch, out_channels, Hout, Wout) tensor.
std::vector<double> global_average_pool(const Problem& p, const std::vector<double>& conv_out);
/// Step 3: y[n] = scale * logsumexp_co(pooled[n, co] + bias[co]) (torch.logsumexp semantics).
std::vector<double> bias_logsumexp_scale(const Problem& p, const std::vector<double>& pooled,
                                         const std::vector<float>& bias);

/// The literal pipeline: materializes the convT output. Cost ~ conv_macs(); small problems only.
Reference literal_pipeline(const Problem& p, const HostInputs& in);

/// The linearity identity (pool before conv): one pass over x collecting, per (n, ci) plane and
/// tap (kh, kw), the sum R of the input rectangle whose tap lands inside the output; then
/// pooled[n,co] = cb[co] + (1/(Hout*Wout)) sum_{ci,kh,kw} w[ci,co,kh,kw] * R[n,ci,kh,kw].
/// Exact for every parameter (padding and output_padding cut rows/columns out of R). Any size.
/// It divides (Hout*Wout*cb + sum w*R) by Hout*Wout, as the literal pipeline divides its plane
/// sum: on exact inputs (inputs.hpp) both sums are the same integer and the oracles agree bit
/// for bit.
Reference linearity_pipeline(const Problem& p, const HostInputs& in);

}  // namespace ladder
