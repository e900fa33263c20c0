#include "rung_lookup.hpp"  // common/toolkit/
#include "rung.hpp"

namespace ladder::p74 {

// rungs() is generated from the folders under rungs/ (cmake/Stages.cmake, ladder_add_track_rungs).
const Rung& find_rung(const std::string& key) { return find_rung_in(rungs(), key, "problem-74"); }

}  // namespace ladder::p74
