// The tap windows of the linearity identity (docs/problem.md, "Pooling before convolving: the
// linearity identity"), for the stages that pool x instead of the convT output:
//
//   R[n,ci,kh,kw] = sum of x[n,ci] over the input rows rows(kh) and columns cols(kw) whose
//                   products with tap (kh, kw) land inside the output
//
// which rows and columns those are (tap_span), how R is formed from the plane sum S and at most
// four rectangles of x (plan_tap), and R for every tap of one plane by one block
// (plane_tap_sums). This is all the border handling there is: with padding 0 every tap sees the
// whole plane, R is the plane sum for every tap, and nothing is planned or read again.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "problem.hpp"
#include "tap_range.hpp"
#include "todo.cuh"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

/// Input rows [lo, hi) whose tap k lands in the output: 0 <= ih*stride - padding + k*dilation
/// < out. The oracle's formula (common/model/tap_range.hpp, which valid_input_range instantiates in
/// int64_t) in 32-bit arithmetic, for the device, where a 64-bit division is a subroutine call.
/// Problem::validate bounds out + padding + dilation*(kernel - 1) + stride below 2^31 - 1, so
/// nothing overflows; taps_have_border checks the narrowing on every tap. Empty ranges are {0, 0}.
using Span = TapRange<int>;
__host__ __device__ inline Span tap_span(int in, int out, int stride, int padding, int dilation, int k) {
  return tap_range<int>(in, out, stride, padding, dilation, k);
}

/// Rows [r0, r1) x columns [c0, c1) of a plane; empty when either side is.
struct Rect {
  int r0, r1, c0, c1;
};

