// How every results file and table of this project states where a run was made (report.cpp);
// shared with the problem-38 track's runner.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "provenance.hpp"

namespace ladder {

/// The "build:" and "host:" lines of a table header.
std::string describe_provenance(const Provenance& pv);
/// The "provenance" object of a results JSON.
nlohmann::json provenance_to_json(const Provenance& pv);

}  // namespace ladder
