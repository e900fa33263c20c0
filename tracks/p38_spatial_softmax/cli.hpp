// Command-line helpers the tracks' programs share (p38_ladder, p74_ladder): CLI11 options with
// PyTorch's conventions for 3-D parameters.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "problem.hpp"  // Triple

namespace ladder::p38 {

/// Values >= lo: "POSITIVE" or "NONNEGATIVE" in --help, the range in the error message.
template <typename T>
CLI::Validator at_least(T lo) {
  return CLI::Range(lo, std::numeric_limits<T>::max()).description(lo > 0 ? "POSITIVE" : "NONNEGATIVE");
}

/// A 3-D option: one value (every axis) or three (depth height width), as PyTorch takes them;
/// two values are an error naming the option.
inline CLI::Option* add_triple(CLI::App& app, const std::string& name, Triple& target, const std::string& help) {
  return app
      .add_option_function<std::vector<int64_t>>(
          name,
          [&target, name](const std::vector<int64_t>& v) {
            if (v.size() == 2) throw CLI::ValidationError(name, "takes one value or three (depth height width), not two");
            target = v.size() == 1 ? Triple::cube(v[0]) : Triple{v[0], v[1], v[2]};
          },
          help + " (one value for every axis, or three: depth height width)")
      ->expected(1, 3)
      ->type_name("N [N N]");
}

}  // namespace ladder::p38
