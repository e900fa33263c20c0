// The tracks' command-line helpers (tracks/shared/cli.hpp, shared by p38_ladder and
// p74_ladder), checked without a GPU: a rung named twice, a negative seed or bound.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "shared/cli.hpp"

namespace ladder::tracks {
namespace {

struct FakeRung {
  std::string id, name;
};
const std::vector<FakeRung> kRungs = {{"00", "cpu_reference"}, {"01", "naive"}, {"02", "atomics"}};

const FakeRung& find_fake(const std::string& key) {
  for (const FakeRung& r : kRungs)
    if (r.id == key || r.name == key) return r;
  throw std::invalid_argument("no rung '" + key + "'");
}

std::string repeat_error(const std::vector<std::string>& ids, const std::string& option = "--rungs") {
  try {
    reject_repeated_rungs(ids, find_fake, option);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TrackCli, ARungListedTwiceIsRejected) {
  EXPECT_EQ(repeat_error({"01", "01"}), "--rungs: rung 01 is listed twice");
  EXPECT_EQ(repeat_error({"00", "02", "naive", "01"}), "--rungs: rung 01 is listed twice (as 'naive' and '01')");
  EXPECT_EQ(repeat_error({"02", "02"}, "--stages"), "--stages: rung 02 is listed twice");
}

TEST(TrackCli, DistinctRungsPass) {
  EXPECT_EQ(repeat_error({}), "");
  EXPECT_EQ(repeat_error({"00", "naive", "02"}), "");
}

TEST(TrackCli, AnUnknownRungIsStillNamed) {
  EXPECT_EQ(repeat_error({"00", "zz"}), "no rung 'zz'");
}

TEST(TrackCli, NegativeSeedAndBoundAreOptionErrors) {
  uint64_t seed = 42;
  double macs = 2e9;
  CLI::App app;
  app.add_option("--seed", seed)->check(not_negative());
  app.add_option("--cpu-max-macs", macs)->check(at_least(0.0));
  for (const std::string bad : {"--seed=-1", "--cpu-max-macs=-1", "--cpu-max-macs=nan"})
    EXPECT_THROW(app.parse(std::vector<std::string>{bad}), CLI::ValidationError) << bad << " was accepted";
  app.parse(std::vector<std::string>{"--seed=18446744073709551615", "--cpu-max-macs=0"});
  EXPECT_EQ(seed, UINT64_MAX);
  EXPECT_EQ(macs, 0.0);
}

}  // namespace
}  // namespace ladder::tracks
