#include "ladder/rung_lookup.hpp"
#include "rung.hpp"

namespace ladder::p38 {

const Rung& rung_00();
const Rung& rung_01();
const Rung& rung_02();
const Rung& rung_03();
const Rung& rung_04();
const Rung& rung_05();
const Rung& rung_06();
const Rung& rung_07();

const std::vector<const Rung*>& rungs() {
  static const std::vector<const Rung*> all{&rung_00(), &rung_01(), &rung_02(), &rung_03(),
                                            &rung_04(), &rung_05(), &rung_06(), &rung_07()};
  return all;
}

const Rung& find_rung(const std::string& key) { return find_rung_in(rungs(), key, "problem-38"); }

}  // namespace ladder::p38
