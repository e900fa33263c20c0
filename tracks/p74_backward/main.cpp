// p74_ladder: the problem-74 track's rungs, forward and backward, on one problem (default:
// KernelBench's sizes), checked against the fp64 oracles and timed against the floors.
#include <CLI/CLI.hpp>
#include <iostream>
#include <limits>

#include "shared/cli.hpp"
#include "rung_lookup.hpp"  // common/toolkit/
#include "provenance_report.hpp"  // ladder/
#include "runner.hpp"

namespace p74 = ladder::p74;

using ladder::tracks::add_triple;
using ladder::tracks::at_least;
using ladder::tracks::not_negative;

namespace {

/// Prints the table (and where the JSON went, and how many results ran unchecked) and returns
/// the exit status: 0 if every rung that ran passed, else 1.
int report_and_status(const p74::TrackReport& report, const p74::TrackOptions& opt) {
  std::cout << p74::format_table(report);
  if (!opt.json_path.empty()) std::cout << "results written to " << opt.json_path << "\n";
  int unchecked = 0;
  for (const p74::RungResult& r : report.rungs) unchecked += r.ran && !r.checked;
  if (unchecked > 0)
    std::cerr << "note: " << unchecked << " rung result(s) ran unchecked (above --oracle-max-macs); they are not "
              << "counted as passed\n";
  return report.all_passed() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  p74::Problem74 p = p74::Problem74::kernelbench();
  p74::TrackOptions opt;
  std::string distribution = "uniform";
  CLI::App app{
      "Runs the problem-74 track (KernelBench level 2, problem 74: ConvTranspose3d -> LeakyReLU -> x multiplier\n"
      "-> LeakyReLU -> MaxPool3d) forward and backward. Forward rungs compute the output, the argmax of every\n"
      "pooling window and the convolution's value there; backward rungs compute grad_x, grad_weight, grad_bias\n"
      "and grad_multiplier from that saved state and an upstream gradient. Every rung is checked elementwise\n"
      "against an fp64 oracle and timed against memory and compute floors measured in the same run.\n"
      "Default: KernelBench's sizes (batch 16, 16 -> 32 channels, input 16x32x32, kernel 3, stride 2,\n"
      "padding 1, output_padding 1, negative_slope 0.2, MaxPool3d(2))."};
  app.footer(
      "Parameters take PyTorch's names and rules (torch.nn.ConvTranspose3d, LeakyReLU, MaxPool3d).\n"
      "Exit status: 0 if every rung that ran passed; 1 if a rung failed or disagreed with the oracle; 2 for\n"
      "invalid options or an error before the rungs ran (an invalid problem, too little GPU memory).\n"
      "Checks: the forward on every sample, or above --oracle-max-macs on --samples samples (each in full);\n"
      "the backward in full when its multiply-adds are within --oracle-max-macs, else reported 'unchecked'.\n"
      "Example, a small problem on the CPU rung only:\n"
      "  p74_ladder --batch 1 --in-channels 4 --out-channels 8 --in-size 4 8 8 --rungs 00\n");
  app.add_option("--batch", p.batch, "batch size")->check(at_least<int64_t>(1))->capture_default_str();
  app.add_option("--in-channels", p.in_channels, "in_channels")->check(at_least<int64_t>(1))->capture_default_str();
  app.add_option("--out-channels", p.out_channels, "out_channels")->check(at_least<int64_t>(1))->capture_default_str();
  add_triple(app, "--in-size,--input-size", p.in_size, "input D H W (default 16 32 32)");
  add_triple(app, "--kernel-size", p.conv.kernel_size, "ConvTranspose3d kernel_size (default 3)");
  add_triple(app, "--stride", p.conv.stride, "ConvTranspose3d stride (default 2)");
  add_triple(app, "--padding", p.conv.padding, "ConvTranspose3d padding (default 1)");
  add_triple(app, "--output-padding", p.conv.output_padding, "ConvTranspose3d output_padding (default 1)");
  add_triple(app, "--dilation", p.conv.dilation, "ConvTranspose3d dilation (default 1)");
  app.add_option("--groups", p.conv.groups, "ConvTranspose3d groups")->check(at_least<int64_t>(1))->capture_default_str();
  app.add_option("--negative-slope", p.negative_slope, "LeakyReLU negative_slope (both activations)")
      ->capture_default_str();
  add_triple(app, "--pool-kernel-size", p.pool.kernel_size, "MaxPool3d kernel_size (default 2)");
  p74::Triple pool_stride{};
  CLI::Option* pool_stride_opt =
      add_triple(app, "--pool-stride", pool_stride, "MaxPool3d stride (default: the pool's kernel_size)");
  add_triple(app, "--pool-padding", p.pool.padding, "MaxPool3d padding (default 0)");
  add_triple(app, "--pool-dilation", p.pool.dilation, "MaxPool3d dilation (default 1)");
  app.add_flag("--ceil-mode", p.pool.ceil_mode, "MaxPool3d ceil_mode=True");
  app.add_option("--distribution", distribution,
                 "uniform: PyTorch's default initialization; exact: small dyadic values on which every result is exact "
                 "(needs a power-of-two --negative-slope)")
      ->check(CLI::IsMember({"uniform", "exact"}))
      ->capture_default_str();
  app.add_option("--seed", p.seed, "seed of the inputs (grad_out uses seed + 1; 0 to 2^64 - 1)")
      ->check(not_negative())
      ->capture_default_str();
  ladder::add_run_options(app, opt,
                          {"rung", ladder::rung_labels(p74::rungs()),
                           "after each checked GPU backward, refill grad_out's buffer with another seed's values, run "
                           "it once more and check that run too"});
  app.add_option("--forward-for-backward", opt.forward_for_backward,
                 "forward rung whose saved state (argmax, y) the backward rungs use (default: the fastest GPU forward "
                 "rung that passed, else 03)")
      ->type_name("ID");
  app.add_option("--oracle-max-macs", opt.oracle_max_macs, "the fp64 oracles run only below this many multiply-adds")
      ->check(at_least(0.0))
      ->capture_default_str();
  app.add_option("--samples", opt.max_samples, "samples whose forward is checked when the whole batch is too large")
      ->check(at_least(1))
      ->capture_default_str();
  if (const auto status = ladder::parse_or_exit(app, argc, argv)) return *status;
  if (*pool_stride_opt) p.pool.stride = pool_stride;
  return ladder::exit_status_of([&] {
    p.distribution = ladder::tracks::distribution_from_string(distribution);
    ladder::tracks::reject_repeated_rungs(opt.rung_ids, p74::find_rung);
    if (!opt.json_path.empty()) ladder::require_writable(opt.json_path);
    return report_and_status(p74::run_track(p, opt), opt);
  });
}
