// Which input rows (or columns) a tap of a transposed convolution reaches inside the output: the
// one formula that the fp64 oracle (valid_input_range, in int64_t) and the identity's device
// code (lib/tap_window.cuh's tap_span, in int: a 64-bit division is a subroutine call on the GPU)
// both instantiate, so the two cannot drift apart.
#pragma once

#if defined(__CUDACC__)
#define LADDER_TAP_HD __host__ __device__
#else
#define LADDER_TAP_HD
#endif

namespace ladder {

/// Input indices [lo, hi) along one axis; empty ranges are {0, 0}.
template <class I>
struct TapRange {
  I lo, hi;
};

/// The input indices i whose products with tap k land in the output:
///   0 <= i*stride - padding + k*dilation < out,   0 <= i < in
/// (the scatter form of ConvTranspose2d along one axis, docs/problem.md). I is int64_t for the
/// oracle, int on the device, where Problem::validate keeps out + padding + dilation*k + stride
/// below 2^31 - 1.
template <class I>
LADDER_TAP_HD inline TapRange<I> tap_range(I in, I out, I stride, I padding, I dilation, I k) {
  // Ceiling division that rounds toward +inf for negative numerators too.
  auto ceil_div = [](I a, I b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  const I lo_num = padding - k * dilation;
  const I hi_num = out + padding - k * dilation;  // exclusive
  I lo = ceil_div(lo_num, stride), hi = ceil_div(hi_num, stride);
  lo = lo < 0 ? I(0) : lo;
  hi = hi > in ? in : hi;
  return hi > lo ? TapRange<I>{lo, hi} : TapRange<I>{I(0), I(0)};
}

}  // namespace ladder
