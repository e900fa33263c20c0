// The problem matrix every GPU stage is tested on: odd and prime sizes, every ConvTranspose2d
// parameter, batch 1, out_channels 1, plane sizes that are not multiples of 4, 32 or a block.
// make() draws structured inputs; the GPU tests run each problem with exact inputs too.
#pragma once

#include <vector>

#include "problem.hpp"

namespace ladder::testing {

inline Problem make(int64_t batch, int64_t cin, int64_t cout, int64_t h, int64_t w, Pair k,
                    Pair stride = {1, 1}, Pair padding = {0, 0}, Pair output_padding = {0, 0},
                    Pair dilation = {1, 1}, int64_t groups = 1) {
  Problem p;
  p.batch = batch;
  p.in_channels = cin;
  p.out_channels = cout;
  p.in_h = h;
  p.in_w = w;
  p.kernel_size = k;
  p.stride = stride;
  p.padding = padding;
  p.output_padding = output_padding;
  p.dilation = dilation;
  p.groups = groups;
  p.distribution = Distribution::Structured;
  p.seed = uint64_t(batch * 1000003 + cin * 1009 + cout * 101 + h * 13 + w);
  return p;
}

inline std::vector<Problem> gpu_problem_matrix() {
  return {
      make(2, 3, 16, 32, 32, {3, 3}),                               // KernelBench v1 shape, small batch
      make(1, 1, 1, 1, 1, {1, 1}),                                  // the smallest problem
      make(1, 3, 1, 7, 5, {3, 3}),                                  // batch 1, out_channels 1
      make(3, 5, 7, 13, 11, {3, 3}),                                // primes everywhere
      make(2, 4, 6, 17, 19, {5, 3}),                                // non-square kernel
      make(2, 3, 5, 9, 14, {3, 2}, {2, 2}),                         // stride 2
      make(1, 2, 3, 11, 7, {4, 4}, {3, 2}),                         // stride 3 x 2
      make(2, 3, 4, 10, 9, {3, 3}, {1, 1}, {1, 1}),                 // padding
      make(2, 2, 3, 8, 8, {5, 5}, {1, 1}, {2, 1}),                  // padding 2 x 1
      make(2, 3, 3, 9, 7, {3, 3}, {2, 2}, {1, 1}, {1, 1}),          // output_padding
      make(1, 2, 5, 6, 13, {3, 4}, {3, 2}, {1, 0}, {2, 1}),         // output_padding 2 x 1
      make(2, 3, 2, 12, 10, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {2, 2}),  // dilation 2
      make(1, 2, 3, 7, 9, {2, 3}, {1, 1}, {1, 2}, {1, 0}, {3, 2}),  // output_padding < dilation
      make(2, 4, 4, 9, 9, {3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 2),  // groups 2
      make(1, 8, 12, 7, 6, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 4),  // groups 4, stride
      make(2, 6, 3, 5, 8, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {2, 3}, 3),  // groups 3 = out_channels
      make(1, 4, 8, 11, 13, {1, 1}),                                // 1x1 kernel: plane 143
      make(1, 3, 2, 1, 31, {1, 3}),                                 // a single row
      make(2, 2, 3, 29, 1, {3, 1}),                                 // a single column
      make(1, 2, 2, 2, 2, {2, 2}, {1, 1}, {1, 1}),                  // 1x1 output: plane < warp
      make(3, 2, 2, 3, 3, {2, 2}),                                  // plane 16 < warp
      make(1, 3, 2, 4, 5, {2, 2}, {1, 1}, {0, 0}),                  // plane 30, not /4
      make(2, 2, 3, 30, 30, {3, 3}),                                // plane 32*32 = 1024
      make(1, 2, 2, 31, 31, {3, 3}),                                // plane 33*33 = 1089
      make(1, 2, 2, 62, 62, {3, 3}),                                // plane 64*64 = 4096 (x4, x32, x256)
      make(1, 3, 4, 63, 65, {3, 3}),                                // plane 65*67, odd
      make(2, 3, 3, 127, 61, {2, 2}, {2, 2}),                       // plane 254*122 = 30988
      make(1, 2, 2, 251, 257, {3, 3}),                              // plane 253*259 = 65527, > one block's chunk
      make(1, 16, 8, 64, 64, {3, 3}, {2, 2}, {1, 1}, {1, 1}),       // stride 2, larger
      make(4, 8, 16, 33, 47, {3, 5}, {1, 2}, {1, 2}, {0, 1}, {2, 1}, 2),  // everything at once
      make(1, 64, 128, 16, 16, {3, 3}),                             // KernelBench channels
  };
}

}  // namespace ladder::testing
