// The weights as the TF32 wgmma rungs read B (stages 15 and 17): K-major, rounded to TF32 to
// nearest once per run, so the step loop only copies them. Stage 16 writes the same layout per
// TF32 part, with its own kernel (its split is that rung's idea).
#pragma once

#include <cstdint>

#include "conv_params.hpp"
#include "lib/mma_tile.cuh"    // kCiChunk, tf32_bits
#include "lib/wgmma_tile.cuh"  // kWgCo

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// The weights as wgmma reads B, K-major and rounded to TF32 (cvt.rna; wgmma itself truncates):
/// wt[group][chunk][co_tile][tap][khalf][128 co][4] =
/// tf32(weight[group*Cin/g + chunk*8 + khalf*4 + e, co_tile*128 + co, tap]), zero past the
/// group's channels. A (group, chunk, co_tile) block is one step's bulk copy; each (tap, khalf)
/// block of 128 x 4 floats is 16 core matrices of 8 channels x 16 bytes, 128 bytes apart.
/// weight (Cin, Cout/g, kH, kW) fp32; one thread per wt element, `total` of them.
__global__ void tf32_weight_kmajor(ConvParams p, const float* weight, float* wt, int chunks, int co_tiles,
                                   int64_t total) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const int taps = p.kernel_h * p.kernel_w;
  const int el = int(e % 4), co = int(e / 4 % kWgCo), khalf = int(e / (4 * kWgCo) % 2);
  int64_t rest = e / (8 * kWgCo);
  const int tap = int(rest % taps);
  rest /= taps;
  const int co_tile = int(rest % co_tiles);
  rest /= co_tiles;
  const int chunk = int(rest % chunks), group = int(rest / chunks);
  const int ci = chunk * kCiChunk + khalf * 4 + el, co_g = co_tile * kWgCo + co;
  float v = 0.0f;
  if (ci < p.in_per_group && co_g < p.out_per_group)
    v = weight[(int64_t(group * p.in_per_group + ci) * p.out_per_group + co_g) * taps + tap];
  wt[e] = __uint_as_float(tf32_bits(v));
}

}  // namespace
}  // namespace ladder
