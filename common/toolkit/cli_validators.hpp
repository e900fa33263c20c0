// CLI11 validators the programs share (ladder, p38_ladder, p74_ladder): one short line per bad
// value, as every other option error.
#pragma once

#include <CLI/CLI.hpp>
#include <sstream>
#include <string>

namespace ladder {

/// Values >= lo: "POSITIVE" or "NONNEGATIVE" in --help; anything else (a smaller value, NaN) is an
/// option error, "--reps: must be >= 1, got 0".
template <typename T>
CLI::Validator at_least(T lo) {
  std::ostringstream bound;
  bound << lo;
  return CLI::Validator(
      [lo, bound = bound.str()](std::string& input) -> std::string {
        T v{};
        if (!CLI::detail::lexical_cast(input, v)) return "not a number: " + input;
        if (!(v >= lo)) return "must be >= " + bound + ", got " + input;
        return "";
      },
      lo > 0 ? "POSITIVE" : "NONNEGATIVE");
}

/// For an unsigned option (--seed): rejects a negative value, which CLI11 would otherwise wrap
/// around to 2^64 - 1 silently ("--seed: must be an integer >= 0, got -1").
inline CLI::Validator not_negative() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        const size_t first = input.find_first_not_of(" \t");
        if (first != std::string::npos && input[first] == '-') return "must be an integer >= 0, got " + input;
        return "";
      },
      "NONNEGATIVE");
}

}  // namespace ladder
