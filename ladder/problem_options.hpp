// The command-line options that describe a problem, shared by every program that runs stages
// (ladder/main.cpp: ladder, stage_NN_name, the mutant programs; grader/grade_timing.cu): one
// option per torch.nn.ConvTranspose2d parameter, the KernelBench presets and the seed, with the
// same names, help and defaults everywhere.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli_validators.hpp"  // at_least, not_negative
#include "problem.hpp"

namespace ladder {

/// A spatial option that takes one value (both axes) or two (height width), like PyTorch.
inline void add_pair_option(CLI::App& app, const std::string& name, Pair& target, const std::string& help) {
  app.add_option_function<std::vector<int64_t>>(
         name,
         [&target, name](const std::vector<int64_t>& v) {
           target = v.size() == 1 ? Pair::square(v[0]) : Pair{v[0], v[1]};
         },
         help + " (one value for both axes, or two: height width)")
      ->expected(1, 2)
      ->type_name("N [N]");
}

/// What the problem options parse into; problem_from_options() turns it into the Problem.
struct ProblemOptions {
  Problem problem = Problem::kernelbench();  ///< the options write their fields here
  bool kernelbench_v1 = false;
  std::vector<int64_t> size;  ///< --size: empty, H, or H W
  std::string distribution;   ///< --distribution; empty: the preset's
};

/// Adds --kernelbench-v1, --batch, --in-channels, --out-channels, --size, --kernel-size, --stride,
/// --padding, --output-padding, --dilation, --groups, then (if `epilogue_and_distribution`)
/// --scale, --bias-scale and --distribution, then --seed, in that order. `o` must outlive `app`.
inline void add_problem_options(CLI::App& app, ProblemOptions& o, bool epilogue_and_distribution = true) {
  Problem& p = o.problem;
  app.add_flag("--kernelbench-v1", o.kernelbench_v1, "first published KernelBench sizes: batch 128, 3 -> 16, 32x32, randn x");
  app.add_option("--batch", p.batch, "batch size N")->check(at_least(int64_t(1)))->capture_default_str();
  app.add_option("--in-channels", p.in_channels, "in_channels (divisible by --groups)")->capture_default_str();
  app.add_option("--out-channels", p.out_channels, "out_channels (divisible by --groups)")->capture_default_str();
  app.add_option("--size", o.size, "input height and width: one value for a square input, or two: H W")
      ->expected(1, 2)
      ->type_name("H [W]");
  add_pair_option(app, "--kernel-size", p.kernel_size, "kernel_size, default 3");
  add_pair_option(app, "--stride", p.stride, "stride, default 1");
  add_pair_option(app, "--padding", p.padding, "padding, default 0");
  add_pair_option(app, "--output-padding", p.output_padding, "output_padding, default 0; below stride or dilation");
  add_pair_option(app, "--dilation", p.dilation, "dilation, default 1");
  app.add_option("--groups", p.groups, "groups")->capture_default_str();
  if (epilogue_and_distribution) {
    app.add_option("--scale", p.scale, "final multiplier, applied after the log-sum-exp (10 in KernelBench)")
        ->capture_default_str();
    app.add_option("--bias-scale", p.bias_scale,
                   "multiplies the drawn bias (1 in KernelBench); large values overflow exp in a log-sum-exp "
                   "that does not subtract the max")
        ->capture_default_str();
    app.add_option("--distribution", o.distribution,
                   "x distribution: uniform (torch.rand; the default), normal (torch.randn; the default with "
                   "--kernelbench-v1), structured, exact (small integers: every sum is exact and stages are held "
                   "to a near-zero tolerance)")
        ->check(CLI::IsMember({"uniform", "normal", "structured", "exact"}));
  }
  app.add_option("--seed", p.seed, "seed of the input generator (0 to 2^64 - 1)")
      ->check(not_negative())
      ->capture_default_str();
}

/// After app.parse(): the problem the options describe. --kernelbench-v1 supplies sizes and
/// distribution; explicit options given with it still win. Not validated (Problem::validate).
/// Throws InvalidProblem for an unknown distribution.
inline Problem problem_from_options(const CLI::App& app, const ProblemOptions& o) {
  Problem p = o.problem;
  if (o.kernelbench_v1) {
    const Problem base = Problem::kernelbench_v1();
    if (!app.count("--batch")) p.batch = base.batch;
    if (!app.count("--in-channels")) p.in_channels = base.in_channels;
    if (!app.count("--out-channels")) p.out_channels = base.out_channels;
    if (o.size.empty()) p.in_h = base.in_h, p.in_w = base.in_w;
    if (o.distribution.empty()) p.distribution = base.distribution;
  }
  if (!o.size.empty()) p.in_h = o.size[0], p.in_w = o.size.size() == 2 ? o.size[1] : o.size[0];
  if (!o.distribution.empty()) p.distribution = distribution_from_string(o.distribution);
  return p;
}

}  // namespace ladder
