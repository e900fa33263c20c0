// Tests for common/model/logsumexp.hpp: torch.logsumexp's semantics for the two-pass form (finite
// accuracy against long double, large magnitudes, +-inf, NaN, empty), and the online form
// (lse_push over a sequence, lse_merge of split halves and random merge trees) against the
// two-pass form, for float and double.
#include "logsumexp.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

template <typename T>
constexpr T kInf = std::numeric_limits<T>::infinity();
template <typename T>
constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
template <typename T>
constexpr T kEps = std::numeric_limits<T>::epsilon();

template <typename T>
std::string show(const std::vector<T>& v) {
  std::ostringstream s;
  s.precision(std::numeric_limits<T>::max_digits10);
  s << "{";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "}";
  return s.str();
}

template <typename T>
T two_pass(const std::vector<T>& v) {
  return ladder::logsumexp(v.data(), v.size());
}

/// The online pair (running max, sum of exp(z - max)), starting empty.
template <typename T>
struct Online {
  T max = -kInf<T>;
  T sum = 0;
  void push(T z) { ladder::lse_push(max, sum, z); }
  void merge(const Online& b) { ladder::lse_merge(max, sum, b.max, b.sum); }
  T finish() const { return ladder::lse_finish(max, sum); }
};

template <typename T>
Online<T> pushed(const std::vector<T>& v, size_t begin, size_t end) {
  Online<T> o;
  for (size_t i = begin; i < end; ++i) o.push(v[i]);
  return o;
}

template <typename T>
T online_push(const std::vector<T>& v) {
  return pushed(v, 0, v.size()).finish();
}

/// Split at `cut`, reduce each half online, merge the second into the first (or the reverse).
template <typename T>
T online_split(const std::vector<T>& v, size_t cut, bool second_into_first) {
  Online<T> a = pushed(v, 0, cut), b = pushed(v, cut, v.size());
  if (second_into_first) {
    a.merge(b);
    return a.finish();
  }
  b.merge(a);
  return b.finish();
}

/// Random chunks, each pushed, then merged pairwise in a random tree with random argument order.
template <typename T>
T online_tree(const std::vector<T>& v, std::mt19937_64& rng) {
  std::vector<Online<T>> parts;
  size_t i = 0;
  do {
    const size_t len = std::uniform_int_distribution<size_t>(0, 4)(rng);  // empty chunks too
    const size_t end = std::min(v.size(), i + len);
    parts.push_back(pushed(v, i, end));
    i = end;
  } while (i < v.size());
  while (parts.size() > 1) {
    const size_t a = std::uniform_int_distribution<size_t>(0, parts.size() - 1)(rng);
    size_t b = std::uniform_int_distribution<size_t>(0, parts.size() - 2)(rng);
    if (b >= a) ++b;
    parts[a].merge(parts[b]);
    parts.erase(parts.begin() + std::ptrdiff_t(b));
  }
  return parts[0].finish();
}

/// Direct log(sum(exp(z))) in long double: an independent reference for moderate inputs only.
template <typename T>
long double direct_long_double(const std::vector<T>& v) {
  long double s = 0;
  for (T z : v) s += std::exp(static_cast<long double>(z));
  return std::log(s);
}

/// Bound for comparing the online form with the two-pass form on n values (n >= 1):
///   both compute log(S) + m with S = sum exp(z_i - m). In each, every term carries a relative
///   error of about one ulp from exp plus the argument rounding u*|z_i - m|, whose absolute
///   effect on S is at most u*x*exp(-x) <= u/e per term; the n-1 additions (two-pass) or the n
///   rescale-multiply-add steps (online, at most 3 roundings each) add at most 3n*u relative.
///   So each S is within ~4n*u relative of exact, the difference of the two logs is at most
///   ~8n*u = 4n*eps (eps = 2u), and the final "+ m" rounds by at most eps*|result|.
///   Hence |online - two_pass| <= 4 * n * eps * max(1, |two_pass|).
template <typename T>
T online_bound(size_t n, T two_pass_value) {
  return T(4) * T(std::max<size_t>(n, 1)) * kEps<T> * std::max(T(1), std::fabs(two_pass_value));
}

