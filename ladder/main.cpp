// The driver of the ladder program, of each stage_NN_name program and of the mutant programs:
// compiled once (the object library ladder_main), linked with each program's generated registry.
// With no arguments: the KernelBench problem through every stage this program has.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "pool_only.hpp"
#include "problem_options.hpp"
#include "provenance_report.hpp"
#include "runner.hpp"

namespace {

using ladder::at_least;

// "00 cpu_reference, 01 per_thread_loop, ...": the stages this program has (with a pool phase of
// their own only, if `pool_phase`).
std::string stage_list(bool pool_phase = false) {
  std::string s;
  for (const ladder::StageDescriptor* d : ladder::registered_stages())
    if (!pool_phase || d->run_pool) s += (s.empty() ? "" : ", ") + d->label();
  return s.empty() ? "none" : s;
}

// --dump DIR creates DIR itself only, never a missing parent (a mistyped path would otherwise
// grow folders anywhere, / included when run as root). Throws std::invalid_argument naming the
// missing parent, or DIR when it exists and is not a folder.
void check_dump_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string trimmed = dir;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const fs::path path(trimmed);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    if (!fs::is_directory(path, ec)) throw std::invalid_argument("--dump: " + dir + " exists and is not a folder");
    return;
  }
  const fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  if (!fs::is_directory(parent, ec))
    throw std::invalid_argument("--dump: the parent folder " + parent.string() + " of " + dir +
                                " does not exist (--dump creates only the last folder of the path)");
}

// The full reason GPU stages were skipped is in the table's header ("device: none (...)"): each
// skipped stage's line says only "skipped: no CUDA device". The JSON report keeps the full notes.
template <class Report>
Report with_short_skip_notes(Report report) {
  const std::string prefix = "skipped: no CUDA device";
  for (auto& s : report.stages)
    if (s.note.rfind(prefix, 0) == 0) {  // the reason is in the header; a stub's remark stays
      const size_t stub = s.note.find("; still a stub");
      s.note = prefix + (stub == std::string::npos ? std::string() : s.note.substr(stub));
    }
  return report;
}

bool nothing_ran(const ladder::LadderReport& report) {
  for (const auto& s : report.stages)
    if (s.ran) return false;
  return true;
}

/// Without a GPU every GPU stage skips and stage 00 is too costly at the KernelBench size, so a
/// first run would show nothing: run the CPU stage at the first KernelBench sizes instead and
/// name the next commands. Returns true if it passed its checks.
bool cpu_stage_instead(ladder::LadderOptions opt) {
  std::cout << "\nNo GPU here, so nothing above ran. The CPU stage at the first KernelBench sizes instead\n"
               "(build/ladder --kernelbench-v1 --stages 00):\n\n";
  opt.rung_ids = {"00"};
  const ladder::LadderReport cpu = ladder::run_ladder(ladder::Problem::kernelbench_v1(), opt);
  std::cout << ladder::format_table(with_short_skip_notes(cpu))
            << "\nNext: bash scripts/test.sh (every CPU test; the GPU tests skip), or read the stages' chapters\n"
               "(stages/NN_*/README.md) and their committed results (results/) until you have a GPU.\n";
  return cpu.all_passed();
}

/// True if this program holds stage `id` (a single-stage program holds only its own).
bool has_stage(const std::string& id) {
  for (const ladder::StageDescriptor* s : ladder::registered_stages())
    if (s->id == id) return true;
  return false;
}

/// A single-stage program without a GPU: its stage skipped, which is no error (exit 0), and
/// where to go next; the CPU stage 00 lives in build/ladder only.
void gpu_only_program_skipped() {
  std::cout << "\nNo GPU here, so nothing above ran: this program holds GPU stages only. Its build and\n"
               "machine code are still checked by bash scripts/test.sh; build/ladder --kernelbench-v1 --stages 00\n"
               "runs the CPU stage.\n";
}

}  // namespace

