// harness/run_loop.hpp on a fake problem model, no GPU needed: the order of the skips, the hooks a
// rung that runs goes through (the refill run between its check and the comparison), which rung
// is "previous", and a sticky CUDA error (thrown as a CudaError, so no CUDA call is made).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "run_loop.hpp"

namespace ladder {
namespace {

struct FakeRung {
  std::string id;
  bool gpu = true;
  std::string unsupported = "", blocked = "";
  bool fails_check = false;
  bool throws_sticky = false;  ///< run throws cudaErrorIllegalAddress
  bool throws = false;         ///< run throws std::runtime_error
  std::string label() const { return id; }
};

struct FakeResult {
  std::string id, note, previous;
  bool gpu = false, ran = false, failed = false, pass = false;
};

struct FakeModel {
  using Rung = FakeRung;
  using Result = FakeResult;
  using Output = std::string;
  std::vector<std::string> calls;  // every hook that ran, in order

  FakeResult start(const FakeRung& g) { return {g.id, "", "", g.gpu}; }
  std::string skip_note(Skip why, const FakeRung& g) {
    if (why == Skip::Unsupported) return g.unsupported;
    if (why == Skip::Blocked) return g.blocked;
    return why == Skip::Lost ? "lost" : why == Skip::CpuCost ? "cost" : "no device";
  }
  double cpu_macs(const FakeRung&) { return 10; }
  void skipped(const FakeRung& g, const FakeResult&, const std::string& label) {
    calls.push_back("skipped " + g.id + " " + label);
  }
  std::string run(const FakeRung& g, FakeResult&, const std::string&) {
    calls.push_back("run " + g.id);
    if (g.throws_sticky) throw CudaError(cudaErrorIllegalAddress, "illegal address");
    if (g.throws) throw std::runtime_error("broken");
    return "out " + g.id;
  }
  void check(const FakeRung& g, FakeResult& r, const std::string& out) {
    calls.push_back("check " + out);
    r.pass = !g.fails_check;
  }
  bool passed(const FakeResult& r) { return r.pass; }
  void refill(bool other) { calls.push_back(other ? "refill other" : "refill back"); }
  std::string run_once(const FakeRung& g) {
    calls.push_back("run_once " + g.id);
    return "again " + g.id;
  }
  void check_refilled(const FakeRung&, FakeResult&, const std::string& out) { calls.push_back("check " + out); }
  void compare(FakeResult& r, const std::string& out, const FakeResult& prev, const std::string& prev_out) {
    calls.push_back("compare " + out + " with " + prev_out);
    r.previous = prev.id;
  }
  void done(const FakeRung& g, FakeResult&, const std::string&, const std::string&) { calls.push_back("done " + g.id); }
  void failed(const FakeRung& g, FakeResult& r, const std::string&, const std::exception& e, cudaError_t lost) {
    r.note = e.what();
    calls.push_back("failed " + g.id + (lost != cudaSuccess ? " lost" : ""));
  }
};

std::vector<FakeResult> run(FakeModel& m, const std::vector<FakeRung>& rungs, const LoopOptions& o,
                            LoopState& st) {
  std::vector<const FakeRung*> ptrs;
  for (const FakeRung& g : rungs) ptrs.push_back(&g);
  std::vector<FakeResult> results;
  run_loop(m, ptrs, o, st, results);
  return results;
}

TEST(RunLoop, SkipsInOrderWithTheModelsNotes) {
  FakeModel m;
  LoopState st;
  const std::vector<FakeRung> rungs = {
      {"cpu", false}, {"gpu"}, {"unsupported", true, "skipped: too big"}, {"blocked", false, "", "not run: no state"}};
  const auto r = run(m, rungs, {false, 1.0, false, false}, st);  // every CPU rung costs 10 > 1
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].note, "cost");
  EXPECT_EQ(r[1].note, "no device");
  EXPECT_EQ(r[2].note, "skipped: too big");  // Unsupported before NoDevice
  EXPECT_EQ(r[3].note, "cost");              // CpuCost before Blocked
  EXPECT_EQ(m.calls.front(), "skipped cpu [1/4] cpu");
  for (const FakeResult& x : r) EXPECT_FALSE(x.ran);
}

TEST(RunLoop, RefillRunsBetweenTheCheckAndTheComparisonOfAPassingGpuRung) {
  FakeModel m;
  LoopState st;
  const auto r = run(m, {{"a"}, {"b", true, "", "", true}, {"c"}}, {true, 1e9, false, true}, st);
  const std::vector<std::string> want = {
      "run a", "check out a", "refill other", "run_once a", "refill back", "check again a", "done a",
      "run b", "check out b", "compare out b with out a", "done b",  // b failed its check: no refill run
      "run c", "check out c", "refill other", "run_once c", "refill back", "check again c",
      "compare out c with out b", "done c"};
  EXPECT_EQ(m.calls, want);
  EXPECT_EQ(r[2].previous, "b");
}

TEST(RunLoop, AFailedRungIsNotThePreviousOne) {
  FakeModel m;
  LoopState st;
  const auto r = run(m, {{"a", false}, {"b", false, "", "", false, false, true}, {"c", false}}, {false, 1e9}, st);
  EXPECT_TRUE(r[1].failed);
  EXPECT_EQ(r[1].note, "broken");
  EXPECT_EQ(r[2].previous, "a");
  EXPECT_EQ(st.lost, cudaSuccess);  // no CUDA device: no sticky-error probe
}

TEST(RunLoop, AStickyErrorSkipsLaterRungsOrStopsTheLoop) {
  const std::vector<FakeRung> rungs = {{"a", true, "", "", false, true}, {"b"}, {"c", false}};
  FakeModel m;
  LoopState st;
  auto r = run(m, rungs, {true, 1e9, false, false}, st);
  EXPECT_EQ(st.lost, cudaErrorIllegalAddress);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].failed);
  EXPECT_EQ(m.calls[1], "failed a lost");
  EXPECT_EQ(r[1].note, "lost");  // the model decides for every rung, CPU ones too
  EXPECT_EQ(r[2].note, "lost");
  FakeModel stop;
  LoopState st2;
  r = run(stop, rungs, {true, 1e9, false, false, true}, st2);
  EXPECT_EQ(r.size(), 1u);
}

}  // namespace
}  // namespace ladder
