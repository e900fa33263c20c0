// Small random problems that cover every ConvTranspose2d parameter, for oracle and stage tests.
#pragma once

#include <random>
#include <vector>

#include "problem.hpp"

namespace ladder::testing {

/// A valid random problem small enough for the literal pipeline (<= ~1e6 multiply-adds):
/// stride 1-3, padding 0-2, output_padding below stride or dilation, dilation 1-3, groups 1/2/4,
/// kernel 1-5, non-square everything, structured inputs.
inline Problem random_small_problem(std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (;;) {
    Problem p;
    p.groups = std::vector<int>{1, 2, 4}[size_t(pick(0, 2))];
    p.batch = pick(1, 3);
    p.in_channels = p.groups * pick(1, 3);
    p.out_channels = p.groups * pick(1, 3);
    p.in_h = pick(1, 9);
    p.in_w = pick(1, 9);
    p.kernel_size = {pick(1, 5), pick(1, 5)};
    p.stride = {pick(1, 3), pick(1, 3)};
    p.dilation = {pick(1, 3), pick(1, 3)};
    p.padding = {pick(0, 2), pick(0, 2)};
    p.output_padding = {pick(0, int(std::max(p.stride.h, p.dilation.h)) - 1),
                        pick(0, int(std::max(p.stride.w, p.dilation.w)) - 1)};
    p.distribution = Distribution::Structured;
    p.seed = rng();
    try {
      p.validate();
    } catch (const InvalidProblem&) {
      continue;  // e.g. padding larger than the output: draw again
    }
    return p;
  }
}

}  // namespace ladder::testing