/// How R for one tap is formed from the plane sum S and at most four disjoint rectangles:
/// Zero (the tap sees no input), Whole (R = S: no border), Direct (R = sum of rect[0], the
/// window itself) or Frame (R = S - sum of the four rects: the top and bottom strips over full
/// rows, the left and right strips over the rows in between, so every corner is counted once).
/// Direct is chosen when the window is at most half the plane, so no tap re-reads more than
/// half a plane however large the padding or dilation.
enum class TapMode { Zero, Whole, Direct, Frame };
struct TapPlan {
  TapMode mode;
  Rect rect[4];  // unused rects are empty
};
__host__ __device__ inline TapPlan plan_tap(Span rows, Span cols, int H, int W) {
  // BEGIN SOLUTION 12
  // STUB: ladder_todo("12.5", "plan_tap: how R of a tap is formed (Zero, Whole, Direct or Frame)");
  // STUB: ladder_unused(rows, cols, H, W);
  // STUB: return TapPlan{TapMode::Zero, {}};
  TapPlan t{TapMode::Zero, {{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}};
  if (rows.hi == rows.lo || cols.hi == cols.lo) return t;
  if (rows.lo == 0 && rows.hi == H && cols.lo == 0 && cols.hi == W) {
    t.mode = TapMode::Whole;
    return t;
  }
  const int64_t window = int64_t(rows.hi - rows.lo) * (cols.hi - cols.lo);
  if (window <= int64_t(H) * W - window) {
    t.mode = TapMode::Direct;
    t.rect[0] = {rows.lo, rows.hi, cols.lo, cols.hi};
    return t;
  }
  t.mode = TapMode::Frame;
  t.rect[0] = {0, rows.lo, 0, W};              // top strip, corners included
  t.rect[1] = {rows.hi, H, 0, W};              // bottom strip, corners included
  t.rect[2] = {rows.lo, rows.hi, 0, cols.lo};  // left strip
  t.rect[3] = {rows.lo, rows.hi, cols.hi, W};  // right strip
  return t;
  // END SOLUTION
}

/// The plan of tap (kh, kw) of a problem.
__host__ __device__ inline TapPlan plan_tap(const ConvParams& c, int kh, int kw) {
  const Span rows = tap_span(c.in_h, c.out_h, c.stride_h, c.padding_h, c.dilation_h, kh);
  const Span cols = tap_span(c.in_w, c.out_w, c.stride_w, c.padding_w, c.dilation_w, kw);
  return plan_tap(rows, cols, c.in_h, c.in_w);
}

/// This thread's share of the sum of plane[r0:r1, c0:c1] (row length W), block-strided. Only
/// border strips and small windows come here, so the scattered column reads do not matter.
__device__ inline float rect_partial(const float* __restrict__ plane, int W, Rect r) {
  const int cols = r.c1 - r.c0;
  const int n = (r.r1 - r.r0) * cols;  // <= H*W < 2^31
  float acc = 0.0f;
  for (int e = int(threadIdx.x); e < n; e += int(blockDim.x))
    acc += __ldg(plane + (r.r0 + e / cols) * W + (r.c0 + e % cols));
  return acc;
}

/// R[t] for every tap t = kh*kW + kw of one (n, ci) plane, by one block: S is the plane's sum,
/// plane its first element (H*W floats), R (taps floats) is written by the block (visible to it
/// after a barrier). has_border: taps_have_border(problem); without a border every tap's R is S,
/// and the plans, with their integer divisions in every thread, are skipped.
/// block_sum(v) must return the sum of v over the block to every thread, in a fixed order.
/// Every thread of the block calls this: the plan of a tap is the same in every thread, so
/// the block takes each branch, and each block_sum, together.
template <typename BlockSum>
__device__ void plane_tap_sums(const ConvParams& c, bool has_border, const float* __restrict__ plane, float S,
                               float* __restrict__ R, BlockSum block_sum) {
  // BEGIN SOLUTION 12
  // STUB: ladder_todo("12.6", "plane_tap_sums: R[t] of every tap of the plane, as plan_tap says");
  // STUB: ladder_unused(c, has_border, plane, S, R, block_sum);
  const int taps = c.kernel_h * c.kernel_w;
  if (!has_border) {
    for (int t = int(threadIdx.x); t < taps; t += int(blockDim.x)) R[t] = S;
    return;
  }
  for (int t = 0; t < taps; ++t) {
    const TapPlan tp = plan_tap(c, t / c.kernel_w, t % c.kernel_w);
    float r = tp.mode == TapMode::Whole ? S : 0.0f;
    if (tp.mode == TapMode::Direct || tp.mode == TapMode::Frame) {
      float mine = 0.0f;
#pragma unroll
      for (int i = 0; i < 4; ++i) mine += rect_partial(plane, c.in_w, tp.rect[i]);
      const float v = block_sum(mine);
      r = tp.mode == TapMode::Direct ? v : S - v;
    }
    if (threadIdx.x == 0) R[t] = r;
  }
  // END SOLUTION
}

/// Host side, before a launch: true if some tap's window misses part of the plane (padding
/// crops it), false if every tap sees the whole plane (padding 0, the KernelBench case). Throws
/// std::logic_error naming the axis and tap if tap_span disagrees with valid_input_range (the
/// oracle's function) on any tap of the problem.
inline bool taps_have_border(const Problem& p) {
  bool border = false;
  const auto check = [&border](const char* axis, int64_t in, int64_t out, int64_t stride, int64_t padding,
                               int64_t dilation, int64_t kernel) {
    for (int64_t k = 0; k < kernel; ++k) {
      const Span s = tap_span(int(in), int(out), int(stride), int(padding), int(dilation), int(k));
      const InputRange r = valid_input_range(in, out, stride, padding, dilation, k);
      if (s.lo != r.lo || s.hi != r.hi)
        throw std::logic_error(std::string("tap_span disagrees with valid_input_range on ") + axis + ", tap " +
                               std::to_string(k) + ": [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) +
                               ") against [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + ")");
      border |= s.lo != 0 || s.hi != in;
    }
  };
  check("rows", p.in_h, p.out_h(), p.stride.h, p.padding.h, p.dilation.h, p.kernel_size.h);
  check("columns", p.in_w, p.out_w(), p.stride.w, p.padding.w, p.dilation.w, p.kernel_size.w);
  return border;
}

}  // namespace
}  // namespace ladder
