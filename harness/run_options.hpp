// What every ladder program (ladder, p38_ladder, p74_ladder) asks of a run, and the command-line
// options that set it, written once: which rungs, how they are timed, the CPU rung's cost limit,
// the refill check and where the results go. A program's options struct derives from RunOptions
// and adds its own (the ladder's --dump, p74's --samples).
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli_validators.hpp"  // at_least

namespace ladder {

struct RunOptions {
  std::vector<std::string> rung_ids;  ///< empty: every rung, in ladder order
  int warmup = 2;                     ///< untimed runs before the timed ones
  int reps = 10;                      ///< timed runs per GPU rung (median, min, max reported)
  bool flush_l2 = true;               ///< flush L2 before each timed run
  bool progress = true;               ///< progress lines on stderr
  bool force_cpu = false;             ///< run the CPU rung even above cpu_max_macs
  double cpu_max_macs = 2e9;          ///< the CPU rung runs only below this many multiply-adds
  /// The grader's rule: each GPU rung that passed runs once more on its input buffers refilled
  /// with another seed's values, checked against that seed's oracle (a cached answer fails).
  bool refill_check = false;
  std::string json_path;  ///< "" : no JSON file
};

/// The words that differ between programs: `noun` "stage" (the main ladder, whose list is
/// --stages first) or "rung"; `labels` the program's rungs ("00 cpu_reference, 01 ..."); `refilled`
/// what --refill-check refills and reruns.
struct RunOptionsText {
  std::string noun, labels, refilled;
};

/// Adds the shared options to `app`, stored in `o`: the rung list (--stages and --rungs, one
/// name for the list everywhere), --reps, --warmup, --no-flush-l2, --refill-check, --force-cpu,
/// --cpu-max-macs, --json, -q/--quiet. A bad value is an option error naming the option.
inline void add_run_options(CLI::App& app, RunOptions& o, const RunOptionsText& t) {
  const bool stage = t.noun == "stage";
  app.add_option(stage ? "--stages,--rungs" : "--rungs,--stages", o.rung_ids,
                 "comma-separated " + t.noun + "s, by number or name, each once (" +
                     (stage ? "--rungs" : "--stages") + ": the same; default: all): " + t.labels)
      ->delimiter(',')
      ->type_name("ID");
  app.add_option("--reps", o.reps, "timed repetitions per GPU " + t.noun + " (median, min and max reported)")
      ->check(at_least(1))
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed repetitions before them")->check(at_least(0))->capture_default_str();
  app.add_flag_callback("--no-flush,--no-flush-l2", [&o] { o.flush_l2 = false; },
                        "do not flush L2 between repetitions (warm-cache numbers)");
  app.add_flag("--refill-check", o.refill_check, t.refilled + " (a result cached by buffer address fails)");
  app.add_flag("--force-cpu", o.force_cpu, t.noun + " 00 runs even above --cpu-max-macs");
  app.add_option("--cpu-max-macs", o.cpu_max_macs, t.noun + " 00 runs only below this many multiply-adds")
      ->check(at_least(0.0))
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write results as JSON to FILE")->type_name("FILE");
  app.add_flag_callback("-q,--quiet", [&o] { o.progress = false; }, "no progress output on stderr");
}

/// Parses the command line: nullopt to go on, or the program's exit status, 0 after --help and
/// 2 for a bad option (CLI11 prints which).
inline std::optional<int> parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

/// Runs a program's body and returns its exit status; an exception from it (an invalid
/// problem, too little memory, no writable --json) is "error: <what>" on stderr and status 2,
/// as every program's --help footer says.
template <class Body>
int exit_status_of(Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace ladder
