// The driver of the ladder program, of each stage_NN_name program and of the mutant programs:
// compiled once (the object library ladder_main), linked with each program's generated registry.
// With no arguments: the KernelBench problem through every stage this program has.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <limits>

#include "pool_only.hpp"
#include "runner.hpp"

namespace {

// A spatial option that takes one value (both axes) or two (height width), like PyTorch.
void add_pair_option(CLI::App& app, const std::string& name, ladder::Pair& target, const std::string& help) {
  app.add_option_function<std::vector<int64_t>>(
         name,
         [&target, name](const std::vector<int64_t>& v) {
           target = v.size() == 1 ? ladder::Pair::square(v[0]) : ladder::Pair{v[0], v[1]};
         },
         help + " (one value for both axes, or two: height width)")
      ->expected(1, 2)
      ->type_name("N [N]");
}

// Values >= lo: "POSITIVE" or "NONNEGATIVE" in --help, the range in the error message.
template <typename T>
CLI::Validator at_least(T lo) {
  return CLI::Range(lo, std::numeric_limits<T>::max()).description(lo > 0 ? "POSITIVE" : "NONNEGATIVE");
}

// "00 cpu_reference, 01 per_thread_loop, ...": the stages this program has (with a pool phase of
// their own only, if `pool_phase`).
std::string stage_list(bool pool_phase = false) {
  std::string s;
  for (const ladder::StageDescriptor* d : ladder::registered_stages())
    if (!pool_phase || d->run_pool) s += (s.empty() ? "" : ", ") + d->label();
  return s.empty() ? "none" : s;
}

}  // namespace

