// Finding a rung of a track by id or name, shared by the tracks' registries and programs. R is a
// track's Rung descriptor: it has `id`, `name` and `label()` ("03 block_tree").
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ladder {

/// "00 cpu_reference, 01 per_thread, ...": the rungs' labels, in order.
template <class R>
std::string rung_labels(const std::vector<const R*>& rungs) {
  std::string s;
  for (const R* r : rungs) s += (s.empty() ? "" : ", ") + r->label();
  return s;
}

/// The rung whose id ("03"), name ("block_tree") or both ("03_block_tree") is `key`; throws
/// std::invalid_argument naming the track and listing its rungs when there is none.
template <class R>
const R& find_rung_in(const std::vector<const R*>& rungs, const std::string& key, const std::string& track) {
  for (const R* r : rungs)
    if (r->id == key || r->name == key || r->id + "_" + r->name == key) return *r;
  throw std::invalid_argument("no rung '" + key + "' in the " + track + " track; rungs: " + rung_labels(rungs));
}

}  // namespace ladder
