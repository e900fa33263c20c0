// Shared-memory plans on small GPUs, tested on a large one. Stages 07-09 stage input patches and
// weights in dynamic shared memory; their plans must fit the device's opt-in limit per block
// (64 KiB on a T4). LADDER_SHARED_MEMORY_LIMIT lowers the limit the plans see, so an H200 runs
// the plans a T4 would get, and tighter ones that leave only the general path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "device.hpp"
#include "gpu_session.hpp"
#include "oracle.hpp"
#include "problem_matrix.hpp"
#include "skip_without_gpu.hpp"
#include "stage.hpp"
#include "tolerance.hpp"

namespace ladder {
namespace {

/// Sets LADDER_SHARED_MEMORY_LIMIT for its lifetime ("" unsets it), restoring the old value after.
class LimitOverride {
 public:
  explicit LimitOverride(const std::string& value) {
    if (const char* old = std::getenv(kSharedMemoryLimitVariable)) old_ = old, had_ = true;
    set(value);
  }
  ~LimitOverride() { had_ ? set(old_) : set(""); }
  LimitOverride(const LimitOverride&) = delete;
  LimitOverride& operator=(const LimitOverride&) = delete;

 private:
  static void set(const std::string& v) {
    if (v.empty())
      unsetenv(kSharedMemoryLimitVariable);
    else
      setenv(kSharedMemoryLimitVariable, v.c_str(), 1);
  }
  std::string old_;
  bool had_ = false;
};

using testing::make;

// Shapes whose plans take more than 64 KiB at the stages' own budget (96 KiB): on stage 09 (two
// buffers) a 4x4 kernel with 8 input channels, a 5x5 kernel, dilation 3; on stage 08 (one
// buffer) a 5x5 kernel with dilation_h 3. All stride 1 and dilation_w 1: the tiled path.
std::vector<Problem> large_footprint_problems() {
  return {
      make(2, 8, 64, 20, 18, {4, 4}),                                  // 4x4 kernel, in_channels 8
      make(2, 16, 70, 19, 21, {4, 4}),                                 // 4x4, 16 channels, co tail
      make(1, 8, 64, 18, 17, {5, 5}),                                  // 5x5 kernel
      make(2, 9, 33, 21, 20, {4, 3}, {1, 1}, {1, 1}, {0, 0}, {3, 1}),  // dilation_h 3
      make(1, 12, 24, 23, 19, {5, 5}, {1, 1}, {2, 2}, {0, 0}, {1, 1}, 2),  // 5x5, groups 2
      make(1, 8, 64, 17, 16, {5, 5}, {1, 1}, {0, 0}, {0, 0}, {3, 1}),  // 5x5, dilation_h 3: 08 too
  };
}

std::vector<const StageDescriptor*> shared_memory_stages() {
  std::vector<const StageDescriptor*> out;
  for (const StageDescriptor* s : registered_stages())
    if (s->shared_memory_bytes) out.push_back(s);
  return out;
}

TEST(SharedMemoryLimit, IsTheDeviceOptInLimitUnlessLowered) {
  SKIP_WITHOUT_GPU();
  int dev = 0, optin = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), cudaSuccess);
  {
    LimitOverride none("");
    EXPECT_EQ(shared_memory_per_block_limit(), size_t(optin));
  }
  {
    LimitOverride t4("65536");
    EXPECT_EQ(shared_memory_per_block_limit(), std::min<size_t>(65536, size_t(optin)));
  }
  {
    LimitOverride above(std::to_string(size_t(optin) * 4));  // asking for more gives the device's
    EXPECT_EQ(shared_memory_per_block_limit(), size_t(optin));
  }
  for (const char* bad : {"64k", "0", "-1", " -1", "+65536", "12x", "99999999999999999999999"}) {
    LimitOverride b(bad);
    EXPECT_THROW(shared_memory_per_block_limit(), std::invalid_argument) << bad;
  }
}

// The fallback is exercised, not assumed: stages 08 and 09 would exceed 64 KiB on at least one
// of the shapes with their unlowered plan. (Stage 07 stages 8 channels of a 1-row tile: at most
// 21 KB here; the 16 KiB and 1 KiB limits below exercise its fallback.)
TEST(SharedMemoryLimit, LargeFootprintShapesExceedSixtyFourKiBUnlowered) {
  SKIP_WITHOUT_GPU();
  LimitOverride none("");
  int dev = 0, optin = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), cudaSuccess);
  if (optin < 96 * 1024) GTEST_SKIP() << "this GPU allows " << optin << " bytes per block: it is the small GPU";
  for (const StageDescriptor* s : shared_memory_stages()) {
    if (s->name != "register_tiling" && s->name != "async_copy") continue;
    size_t largest = 0;
    for (const Problem& p : large_footprint_problems()) largest = std::max(largest, s->shared_memory_bytes(p));
    EXPECT_GT(largest, size_t(65536)) << s->label() << ": no shape here exceeds 64 KiB; the test lost its point";
  }
}

// Stages 07-09 shrink their input-channel chunk to fit the limit, so they keep the tiled path
// at 64 KiB. The tensor-core stages stage 8 channels or none (the mma's k is 8 channels): on
// these shapes they fall back to the general path at 64 KiB, which must still fit and be right.
bool shrinks_its_chunk(const StageDescriptor& s) {
  return s.name == "shared_memory_tiling" || s.name == "register_tiling" || s.name == "async_copy";
}

// Under each lowered limit every plan fits, the stage still matches the fp64 oracle (exact and
// structured inputs), and the tightest limit leaves only the general path (0 bytes).
TEST(SharedMemoryLimit, PlansFitLoweredLimitsAndStayCorrect) {
  SKIP_WITHOUT_GPU();
  const auto stages = shared_memory_stages();
  if (stages.empty()) GTEST_SKIP() << "no stage of this build plans dynamic shared memory (stages 07-09 do)";
  for (const size_t limit : {size_t(65536), size_t(16384), size_t(1024)}) {
    LimitOverride lowered(std::to_string(limit));
    for (Problem p : large_footprint_problems()) {
      for (const Distribution d : {Distribution::Exact, Distribution::Structured}) {
        p.distribution = d;
        SCOPED_TRACE(p.describe() + " under a limit of " + std::to_string(limit) + " bytes");
        const HostInputs in = make_inputs(p);
        const Reference oracle = linearity_pipeline(p, in);
        GpuSession gpu(p, in);
        for (const StageDescriptor* s : stages) {
          const Tolerance tol = stage_tolerance(p, oracle, s->precision);
          const size_t bytes = s->shared_memory_bytes(p);
          EXPECT_LE(bytes, limit) << s->label();
          if (limit == 1024) {
            EXPECT_EQ(bytes, 0u) << s->label() << " should take its general path";
          } else if (limit == 65536 && shrinks_its_chunk(*s)) {
            EXPECT_GT(bytes, 0u) << s->label() << " should keep its tiled path at 64 KiB";
          }
          const GpuTiming t = gpu.run_once(*s);
          const Agreement a = compare(t.pooled, t.y, oracle.pooled, oracle.y, tol);
          EXPECT_TRUE(a.pass()) << s->label() << ": " << a.summary();
        }
      }
    }
  }
}

}  // namespace
}  // namespace ladder
