// Command-line helpers the tracks' programs share (p38_ladder, p74_ladder): CLI11 options with
// PyTorch's conventions for 3-D parameters.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_validators.hpp"  // at_least, not_negative
#include "geometry3d.hpp"      // Triple

namespace ladder::tracks {

// The option validators are the ladder's own (common/toolkit/cli_validators.hpp).
using ladder::at_least;
using ladder::not_negative;

/// Throws std::invalid_argument("--rungs: rung 03 is listed twice") when two entries of `ids`
/// name the same rung, by id, name or both ("03", "fused_forward"); `find` maps an entry to its
/// rung (the track's find_rung, which throws naming an unknown one). `option` names the list.
template <class Find>
void reject_repeated_rungs(const std::vector<std::string>& ids, Find find, const std::string& option = "--rungs") {
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const auto& rung = find(ids[i]);
      if (&rung != &find(ids[j])) continue;
      const std::string as = ids[i] == ids[j] ? "" : " (as '" + ids[j] + "' and '" + ids[i] + "')";
      throw std::invalid_argument(option + ": rung " + rung.id + " is listed twice" + as);
    }
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

}  // namespace ladder::tracks