/// Non-finite expectations must match exactly (NaN for NaN, same-signed inf for inf);
/// finite ones within `tol`. Returns whether it matched, for counting failures.
template <typename T>
bool same_lse(T got, T want, T tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::isfinite(got) && std::fabs(got - want) <= tol;
}

template <typename T>
class LogSumExpTwoPass : public ::testing::Test {};
template <typename T>
class LogSumExpOnline : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LogSumExpTwoPass, FloatTypes);
TYPED_TEST_SUITE(LogSumExpOnline, FloatTypes);

}  // namespace

// ---------------------------------------------------------------------------------------------
// Two-pass logsumexp.

TYPED_TEST(LogSumExpTwoPass, FiniteMatchesDirectLongDouble) {
  using T = TypeParam;
  std::mt19937_64 rng(20240601);
  std::uniform_real_distribution<double> value(-20.0, 20.0);
  for (int trial = 0; trial < 500; ++trial) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 200)(rng);
    std::vector<T> v(n);
    for (T& z : v) z = T(value(rng));
    const long double want = direct_long_double(v);
    const T got = two_pass(v);
    // Same derivation as online_bound: S within ~(n+2)u relative (exp errors, argument rounding
    // <= u/e per term, n-1 additions), log adds that absolutely, "+ m" adds eps*|result|; the
    // long double reference is exact to T's precision. 4*(n+2)*eps*max(1,|lse|) is generous.
    const long double tol = 4.0L * (n + 2) * kEps<T> * std::max(1.0L, std::fabs(want));
    ASSERT_TRUE(std::isfinite(got)) << show(v);
    ASSERT_LE(std::fabs(static_cast<long double>(got) - want), tol)
        << "trial " << trial << " got " << got << " want " << double(want) << " for " << show(v);
  }
}

TYPED_TEST(LogSumExpTwoPass, HandComputedSmallCases) {
  using T = TypeParam;
  const T tol = 4 * kEps<T>;
  EXPECT_NEAR(two_pass<T>({0, 0}), T(std::log(2.0)), tol);
  EXPECT_NEAR(two_pass<T>({0, 0, 0, 0}), T(std::log(4.0)), tol);
  EXPECT_NEAR(two_pass<T>({1, 2, 3}), T(3.40760596444438), 8 * tol);  // 3 + log(1 + e^-1 + e^-2)
  EXPECT_NEAR(two_pass<T>({-1, -1}), T(-1 + std::log(2.0)), tol);
}

TYPED_TEST(LogSumExpTwoPass, SingleValueIsItself) {
  using T = TypeParam;
  for (T z : {T(0), T(-3.5), T(7.25), T(88.8), T(1e30), T(-1e30), T(1e4)}) {
    const std::vector<T> v = {z};
    EXPECT_EQ(two_pass(v), z) << show(v);
  }
}

TYPED_TEST(LogSumExpTwoPass, LargeMagnitudesAreFiniteAndCorrect) {
  using T = TypeParam;
  // A naive log(sum(exp(z))) overflows (or underflows) on each of these.
  EXPECT_TRUE(std::isinf(std::exp(T(1000))));
  EXPECT_EQ(std::exp(T(-1e4)), T(0));
  if (std::is_same<T, float>::value) EXPECT_TRUE(std::isinf(std::exp(T(88.8))));
  else EXPECT_TRUE(std::isinf(std::exp(T(710))));

  struct Case {
    std::vector<T> z;
    long double want;
  };
  const long double ln2 = std::log(2.0L);
  const std::vector<Case> cases = {
      {{T(1000), T(1000)}, 1000.0L + ln2},
      {{T(1e4), T(1e4)}, 1e4L + ln2},
      {{T(1e4), T(1e4 - 1)}, 1e4L + std::log1p(std::exp(-1.0L))},
      {{T(-1e4), T(-1e4)}, -1e4L + ln2},
      {{T(-1e4), T(-1e4), T(-1e4), T(-1e4)}, -1e4L + 2 * ln2},
      {{T(88.8), T(88.8)}, static_cast<long double>(T(88.8)) + ln2},
      {{T(88.8), T(80)}, static_cast<long double>(T(88.8)) +
                             std::log1p(std::exp(80.0L - static_cast<long double>(T(88.8))))},
      {{T(710), T(710), T(710)}, 710.0L + std::log(3.0L)},
      {{T(1e30), T(1e30)}, static_cast<long double>(T(1e30)) + ln2},
      {{T(-1e30), T(-1e30)}, static_cast<long double>(T(-1e30)) + ln2},
      {{T(1e30), T(-1e30)}, static_cast<long double>(T(1e30))},
      {{T(-1e30), T(0)}, 0.0L},
      {{T(-1e30), T(5), T(-1e30)}, 5.0L},
  };
  for (const Case& c : cases) {
    const T got = two_pass(c.z);
    // Only the final "+ m" and log rounding matter here: a few ulps of the result.
    const long double tol = 4.0L * kEps<T> * std::max(1.0L, std::fabs(c.want));
    EXPECT_TRUE(std::isfinite(got)) << show(c.z) << " -> " << got;
    EXPECT_LE(std::fabs(static_cast<long double>(got) - c.want), tol)
        << show(c.z) << " got " << got << " want " << double(c.want);
  }
}

