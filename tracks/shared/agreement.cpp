#include "agreement.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace ladder::tracks {

Agreement compare(const std::vector<double>& out, const std::vector<double>& ref_out,
                  const std::vector<double>& tol) {
  if (out.size() != ref_out.size() || tol.size() != ref_out.size())
    throw std::invalid_argument("compare: the result (" + std::to_string(out.size()) + "), the reference (" +
                                std::to_string(ref_out.size()) + ") and the tolerance (" +
                                std::to_string(tol.size()) + ") differ in size");
  Agreement a;
  a.count = int64_t(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const bool nan_out = std::isnan(out[i]), nan_ref = std::isnan(ref_out[i]);
    if (nan_out && nan_ref) continue;
    double ratio = INFINITY;  // a NaN on one side only, or a NaN tolerance, fails
    if (nan_out != nan_ref) {
      ++a.nan_count;
    } else {
      const double diff = out[i] == ref_out[i] ? 0.0 : std::fabs(out[i] - ref_out[i]);  // equal infinities agree
      if (std::isfinite(diff)) a.max_abs = std::max(a.max_abs, diff);
      const double r = diff == 0.0 ? 0.0 : diff / tol[i];
      if (!std::isnan(r)) ratio = r;
    }
    if (!(ratio <= 1.0)) ++a.failures;
    if (ratio > a.worst_ratio || a.worst_index < 0) {
      a.worst_ratio = ratio;
      a.worst_index = int64_t(i);
    }
  }
  return a;
}

Agreement compare(const std::vector<float>& out, const std::vector<double>& ref_out,
                  const std::vector<double>& tol) {
  return compare(std::vector<double>(out.begin(), out.end()), ref_out, tol);
}

void Agreement::merge(const Agreement& part, int64_t base) {
  count += part.count;
  failures += part.failures;
  nan_count += part.nan_count;
  max_abs = std::max(max_abs, part.max_abs);
  if (part.worst_index >= 0 && (worst_index < 0 || part.worst_ratio > worst_ratio)) {
    worst_ratio = part.worst_ratio;
    worst_index = base + part.worst_index;
  }
}

std::string Agreement::summary() const {
  std::ostringstream s;
  s << (pass() ? "pass" : "FAIL") << ": " << count << " elements, " << failures << " over tolerance, "
    << nan_count << " NaN on one side only; max |diff| " << max_abs << ", worst " << worst_ratio
    << " x its tolerance at index " << worst_index;
  return s.str();
}

}  // namespace ladder::tracks
