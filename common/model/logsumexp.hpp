// Log-sum-exp with torch.logsumexp's semantics, for host and device code.
//
// torch computes  m = amax(z); m' = (|m| == inf) ? 0 : m;  lse = log(sum(exp(z - m'))) + m'
// (ATen ReduceOps.cpp, logsumexp_out_impl). Subtracting the max keeps exp from overflowing;
// replacing an infinite max by 0 gives: any +inf -> +inf, all -inf -> -inf, any NaN -> NaN
// (NaN survives the sum), and an empty set -> -inf.
#pragma once

#include <cmath>
#include <cstddef>

#if defined(__CUDACC__)
#define LADDER_HD __host__ __device__
#else
#define LADDER_HD
#endif

namespace ladder {

// Unqualified exp/log/isinf resolve to the float or double overloads on host and device.
using std::exp;
using std::isinf;
using std::log;

/// Shift used before exponentiating: the max, or 0 when the max is infinite (torch's rule).
template <typename T>
LADDER_HD inline T lse_shift(T max_value) {
  return isinf(max_value) ? T(0) : max_value;
}

/// Folds one more value into an online (running max, sum of exp(z - max)) pair.
/// Starting pair: max = -inf, sum = 0. The result equals the two-pass formula up to rounding.
/// Source: Milakov & Gimelshein, "Online normalizer calculation for softmax" (2018).
template <typename T>
LADDER_HD inline void lse_push(T& max_value, T& sum, T z) {
  if (z > max_value) {  // a NaN z never takes this branch; it poisons the sum below instead
    // While the max is -inf the sum is exactly 0 (or NaN): keep it, a rescale could be 0 * inf.
    if (max_value != T(-INFINITY)) sum = sum * exp(lse_shift(max_value) - lse_shift(z));
    max_value = z;
  }
  sum += exp(z - lse_shift(max_value));
}

/// Merges two online pairs (a) <- (a) + (b); associative, so warps can combine in any tree.
template <typename T>
LADDER_HD inline void lse_merge(T& max_a, T& sum_a, T max_b, T sum_b) {
  if (max_b > max_a) {
    // A side whose max is -inf has a sum of exactly 0 (or NaN): add it unscaled (no 0 * inf).
    sum_a = (max_a == T(-INFINITY) ? sum_a : sum_a * exp(lse_shift(max_a) - lse_shift(max_b))) + sum_b;
    max_a = max_b;
  } else {
    sum_a += max_b == T(-INFINITY) ? sum_b : sum_b * exp(lse_shift(max_b) - lse_shift(max_a));
  }
}

/// The final value from an online pair. NaN anywhere in the inputs has made sum NaN.
template <typename T>
LADDER_HD inline T lse_finish(T max_value, T sum) {
  return log(sum) + lse_shift(max_value);
}

/// Two-pass log-sum-exp of z[0..n), the reference for every stage's epilogue.
template <typename T>
LADDER_HD inline T logsumexp(const T* z, size_t n) {
  T m = -INFINITY;
  for (size_t i = 0; i < n; ++i) m = z[i] > m ? z[i] : m;
  const T shift = lse_shift(m);
  T sum = 0;
  for (size_t i = 0; i < n; ++i) sum += exp(z[i] - shift);
  return log(sum) + shift;
}

}  // namespace ladder