TYPED_TEST(LogSumExpTwoPass, PlusInfinityGivesPlusInfinity) {
  using T = TypeParam;
  const T inf = kInf<T>;
  for (const std::vector<T>& v : std::vector<std::vector<T>>{
           {inf}, {1, inf, 2}, {inf, inf}, {-inf, inf}, {inf, -inf}, {T(1e30), inf}, {T(-1e30), inf}}) {
    EXPECT_EQ(two_pass(v), inf) << show(v);
  }
}

TYPED_TEST(LogSumExpTwoPass, AllMinusInfinityGivesMinusInfinity) {
  using T = TypeParam;
  const T inf = kInf<T>;
  EXPECT_EQ(two_pass<T>({-inf}), -inf);
  EXPECT_EQ(two_pass<T>({-inf, -inf, -inf}), -inf);
}

TYPED_TEST(LogSumExpTwoPass, MinusInfinityAmongFiniteIsIgnored) {
  using T = TypeParam;
  const T inf = kInf<T>;
  EXPECT_EQ(two_pass<T>({-inf, 1, 2}), two_pass<T>({1, 2}));
  EXPECT_EQ(two_pass<T>({1, -inf, 2, -inf}), two_pass<T>({1, 2}));
  EXPECT_NEAR(two_pass<T>({-inf, 1, 2}), T(2 + std::log1p(std::exp(-1.0))), 8 * kEps<T>);
  // -inf with very negative finite values: finite, never NaN.
  EXPECT_EQ(two_pass<T>({-inf, T(-1e30)}), T(-1e30));
  EXPECT_EQ(two_pass<T>({T(-1e30), -inf}), T(-1e30));
}

TYPED_TEST(LogSumExpTwoPass, NaNAnywhereGivesNaN) {
  using T = TypeParam;
  const T inf = kInf<T>, nan = kNaN<T>;
  for (size_t pos = 0; pos < 4; ++pos) {
    std::vector<T> v = {1, 2, 3};
    v.insert(v.begin() + std::ptrdiff_t(pos), nan);
    EXPECT_TRUE(std::isnan(two_pass(v))) << show(v);
  }
  for (const std::vector<T>& v : std::vector<std::vector<T>>{
           {nan}, {nan, nan}, {nan, inf}, {inf, nan}, {nan, -inf}, {-inf, nan}, {T(1e30), nan},
           {-inf, nan, inf}}) {
    EXPECT_TRUE(std::isnan(two_pass(v))) << show(v) << " -> " << two_pass(v);
  }
}

TYPED_TEST(LogSumExpTwoPass, EmptyIsMinusInfinity) {
  using T = TypeParam;
  EXPECT_EQ(ladder::logsumexp(static_cast<const T*>(nullptr), 0), -kInf<T>);
}

// ---------------------------------------------------------------------------------------------
// Online form: lse_push, lse_merge, lse_finish.

TYPED_TEST(LogSumExpOnline, EmptyIsMinusInfinityAndMergeIdentity) {
  using T = TypeParam;
  EXPECT_EQ(Online<T>().finish(), -kInf<T>);
  Online<T> e;
  e.merge(Online<T>());
  EXPECT_EQ(e.finish(), -kInf<T>);

  Online<T> a = pushed<T>({1, 2, 3}, 0, 3);
  const Online<T> before = a;
  a.merge(Online<T>());  // merging an empty pair leaves the pair unchanged
  EXPECT_EQ(a.max, before.max);
  EXPECT_EQ(a.sum, before.sum);
  Online<T> b;
  b.merge(before);  // merging into an empty pair copies it
  EXPECT_EQ(b.max, before.max);
  EXPECT_EQ(b.sum, before.sum);
}

