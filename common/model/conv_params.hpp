// ConvTranspose2d sizes passed by value to kernels (no compile-time shapes: any Problem works).
#pragma once

#include <cstdint>

#include "problem.hpp"

namespace ladder {

/// Whole-tensor offsets need 64 bits; everything inside a plane or a channel fits in 32
/// (Problem::validate checks that), and 32-bit index arithmetic is several times cheaper.
struct ConvParams {
  int64_t batch;
  int in_channels, out_channels;
  int in_h, in_w, out_h, out_w;
  int kernel_h, kernel_w, stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w;
  int in_per_group, out_per_group;
};

/// Kernel parameters for a validated problem.
inline ConvParams conv_params(const Problem& p) {
  return {p.batch,
          int(p.in_channels),    int(p.out_channels),   int(p.in_h),        int(p.in_w),
          int(p.out_h()),        int(p.out_w()),        int(p.kernel_size.h), int(p.kernel_size.w),
          int(p.stride.h),       int(p.stride.w),       int(p.padding.h),   int(p.padding.w),
          int(p.dilation.h),     int(p.dilation.w),     int(p.in_per_group()), int(p.out_per_group())};
}

}  // namespace ladder
