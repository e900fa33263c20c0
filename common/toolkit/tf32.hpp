// TF32, the 19-bit format tensor cores multiply in from sm_80 on: fp32's sign and 8 exponent
// bits, 10 explicit mantissa bits (unit roundoff 2^-11). Host emulation of the device's
// conversion, for the TF32 error bound's tests and the 3xTF32 split (CUTLASS's "3xTF32": a value
// as a TF32 high part plus a TF32 residual, so that three TF32 products give fp32-level products).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ladder {

constexpr double kTf32UnitRoundoff = 4.8828125e-04;  // 2^-11

constexpr uint32_t kTf32Mask = 0xFFFFE000u;  // fp32's sign, exponent and TF32's 10 mantissa bits

/// x's fp32 encoding with f applied to it (f: uint32_t -> uint32_t).
template <typename F>
inline float with_bits(float x, F f) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = f(bits);
  float r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

/// x rounded to TF32 as PTX's cvt.rna.tf32.f32 rounds it: to nearest, ties away from zero; the
/// 13 low mantissa bits of the result are zero. NaN and infinity pass through; a value that
/// rounds above the largest finite one becomes infinity.
inline float round_to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  // + half of the 13 dropped bits: sign-magnitude, so ties go away from zero
  return with_bits(x, [](uint32_t b) { return (b + 0x1000u) & kTf32Mask; });
}

/// x with its 13 low mantissa bits cleared: TF32 by truncation, what a kernel that masks without
/// cvt.rna's half-step add computes (the mutant a TF32 check must reject).
inline float truncate_to_tf32(float x) {
  return with_bits(x, [](uint32_t b) { return b & kTf32Mask; });
}

/// x (finite) moved to 3/4 of the way from the TF32 value below it in magnitude to the next one
/// (low 13 bits 0x1800 of a step of 0x2000): rounding to nearest then errs by a quarter step,
/// truncation by three quarters, so a check can tell them apart (the TF32 midpoint tests).
inline float tf32_three_quarters(float x) {
  return with_bits(x, [](uint32_t b) { return (b & kTf32Mask) | 0x1800u; });
}

/// The 3xTF32 split of x: big = tf32(x), small = tf32(x - big) (x - big is exact in fp32).
/// big + small equals x to within 2^-22 |x| (two TF32 roundings of 11 bits each), and
/// a*b ~ big_a*big_b + big_a*small_b + small_a*big_b drops only small_a*small_b (~2^-22 |a*b|).
struct Tf32Split {
  float big;
  float small;
};
inline Tf32Split split_tf32(float x) {
  const float big = round_to_tf32(x);
  return {big, round_to_tf32(x - big)};
}

}  // namespace ladder