int main(int argc, char** argv) {
  ladder::Problem p = ladder::Problem::kernelbench();
  ladder::LadderOptions opt;
  std::string distribution;
  bool v1 = false, quiet = false, no_flush = false;
  std::vector<int64_t> size;

  CLI::App app{"Runs the stages of the ConvTranspose2d -> pool -> log-sum-exp ladder on one problem,\n"
               "checks them against the fp64 oracle, and times them against a streaming read of x.\n"
               "Default: the KernelBench problem (batch 16, 64 -> 128 channels, 512x512, kernel 3)."};
  app.footer("Exit status: 0 if every stage that ran passed its checks; 1 if a stage failed, disagreed with the\n"
             "oracle (--pool-only: with its tensor's fp64 plane means) or left the GPU unusable; 2 for invalid\n"
             "options or an error before the stages ran (an invalid problem, too little host or GPU memory,\n"
             "unreadable --inputs).\n"
             "Results record the source tree's git commit; when running from a copy without .git, set\n"
             "LADDER_GIT_COMMIT (and LADDER_GIT_DIRTY=yes|no) in the environment.");
  app.add_flag("--kernelbench-v1", v1, "first published KernelBench sizes: batch 128, 3 -> 16, 32x32, randn x");
  app.add_option("--batch", p.batch, "batch size N")->check(at_least(int64_t(1)))->capture_default_str();
  app.add_option("--in-channels", p.in_channels, "in_channels (divisible by --groups)")->capture_default_str();
  app.add_option("--out-channels", p.out_channels, "out_channels (divisible by --groups)")->capture_default_str();
  app.add_option("--size", size, "input height and width: one value for a square input, or two: H W")
      ->expected(1, 2)
      ->type_name("H [W]");
  add_pair_option(app, "--kernel-size", p.kernel_size, "kernel_size, default 3");
  add_pair_option(app, "--stride", p.stride, "stride, default 1");
  add_pair_option(app, "--padding", p.padding, "padding, default 0");
  add_pair_option(app, "--output-padding", p.output_padding, "output_padding, default 0; below stride or dilation");
  add_pair_option(app, "--dilation", p.dilation, "dilation, default 1");
  app.add_option("--groups", p.groups, "groups")->capture_default_str();
  app.add_option("--scale", p.scale, "final multiplier, applied after the log-sum-exp (10 in KernelBench)")
      ->capture_default_str();
  app.add_option("--bias-scale", p.bias_scale,
                 "multiplies the drawn bias (1 in KernelBench); large values overflow exp in a log-sum-exp "
                 "that does not subtract the max")
      ->capture_default_str();
  app.add_option("--distribution", distribution,
                 "x distribution: uniform (torch.rand; the default), normal (torch.randn; the default with "
                 "--kernelbench-v1), structured, exact (small integers: every sum is exact and stages are held "
                 "to a near-zero tolerance)")
      ->check(CLI::IsMember({"uniform", "normal", "structured", "exact"}));
  app.add_option("--seed", p.seed, "seed of the input generator")->capture_default_str();
  app.add_option("--stages", opt.stage_ids, "comma-separated stages to run, by number or name (default: all): " +
                                                stage_list())
      ->delimiter(',')
      ->type_name("ID");
  app.add_option("--reps", opt.reps, "timed repetitions per GPU stage (median, min and max reported)")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--warmup", opt.warmup, "untimed repetitions before them")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_flag("--no-flush-l2", no_flush, "do not flush L2 between repetitions (warm-cache numbers)");
  bool no_cub = false;
  app.add_flag("--no-cub", no_cub, "skip the CUB segmented-sum baseline for the pool phase");
  app.add_flag("--force-cpu", opt.force_cpu, "run stage 00 even when its literal cost is large");
  app.add_option("--cpu-max-macs", opt.cpu_max_macs, "stage 00 runs only below this many multiply-adds")
      ->capture_default_str();
  app.add_option("--json", opt.json_path, "write results as JSON to FILE (schema: ladder/report.cpp)")->type_name("FILE");
  app.add_option("--dump", opt.dump_dir, "write x, weight, conv_bias, bias, oracle and stage outputs as .npy to DIR")
      ->type_name("DIR");
  app.add_option("--inputs", opt.inputs_dir, "read x, weight, conv_bias, bias (.npy, float32, C order) from DIR")
      ->type_name("DIR");
  bool pool_only = false;
  auto* pool_flag = app.add_flag(
      "--pool-only", pool_only,
      "only the pool phase of the stages that have one of their own, on a generated fp32 tensor of the convT "
      "output's shape (the problem options set it; --seed its values, --distribution is not used), checked "
      "against its fp64 plane means and timed against a streaming read of the same tensor; no convolution. "
      "Stages with a pool phase: " + stage_list(true));
  app.add_flag("-q,--quiet", quiet, "no progress output on stderr");
  for (const char* other : {"--dump", "--inputs", "--force-cpu"}) pool_flag->excludes(app.get_option(other));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad option 2, as documented
  }

  if (v1) {
    const ladder::Problem base = ladder::Problem::kernelbench_v1();
    // The preset supplies sizes and distribution; explicit options given with it still win.
    if (!app.count("--batch")) p.batch = base.batch;
    if (!app.count("--in-channels")) p.in_channels = base.in_channels;
    if (!app.count("--out-channels")) p.out_channels = base.out_channels;
    if (size.empty()) p.in_h = base.in_h, p.in_w = base.in_w;
    if (distribution.empty()) p.distribution = base.distribution;
  }
  if (!size.empty()) p.in_h = size[0], p.in_w = size.size() == 2 ? size[1] : size[0];
  if (!distribution.empty()) p.distribution = ladder::distribution_from_string(distribution);
  opt.flush_l2 = !no_flush;
  opt.progress = !quiet;
  opt.cub_baseline = !no_cub;

  try {
    if (pool_only) {
      const ladder::PoolOnlyReport report = ladder::run_pool_only(p, opt);
      std::cout << ladder::format_pool_only_table(report);
      if (!opt.json_path.empty()) std::cout << "results written to " << opt.json_path << "\n";
      return report.all_passed() ? 0 : 1;
    }
    const ladder::LadderReport report = ladder::run_ladder(p, opt);
    std::cout << ladder::format_table(report);
    if (!opt.json_path.empty()) std::cout << "results written to " << opt.json_path << "\n";
    if (!opt.dump_dir.empty()) std::cout << "arrays written to " << opt.dump_dir << "/\n";
    return report.all_passed() ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
