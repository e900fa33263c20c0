// The ladder driver's own contracts, checked without a GPU: limits it enforces before any
// allocation, so they hold on every machine (CI included).
#include <gtest/gtest.h>

#include <string>

#include "host_memory.hpp"
#include "runner.hpp"

namespace ladder {
namespace {

// A batch whose x alone needs terabytes: the ladder must refuse before allocating anything,
// with a message naming host memory, instead of being killed by the OOM killer.
TEST(Ladder, HugeBatchStopsWithAHostMemoryError) {
  Problem p = Problem::kernelbench();
  p.batch = 200000;
  LadderOptions opt;
  opt.progress = false;
  try {
    run_ladder(p, opt);
    FAIL() << "run_ladder accepted a batch of 200000 (13 TB of x)";
  } catch (const HostMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
}

TEST(Ladder, InvalidTimingOptionsAreRejected) {
  Problem p = Problem::kernelbench_v1();
  LadderOptions opt;
  opt.progress = false;
  opt.reps = 0;
  EXPECT_THROW(run_ladder(p, opt), std::invalid_argument);
}

TEST(Ladder, UnknownStageIsRejectedByName) {
  Problem p = Problem::kernelbench_v1();
  LadderOptions opt;
  opt.progress = false;
  opt.stage_ids = {"99"};
  try {
    run_ladder(p, opt);
    FAIL() << "an unknown stage was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'99'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ladder