TYPED_TEST(LogSumExpOnline, MinusInfinityThenVeryNegativeIsNotNaN) {
  using T = TypeParam;
  const T inf = kInf<T>;
  Online<T> o;
  o.push(-inf);
  o.push(T(-1e30));
  EXPECT_EQ(o.max, T(-1e30));
  EXPECT_EQ(o.sum, T(1));
  EXPECT_EQ(o.finish(), T(-1e30));

  Online<T> a, b;
  a.push(-inf);
  b.push(T(-1e30));
  Online<T> ab = a, ba = b;
  ab.merge(b);
  ba.merge(a);
  EXPECT_EQ(ab.finish(), T(-1e30));
  EXPECT_EQ(ba.finish(), T(-1e30));

  // -1e30 + log 2 rounds to -1e30 in both types.
  EXPECT_EQ(online_push<T>({-inf, -inf, T(-1e30), T(-1e30)}), T(-1e30));
}

TYPED_TEST(LogSumExpOnline, SpecialSequencesEveryOrderAndSplit) {
  using T = TypeParam;
  const T inf = kInf<T>, nan = kNaN<T>;
  const std::vector<std::vector<T>> sequences = {
      {},
      {-inf},
      {inf},
      {nan},
      {-inf, T(-1e30)},
      {-inf, T(-1e30), T(-1e30)},
      {-inf, -inf, T(-1e30), T(5)},
      {nan, T(1)},
      {T(1), nan},
      {nan, inf},
      {-inf, nan},
      {nan, -inf, T(2)},
      {inf, T(1), -inf},
      {inf, inf, T(3)},
      {T(1000), T(1000)},
      {T(1e30), T(-1e30), T(0)},
      {T(88.8), T(88.8), -inf},
      {T(-1e4), T(-1e4), T(-1e4)},
      {T(1), T(2), T(3), T(4), T(5)},
  };
  for (const std::vector<T>& seq : sequences) {
    const T want = two_pass(seq);
    const T tol = online_bound(seq.size(), want);
    std::vector<size_t> idx(seq.size());
    std::iota(idx.begin(), idx.end(), size_t(0));
    do {  // every permutation (sequences have at most 5 values)
      std::vector<T> v;
      for (size_t i : idx) v.push_back(seq[i]);
      const T got = online_push(v);
      EXPECT_TRUE(same_lse(got, want, tol))
          << "lse_push over " << show(v) << " gave " << got << ", two-pass gives " << want;
      for (size_t cut = 0; cut <= v.size(); ++cut)
        for (bool dir : {true, false}) {
          const T g = online_split(v, cut, dir);
          EXPECT_TRUE(same_lse(g, want, tol))
              << "lse_merge of " << show(std::vector<T>(v.begin(), v.begin() + std::ptrdiff_t(cut)))
              << (dir ? " <- " : " -> ")
              << show(std::vector<T>(v.begin() + std::ptrdiff_t(cut), v.end())) << " gave " << g
              << ", two-pass gives " << want;
        }
    } while (std::next_permutation(idx.begin(), idx.end()));
  }
}

