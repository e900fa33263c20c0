// How a track's result agrees with its fp64 oracle, element by element against a tolerance of
// the track's own (its tolerance.hpp derives it): counts, the worst element and a one-line summary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ladder::tracks {

/// Worst disagreement of a result with the reference. A NaN on one side only fails (an unwritten,
/// NaN-poisoned output, or a NaN the reference does not have); NaN on both sides agrees.
struct Agreement {
  int64_t count = 0;          ///< elements compared
  int64_t failures = 0;       ///< elements over their tolerance (NaN mismatches included)
  int64_t nan_count = 0;      ///< elements that are NaN on one side only
  double max_abs = 0;         ///< largest |out - ref| among finite pairs
  double worst_ratio = 0;     ///< max of |out - ref| / tolerance; <= 1 passes
  int64_t worst_index = -1;   ///< index of that element (flat, layout of ref.out)
  bool pass() const { return failures == 0 && nan_count == 0 && worst_ratio <= 1.0; }
  std::string summary() const;  ///< one line: pass/FAIL, counts, worst element
  /// Adds the agreement of a part of the tensor whose flat indices start at `base` (sampled rows
  /// or samples checked one at a time).
  void merge(const Agreement& part, int64_t base);
};

/// Compares out with ref_out elementwise, |out - ref| <= tol. Throws std::invalid_argument when
/// the three sizes differ.
Agreement compare(const std::vector<double>& out, const std::vector<double>& ref_out,
                  const std::vector<double>& tol);
/// The same for an fp32 result.
Agreement compare(const std::vector<float>& out, const std::vector<double>& ref_out,
                  const std::vector<double>& tol);

}  // namespace ladder::tracks