int main(int argc, char** argv) {
  ladder::ProblemOptions problem_opt;
  ladder::LadderOptions opt;

  CLI::App app{"Runs the stages of the ConvTranspose2d -> pool -> log-sum-exp ladder on one problem,\n"
               "checks them against the fp64 oracle, and times them against a streaming read of x.\n"
               "Default: the KernelBench problem (batch 16, 64 -> 128 channels, 512x512, kernel 3)."};
  app.footer("Exit status: 0 if every stage that ran passed its checks; 1 if a stage failed, disagreed with the\n"
             "oracle (--pool-only: with its tensor's fp64 plane means) or left the GPU unusable; 2 for invalid\n"
             "options or an error before the stages ran (an invalid problem, too little host or GPU memory,\n"
             "unreadable --inputs).\n"
             "Results record the source tree's git commit; when running from a copy without .git, set\n"
             "LADDER_GIT_COMMIT (and LADDER_GIT_DIRTY=yes|no) in the environment.");
  ladder::add_problem_options(app, problem_opt);
  ladder::add_run_options(app, opt,
                          {"stage", stage_list(),
                           "after each GPU stage, refill the same input buffers with another seed's values, run it "
                           "again and check that run too"});
  bool no_cub = false;
  app.add_flag("--no-cub", no_cub, "skip the CUB segmented-sum baseline for the pool phase");
  std::string check_precision;
  app.add_option("--check-precision", check_precision,
                 "the grader's rule: check every GPU stage at this precision's tolerance, whatever the stage declares, "
                 "and let each plane's mean be formed in any correctly rounded order (any_order_tolerance)")
      ->check(CLI::IsMember({"fp32", "tf32"}));
  app.add_flag("--tf32-midpoints", opt.tf32_midpoints,
               "x and weight 3/4 of the way between TF32 values: a TF32 stage is checked at the FP32 tolerance "
               "against the oracle of its operands rounded to nearest (truncation fails)");
  app.add_option("--dump", opt.dump_dir,
                 "write x, weight, conv_bias, bias, oracle and stage outputs as .npy to DIR (created if missing; "
                 "its parent must exist)")
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
  for (const char* other : {"--dump", "--inputs", "--force-cpu", "--check-precision", "--refill-check", "--tf32-midpoints"}) pool_flag->excludes(app.get_option(other));
  if (const auto status = ladder::parse_or_exit(app, argc, argv)) return *status;

  const ladder::Problem p = ladder::problem_from_options(app, problem_opt);
  if (!check_precision.empty())
    opt.check_precision = check_precision == "tf32" ? ladder::Precision::Tf32 : ladder::Precision::Fp32;
  opt.cub_baseline = !no_cub;

  return ladder::exit_status_of([&] {
    if (!opt.json_path.empty()) ladder::require_writable(opt.json_path);
    if (!opt.dump_dir.empty()) check_dump_dir(opt.dump_dir);
    if (pool_only) {
      const ladder::PoolOnlyReport report = ladder::run_pool_only(p, opt);
      std::cout << ladder::format_pool_only_table(with_short_skip_notes(report));
      if (!opt.json_path.empty()) std::cout << "results written to " << opt.json_path << "\n";
      return report.all_passed() ? 0 : 1;
    }
    const ladder::LadderReport report = ladder::run_ladder(p, opt);
    std::cout << ladder::format_table(with_short_skip_notes(report));
    if (!opt.json_path.empty()) std::cout << "results written to " << opt.json_path << "\n";
    if (!opt.dump_dir.empty()) std::cout << "arrays written to " << opt.dump_dir << "/\n";
    if (nothing_ran(report) && report.device.empty() && opt.json_path.empty() && opt.dump_dir.empty()) {
      if (!has_stage("00")) {
        gpu_only_program_skipped();
        return report.all_passed() ? 0 : 1;
      }
      return cpu_stage_instead(opt) && report.all_passed() ? 0 : 1;
    }
    return report.all_passed() ? 0 : 1;
  });
}
