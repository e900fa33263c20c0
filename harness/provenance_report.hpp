// How every results file and table of this project states where a run was made, and how a
// results JSON is written (report.cpp, and the tracks' runners).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "provenance.hpp"

namespace ladder {

/// The "build:" and "host:" lines of a table header.
std::string describe_provenance(const Provenance& pv);
/// The "provenance" object of a results JSON.
nlohmann::json provenance_to_json(const Provenance& pv);
/// Writes j, indented, to path; throws std::runtime_error naming the file when it cannot.
void write_json_file(const nlohmann::json& j, const std::string& path);
/// Throws std::runtime_error naming path unless it can be opened for writing (created empty if
/// absent): programs call it before a long run, so that a bad --json path loses no results.
void require_writable(const std::string& path);

}  // namespace ladder
