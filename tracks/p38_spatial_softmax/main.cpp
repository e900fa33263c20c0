// p38_ladder: the problem-38 track's rungs on one problem (default: KernelBench's sizes), checked
// against the fp64 oracle and timed against the memory and compute floors.
#include <CLI/CLI.hpp>
#include <iostream>
#include <limits>

#include "shared/cli.hpp"
#include "rung_lookup.hpp"  // common/toolkit/
#include "provenance_report.hpp"  // harness/
#include "runner.hpp"

namespace p38 = ladder::p38;

using ladder::tracks::add_triple;
using ladder::tracks::at_least;
using ladder::tracks::not_negative;

int main(int argc, char** argv) {
  p38::Problem38 p = p38::Problem38::kernelbench();
  p38::TrackOptions opt;
  std::string distribution = "uniform";
  CLI::App app{"Runs the problem-38 track (KernelBench level 2, problem 38: AvgPool3d -> ConvTranspose3d -> clamp ->\n"
               "softmax over D*H*W per (sample, channel) -> x scale), checks every rung against the fp64 oracle\n"
               "elementwise and times it. Default: KernelBench's sizes (batch 32, 32 -> 64 channels, 32x64x64)."};
  app.footer("Exit status: 0 if every rung that ran passed; 1 if a rung failed or disagreed with the oracle; 2 for\n"
             "invalid options or an error before the rungs ran (an invalid problem, too little GPU memory).\n"
             "Large outputs are checked on --sample-rows rows (each a complete softmax); small ones on every row.");
  app.add_option("--batch", p.batch, "batch size")->check(at_least<int64_t>(1))->capture_default_str();
  app.add_option("--in-channels", p.in_channels, "in_channels")->check(at_least<int64_t>(1))->capture_default_str();
  app.add_option("--out-channels", p.out_channels, "out_channels")->check(at_least<int64_t>(1))->capture_default_str();
  add_triple(app, "--input-size", p.in_size, "input D H W (default 32 64 64)");
  add_triple(app, "--pool-kernel-size", p.pool.kernel_size, "AvgPool3d kernel_size (default 2)");
  p38::Triple pool_stride{};
  auto* pool_stride_opt = app.add_option("--pool-stride", pool_stride.d, "AvgPool3d stride (default: kernel_size)");
  add_triple(app, "--pool-padding", p.pool.padding, "AvgPool3d padding (default 0)");
  app.add_flag("--ceil-mode", p.pool.ceil_mode, "AvgPool3d ceil_mode=True");
  bool no_count_pad = false;
  app.add_flag("--no-count-include-pad", no_count_pad, "AvgPool3d count_include_pad=False");
  add_triple(app, "--kernel-size", p.conv.kernel_size, "ConvTranspose3d kernel_size (default 3)");
  add_triple(app, "--stride", p.conv.stride, "ConvTranspose3d stride (default 2)");
  add_triple(app, "--padding", p.conv.padding, "ConvTranspose3d padding (default 1)");
  add_triple(app, "--output-padding", p.conv.output_padding, "ConvTranspose3d output_padding (default 1)");
  add_triple(app, "--dilation", p.conv.dilation, "ConvTranspose3d dilation (default 1)");
  app.add_option("--groups", p.conv.groups, "ConvTranspose3d groups")->check(at_least<int64_t>(1))->capture_default_str();
  app.add_option("--clamp-min", p.clamp_min, "clamp lower bound")->capture_default_str();
  app.add_option("--clamp-max", p.clamp_max, "clamp upper bound")->capture_default_str();
  app.add_option("--distribution", distribution, "x ~ U[0,1) (uniform) or small integers with exact sums (exact)")
      ->check(CLI::IsMember({"uniform", "exact"}))
      ->capture_default_str();
  app.add_option("--seed", p.seed, "seed of the inputs (0 to 2^64 - 1)")
      ->check(not_negative())
      ->capture_default_str();
  app.add_flag("--random-scale", p.random_scale,
               "draw each channel's scale from [1/2, 3/2) instead of PyTorch's ones (a rung that drops it fails)");
  ladder::add_run_options(app, opt,
                          {"rung", ladder::rung_labels(p38::rungs()),
                           "after each GPU rung, refill the same input buffers with another seed's values, run it "
                           "once more and check that run too"});
  app.add_option("--sample-rows", opt.sample_rows, "rows checked against the oracle when the output is large")
      ->check(at_least(1))
      ->capture_default_str();
  if (const auto status = ladder::parse_or_exit(app, argc, argv)) return *status;
  if (*pool_stride_opt) p.pool.stride = p38::Triple::cube(pool_stride.d);
  p.pool.count_include_pad = !no_count_pad;
  return ladder::exit_status_of([&] {
    p.distribution = p38::distribution_from_string(distribution);
    ladder::tracks::reject_repeated_rungs(opt.rung_ids, p38::find_rung);
    if (!opt.json_path.empty()) ladder::require_writable(opt.json_path);
    const p38::TrackReport report = p38::run_track(p, opt);
    std::cout << p38::format_table(report);
    if (!opt.json_path.empty()) std::cout << "results written to " << opt.json_path << "\n";
    return report.all_passed() ? 0 : 1;
  });
}
