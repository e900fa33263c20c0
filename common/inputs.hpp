// Deterministic host-side inputs, drawn from a seed with a counter-based generator so that
// any element can be computed independently (in parallel) and every platform agrees.
#pragma once

#include <vector>

#include "problem.hpp"

namespace ladder {

/// Host copies of the four inputs, fp32, layouts as in Problem.
struct HostInputs {
  std::vector<float> x;          ///< (batch, in_channels, in_h, in_w)
  std::vector<float> weight;     ///< (in_channels, out_channels/groups, kH, kW)
  std::vector<float> conv_bias;  ///< (out_channels)
  std::vector<float> bias;       ///< (out_channels, 1, 1)
};

/// Draws the inputs for `p` (p.distribution, p.seed):
///  - weight, conv_bias ~ U(-b, b), b = 1/sqrt(fan_in), fan_in = (out_channels/groups)*kH*kW
///    (PyTorch's default ConvTranspose2d initialization; fan_in is weight.size(1)*kH*kW);
///  - bias ~ N(0, 1) (torch.randn in the KernelBench model);
///  - x ~ U[0,1) (uniform), N(0,1) (normal), or structured: plane (n, ci) is
///    mean[n,ci] + a*(row ramp) + b*(column ramp) + U(-0.1, 0.1), with plane means spread
///    evenly over [-2, 2] in a seeded random order, so every plane has a clearly different mean
///    and a wrong row or column mapping changes the pooled value.
/// Throws InvalidProblem if p is invalid.
HostInputs make_inputs(const Problem& p);

/// The counter-based generator: uniform float in [0, 1) for (seed, stream, index).
float uniform01(uint64_t seed, uint64_t stream, uint64_t index);
/// Standard normal via Box-Muller on two counter-based uniforms.
float standard_normal(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace ladder