namespace {

enum class Mix { FiniteOnly, WithSpecials };

/// Values that stress the online form: moderate, clustered at large magnitude, near float's exp
/// overflow, +-1e30, and (WithSpecials) +inf, -inf and NaN.
template <typename T>
std::vector<T> random_sequence(std::mt19937_64& rng, size_t max_n, Mix mix) {
  const size_t n = std::uniform_int_distribution<size_t>(0, max_n)(rng);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double base = (u(rng) < 0.5 ? -1 : 1) * (u(rng) < 0.5 ? 1e4 : 30.0);
  std::vector<T> v(n);
  for (T& z : v) {
    const double r = u(rng);
    const bool special = mix == Mix::WithSpecials;
    if (special && r < 0.05) z = kNaN<T>;
    else if (special && r < 0.10) z = kInf<T>;
    else if (special && r < 0.22) z = -kInf<T>;
    else if (r < 0.32) z = T(-1e30 * (0.5 + u(rng)));
    else if (r < 0.37) z = T(1e30 * (0.5 + u(rng)));
    else if (r < 0.55) z = T(base + 5.0 * (u(rng) - 0.5));
    else if (r < 0.65) z = T(88.8 + (u(rng) - 0.5));
    else z = T(60.0 * (u(rng) - 0.5));
  }
  // Often lead with -inf (WithSpecials) followed by very negative finite values: the case where
  // a pair's max is still -inf when a finite value arrives.
  if (n > 0 && u(rng) < 0.3) {
    v[0] = mix == Mix::WithSpecials ? -kInf<T> : T(-1e30);
    for (size_t i = 1; i < std::min<size_t>(n, 3); ++i) v[i] = T(-1e30 * (0.5 + u(rng)));
  }
  return v;
}

/// Compares push (random order), split-and-merge (random cut, both directions) and a random
/// merge tree with the two-pass result on `trials` random sequences; returns the failures.
template <typename T>
std::vector<std::string> check_online_random(Mix mix, int trials, size_t max_n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> failures;  // each prefixed "[NaN input] " when the sequence holds one
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<T> v = random_sequence<T>(rng, max_n, mix);
    const T want = two_pass(v);
    const T tol = online_bound(v.size(), want);
    auto check = [&](const char* what, const std::vector<T>& seq, T got) {
      if (!same_lse(got, want, tol)) {
        std::ostringstream s;
        s.precision(std::numeric_limits<T>::max_digits10);
        if (std::any_of(v.begin(), v.end(), [](T z) { return std::isnan(z); })) s << "[NaN input] ";
        s << "trial " << trial << " " << what << " over " << show(seq) << " gave " << got
          << ", two-pass gives " << want << " (bound " << tol << ")";
        failures.push_back(s.str());
      }
    };
    check("lse_push (given order)", v, online_push(v));
    std::vector<T> shuffled = v;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    check("lse_push (shuffled)", shuffled, online_push(shuffled));
    for (int s = 0; s < 4; ++s) {
      const size_t cut = std::uniform_int_distribution<size_t>(0, shuffled.size())(rng);
      const std::string tag = "lse_merge split at " + std::to_string(cut);
      check((tag + " second into first").c_str(), shuffled, online_split(shuffled, cut, true));
      check((tag + " first into second").c_str(), shuffled, online_split(shuffled, cut, false));
    }
    check("random merge tree", shuffled, online_tree(shuffled, rng));
  }
  return failures;
}

template <typename T>
void report(const std::vector<std::string>& failures) {
  EXPECT_EQ(failures.size(), 0u) << "online form disagreed with two-pass logsumexp";
  for (size_t i = 0; i < std::min<size_t>(failures.size(), 8); ++i) ADD_FAILURE() << failures[i];
  size_t without_nan = 0;  // failures on sequences with no NaN (precision or inf handling)
  for (const std::string& f : failures) without_nan += f.rfind("[NaN input] ", 0) != 0;
  EXPECT_EQ(without_nan, 0u) << "failures on sequences holding no NaN";
}

}  // namespace

TYPED_TEST(LogSumExpOnline, RandomFiniteWithinBound) {
  using T = TypeParam;
  report<T>(check_online_random<T>(Mix::FiniteOnly, 3000, 64, 7));
}

TYPED_TEST(LogSumExpOnline, RandomWithSpecialValuesMatchesTwoPass) {
  using T = TypeParam;
  report<T>(check_online_random<T>(Mix::WithSpecials, 3000, 24, 11));
}

TYPED_TEST(LogSumExpOnline, FiniteModerateMatchesDirectLongDouble) {
  // The online form is also checked against an independent reference, not only the two-pass.
  using T = TypeParam;
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> value(-20.0, 20.0);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = std::uniform_int_distribution<size_t>(1, 100)(rng);
    std::vector<T> v(n);
    for (T& z : v) z = T(value(rng));
    const long double want = direct_long_double(v);
    const long double tol = 4.0L * (n + 2) * kEps<T> * std::max(1.0L, std::fabs(want));
    const T got = online_tree(v, rng);
    ASSERT_LE(std::fabs(static_cast<long double>(got) - want), tol)
        << "trial " << trial << " got " << got << " want " << double(want) << " for " << show(v);
  }
}
