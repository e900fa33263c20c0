// The sub-pixel decomposition's taps (rung 07 introduces it): with o = stride*c + r, the taps k of
// phase r are the k with (r + padding - k) a multiple of stride, and tap k of phase r reads the
// input at c + (r + padding - k)/stride. Rung 07's FMA tiles and rung 08's mma tiles both walk them
// at compile time.
#pragma once

namespace ladder::p38 {

/// The range of input offsets delta = (r + PAD - k)/S over the (phase, tap) pairs that meet.
template <int S, int K, int PAD>
struct Taps {
  __host__ __device__ static constexpr bool meets(int r, int k) { return (r + PAD - k) % S == 0; }
  __host__ __device__ static constexpr int lo() {
    int m = 1 << 30;
    for (int r = 0; r < S; ++r)
      for (int k = 0; k < K; ++k)
        if (meets(r, k) && (r + PAD - k) / S < m) m = (r + PAD - k) / S;
    return m;
  }
  __host__ __device__ static constexpr int hi() {
    int m = -(1 << 30);
    for (int r = 0; r < S; ++r)
      for (int k = 0; k < K; ++k)
        if (meets(r, k) && (r + PAD - k) / S > m) m = (r + PAD - k) / S;
    return m;
  }
  static constexpr int kLo = lo();
  static constexpr int span = hi() - lo() + 1;  // inputs per axis a cell reads
};

}  // namespace ladder::p38
