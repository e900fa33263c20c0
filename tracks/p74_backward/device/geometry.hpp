// Problem 74's sizes and parameters as plain ints, passed by value to every kernel of the track.
#pragma once

#include <cstdint>
#include <string>

#include "../problem.hpp"

namespace ladder::p74 {

struct Geometry {
  int batch, in_channels, out_channels, groups, in_per_group, out_per_group;
  int in[3];    ///< D, H, W of x
  int conv[3];  ///< D, H, W of the ConvTranspose3d output (y, z)
  int out[3];   ///< D, H, W of the MaxPool3d output
  // ConvTranspose3d
  int kernel[3], stride[3], padding[3], dilation[3];
  int taps;  ///< kD*kH*kW
  // MaxPool3d
  int pool_kernel[3], pool_stride[3], pool_padding[3], pool_dilation[3];
  int pool_window;  ///< kD*kH*kW of the pool
  float slope;      ///< negative_slope rounded to fp32, as PyTorch applies it
  int64_t in_spatial, conv_spatial, out_spatial;  ///< D*H*W of x, y and out
  int64_t x_elems, conv_elems, out_elems, weight_elems;
};

/// Validates p and packs it; throws InvalidProblem when a size does not fit in an int (kernels
/// index within one sample and channel with ints, flat tensors with int64).
Geometry make_geometry(const Problem74& p);

/// Blocks for n threads of `block` each; throws InvalidProblem naming `kernel` when the grid
/// would exceed CUDA's 2^31 - 1 blocks in x.
unsigned grid_for(int64_t n, int block, const char* kernel);

/// For the fast rungs (04, 09), which are written for the KernelBench geometry family only
/// (ConvTranspose3d kernel_size 3, stride 2, padding 1, dilation 1, output_padding 0 or 1,
/// groups 1; MaxPool3d kernel_size 2, stride 2, padding 0, dilation 1, ceil_mode False; any
/// batch, channels and input size): "" inside the family, else one sentence naming `rung` and
/// the first parameter outside it.
std::string kernelbench_family_mismatch(const Problem74& p, const std::string& rung);

}  // namespace ladder::p74
