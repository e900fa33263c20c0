// Problem 38's sizes and parameters as plain ints, passed by value to every kernel of the track.
#pragma once

#include <cstdint>

#include "../problem.hpp"

namespace ladder::p38 {

struct Geometry {
  int batch, in_channels, out_channels, groups, in_per_group, out_per_group;
  int in[3];      ///< D, H, W of x
  int pooled[3];  ///< D, H, W after AvgPool3d
  int out[3];     ///< D, H, W of the output
  // AvgPool3d
  int pool_kernel[3], pool_stride[3], pool_padding[3];
  bool count_include_pad;
  // ConvTranspose3d
  int kernel[3], stride[3], padding[3], dilation[3];
  float clamp_lo, clamp_hi;  ///< rounded to fp32, as torch.clamp does on an fp32 tensor
  int64_t spatial;           ///< S = D*H*W of the output: one softmax row
  int64_t pooled_spatial;    ///< D*H*W after the pool
  int64_t rows;              ///< batch * out_channels softmax rows
  int taps;                  ///< kD*kH*kW of the convolution
};

/// Validates p and packs it; throws InvalidProblem when a size does not fit in an int (the
/// kernels index one sample's channels with ints, flat tensors with int64).
Geometry make_geometry(const Problem38& p);

}  // namespace ladder::p38
