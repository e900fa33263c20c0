// The ladder driver's own contracts, checked without a GPU: limits it enforces before any
// allocation, so they hold on every machine (CI included).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "device.hpp"
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

// GPU stages only, on a machine without a GPU: nothing is generated, so even a problem whose
// inputs would not fit in host memory skips cleanly (a single-stage program used to generate
// 1 GB of inputs and their oracle before it found no GPU). With a GPU the host-memory check stands.
TEST(Ladder, GpuStagesWithoutAGpuGenerateNothing) {
  Problem p = Problem::kernelbench();
  p.batch = 200000;
  LadderOptions opt;
  opt.progress = false;
  opt.rung_ids = {"03", "09"};
  std::string why;
  if (cuda_device_available(&why)) {
    EXPECT_THROW(run_ladder(p, opt), HostMemoryError);
    return;
  }
  const LadderReport report = run_ladder(p, opt);
  ASSERT_EQ(report.stages.size(), 2u);
  for (const StageReport& s : report.stages) {
    EXPECT_FALSE(s.ran) << s.id;
    EXPECT_NE(s.note.find("skipped: no CUDA device"), std::string::npos) << s.id << ": " << s.note;
  }
  EXPECT_TRUE(report.device.empty());
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
  opt.rung_ids = {"99"};
  try {
    run_ladder(p, opt);
    FAIL() << "an unknown stage was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'99'"), std::string::npos) << e.what();
  }
}

// A stage that ran with the given phase medians (ms); total = their sum.
StageReport ran_stage(const std::string& id, std::vector<std::pair<Phase, double>> phases,
                      std::vector<Phase> changes) {
  StageReport s;
  s.id = id;
  s.name = "stage_" + id;
  s.gpu = s.ran = true;
  s.phase_ms = std::move(phases);
  for (const auto& ph : s.phase_ms) s.total_ms += ph.second;
  s.changes = std::move(changes);
  return s;
}

// "vs previous" compares the phases a stage changes (StageDescriptor::changes), summed in both
// stages; with none named, the totals. Phase times chosen so every ratio is exact in binary.
TEST(Ladder, SpeedupComparesThePhasesAStageChanges) {
  LadderReport r;
  r.problem = Problem::kernelbench_v1();
  r.stages.push_back(ran_stage("01", {{Phase::Conv, 96}, {Phase::Pool, 32}, {Phase::Epilogue, 1}}, {}));
  // Only the pool changes: 32 / 4 = 8, although the totals differ by 1.3x at most.
  r.stages.push_back(ran_stage("02", {{Phase::Conv, 96}, {Phase::Pool, 4}, {Phase::Epilogue, 1}}, {Phase::Pool}));
  // Conv and pool fused into one phase: (96 + 4) / 25 = 4.
  r.stages.push_back(ran_stage("03", {{Phase::Fused, 25}, {Phase::Epilogue, 1}},
                               {Phase::Conv, Phase::Pool, Phase::Fused}));
  // The whole run: 26 / 13 = 2.
  r.stages.push_back(ran_stage("04", {{Phase::Pool, 12}, {Phase::Epilogue, 1}}, {}));
  char name[] = "/tmp/ladder_speedup_XXXXXX";
  const int fd = mkstemp(name);
  ASSERT_GE(fd, 0);
  close(fd);
  write_json(r, name);
  std::ifstream in(name);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::remove(name);
  const auto& st = j.at("stages");
  ASSERT_EQ(st.size(), 4u);
  EXPECT_FALSE(st[0].contains("speedup_vs_previous"));
  EXPECT_EQ(st[1].at("speedup_vs_previous").get<double>(), 8.0);
  EXPECT_EQ(st[1].at("changes"), nlohmann::json::array({"pool"}));
  EXPECT_EQ(st[2].at("speedup_vs_previous").get<double>(), 4.0);
  EXPECT_EQ(st[3].at("speedup_vs_previous").get<double>(), 2.0);
  EXPECT_TRUE(st[3].at("changes").empty());

  const std::string table = format_table(r);
  EXPECT_NE(table.find(" 8.00 pool "), std::string::npos) << table;
  EXPECT_NE(table.find(" 4.00 conv+pool+fused "), std::string::npos) << table;
  EXPECT_NE(table.find(" 2.00 total "), std::string::npos) << table;
}

}  // namespace
}  // namespace ladder
