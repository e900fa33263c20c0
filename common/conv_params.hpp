// ConvTranspose2d sizes passed by value to kernels (no compile-time shapes: any Problem works).
#pragma once

#include <cstdint>

#include "problem.hpp"

namespace ladder {

struct ConvParams {
  int64_t batch, in_channels, out_channels;
  int64_t in_h, in_w, out_h, out_w;
  int64_t kernel_h, kernel_w, stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w;
  int64_t in_per_group, out_per_group;
};

inline ConvParams conv_params(const Problem& p) {
  return {p.batch,         p.in_channels,    p.out_channels,   p.in_h,           p.in_w,
          p.out_h(),       p.out_w(),        p.kernel_size.h,  p.kernel_size.w,  p.stride.h,
          p.stride.w,      p.padding.h,      p.padding.w,      p.dilation.h,     p.dilation.w,
          p.in_per_group(), p.out_per_group()};
}

}  // namespace ladder
