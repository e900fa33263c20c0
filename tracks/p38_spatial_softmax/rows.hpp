// Checking one softmax row at a time. A row (n, c) of the output depends on sample n only, on the
// input channels of c's group, on weight[:, c mod out_per_group] and on bias[c] and scale[c]:
// it is the whole output of a problem with batch 1, one output channel and one group. At the
// KernelBench size the full fp64 oracle is 2.78e10 multiply-adds; one row is 1.4e7.
#pragma once

#include <cstdint>
#include <vector>

#include "oracle.hpp"
#include "problem.hpp"

namespace ladder::p38 {

struct RowCase {
  Problem38 problem;  ///< batch 1, in_channels = p.in_per_group(), out_channels 1, groups 1
  Inputs inputs;      ///< the slices of p's inputs that row (n, c) reads
};

/// The problem and inputs of row (n, c) of p. Throws std::out_of_range for n or c outside p.
RowCase row_case(const Problem38& p, const Inputs& in, int64_t n, int64_t c);

/// Rows to check: every row when the whole output has at most `full_limit` elements, else
/// `samples` rows spread evenly over (n, c), the first and the last always among them.
std::vector<int64_t> rows_to_check(const Problem38& p, int64_t full_limit, int samples);

}  // namespace ladder::p38
