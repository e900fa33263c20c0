// The ladder's command line, checked without a GPU: the shared problem options
// (ladder/problem_options.hpp) reject what would otherwise be accepted silently (a negative seed
// that wraps to 2^64 - 1, a negative or NaN bound), and --stages rejects a stage named twice.
// The programs themselves (exit status 2, one line) are run by tests/cli/check_cli.sh.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "problem_options.hpp"
#include "run_support.hpp"
#include "runner.hpp"

namespace ladder {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Parses `args` (without the program name) with the problem options; returns the error's text,
// empty when the parse succeeded.
std::string parse_problem_options(std::vector<std::string> args, ProblemOptions& o) {
  CLI::App app;
  add_problem_options(app, o);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them in reverse
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(LadderCli, NegativeSeedIsAnErrorNotAWrappedValue) {
  for (const std::string arg : {"-1", "-18446744073709551615"}) {
    ProblemOptions o;
    const std::string error = parse_problem_options({"--seed", arg}, o);
    EXPECT_TRUE(contains(error, "--seed")) << arg << ": " << error;
    EXPECT_TRUE(contains(error, "got " + arg)) << error;
  }
  ProblemOptions o;
  EXPECT_TRUE(contains(parse_problem_options({"--seed=-7"}, o), "--seed")) << "the --seed=VALUE form";
}

TEST(LadderCli, SeedTakesTheWholeUnsignedRange) {
  ProblemOptions o;
  EXPECT_EQ(parse_problem_options({"--seed", "0"}, o), "");
  EXPECT_EQ(o.problem.seed, 0u);
  EXPECT_EQ(parse_problem_options({"--seed", "18446744073709551615"}, o), "");
  EXPECT_EQ(o.problem.seed, UINT64_MAX);
}

TEST(LadderCli, AtLeastRejectsSmallerValuesAndNaN) {
  double macs = 2e9;
  CLI::App app;
  app.add_option("--cpu-max-macs", macs)->check(at_least(0.0));
  for (const std::string bad : {"-1", "-0.5", "nan", "-inf"}) {
    try {
      app.parse(std::vector<std::string>{"--cpu-max-macs=" + bad});
      FAIL() << "--cpu-max-macs " << bad << " was accepted (" << macs << ")";
    } catch (const CLI::ValidationError& e) {
      EXPECT_TRUE(contains(e.what(), "--cpu-max-macs: must be >= 0, got " + bad)) << e.what();
    }
  }
  app.parse(std::vector<std::string>{"0", "--cpu-max-macs"});
  EXPECT_EQ(macs, 0.0);
}

TEST(LadderCli, AtLeastNamesTheBoundForIntegers) {
  int reps = 10;
  CLI::App app;
  app.add_option("--reps", reps)->check(at_least(1));
  try {
    app.parse(std::vector<std::string>{"0", "--reps"});
    FAIL() << "--reps 0 was accepted";
  } catch (const CLI::ValidationError& e) {
    EXPECT_EQ(std::string(e.what()), "--reps: must be >= 1, got 0");
  }
}

TEST(LadderCli, AStageListedTwiceIsRejected) {
  LadderOptions opt;
  opt.rung_ids = {"00", "00"};
  try {
    selected_stages(opt);
    FAIL() << "--stages 00,00 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "--stages: stage 00 is listed twice");
  }
  opt.rung_ids = {"00", "cpu_reference"};  // the same stage by number and by name
  try {
    selected_stages(opt);
    FAIL() << "--stages 00,cpu_reference was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "stage 00 is listed twice (as '00' and 'cpu_reference')")) << e.what();
  }
}

TEST(LadderCli, DistinctStagesAreKeptInOrder) {
  LadderOptions opt;
  opt.rung_ids = {"01", "00"};
  const std::vector<const StageDescriptor*> stages = selected_stages(opt);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0]->id, "01");
  EXPECT_EQ(stages[1]->id, "00");
}

}  // namespace
}  // namespace ladder
