// `ladder --pool-only` on the GPU (ladder/pool_only.hpp): every stage with a pool phase of its
// own (StageDescriptor::run_pool) passes on awkward shapes and on the KernelBench shape, an
// unwritten pooled fails, and the pool phase alone gives what the stage's full run gives.
// Without a CUDA device every test here is skipped, visibly, with the runtime's reason.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "device.hpp"
#include "gpu_session.hpp"
#include "inputs.hpp"
#include "pool_only.hpp"
#include "problem_matrix.hpp"
#include "skip_without_gpu.hpp"
#include "stage.hpp"

namespace ladder {
namespace {

// A problem whose convT output is (batch, out_channels, h, w): kernel 1, stride 1, no padding.
Problem output_shape(int64_t batch, int64_t out_channels, int64_t h, int64_t w) {
  return testing::make(batch, 1, out_channels, h, w, {1, 1});
}

std::vector<const StageDescriptor*> stages_with_pool_phase() {
  std::vector<const StageDescriptor*> out;
  for (const StageDescriptor* s : registered_stages())
    if (s->run_pool) out.push_back(s);
  return out;
}

std::vector<double> to_host(const float* d, size_t n) {
  std::vector<float> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  return {h.begin(), h.end()};
}

bool bitwise_equal(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

LadderOptions quick_options() {
  LadderOptions opt;
  opt.progress = false;
  opt.warmup = 1;
  opt.reps = 2;
  return opt;
}

// Every stage with run_pool ran and passed, and so did the CUB baseline.
void expect_all_passed(const PoolOnlyReport& r) {
  EXPECT_TRUE(r.all_passed());
  EXPECT_EQ(r.stages.size(), stages_with_pool_phase().size());
  for (const PoolStageReport& s : r.stages) {
    EXPECT_TRUE(s.ran) << s.id << " " << s.name << ": " << s.note;
    EXPECT_TRUE(s.check.pass()) << s.id << " " << s.name << ": " << s.check.summary();
    EXPECT_GT(s.pool_ms.median, 0.0) << s.id;
  }
  EXPECT_GT(r.floor_ms.median, 0.0);
  EXPECT_TRUE(r.cub_ran) << r.cub_note;
  EXPECT_TRUE(r.cub_check.pass()) << "CUB: " << r.cub_check.summary();
}

// Odd plane sizes, plane sizes that are not multiples of 4 (so planes start at every 16-byte
// offset: stage 05's head and tail), one plane, one element, many planes, planes of many
// chunks, the KernelBench plane, and a shape set by stride, padding and output_padding.
TEST(PoolOnlyGpu, EveryStageWithAPoolPhasePassesOnAwkwardShapes) {
  SKIP_WITHOUT_GPU();
  const std::vector<Problem> shapes = {
      output_shape(1, 1, 1, 1),      // one plane of one element
      output_shape(1, 1, 7, 9),      // one plane of 63
      output_shape(3, 5, 13, 11),    // 143 per plane: odd, not a multiple of 4
      output_shape(2, 3, 5, 6),      // 30 per plane: even, not a multiple of 4
      output_shape(16, 300, 5, 5),   // 4800 planes of 25
      output_shape(1, 2, 701, 651),  // 456351 per plane: 223 chunks of stages 03-04, 28 of 05
      output_shape(2, 3, 514, 514),  // the KernelBench plane
      testing::make(2, 3, 5, 9, 14, {3, 2}, {2, 2}, {1, 0}, {1, 1}),  // convT output 18 x 29
  };
  for (const Problem& p : shapes) {
    SCOPED_TRACE("convT output " + std::to_string(p.out_h()) + "x" + std::to_string(p.out_w()) + " x " +
                 std::to_string(p.pooled_elems()) + " planes");
    expect_all_passed(run_pool_only(p, quick_options()));
  }
}

// The shape `ladder --pool-only` runs by default; also the JSON it writes.
TEST(PoolOnlyGpu, KernelBenchShapePassesAndWritesJson) {
  SKIP_WITHOUT_GPU();
  const Problem p = Problem::kernelbench();
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  const double need = 4.0 * double(p.out_elems()) + 1024.0 * 1024 * 1024;  // tensor, flush buffer, margin
  if (need > double(free_bytes)) GTEST_SKIP() << "needs " << format_bytes(need) << ", " << format_bytes(double(free_bytes)) << " free";
  LadderOptions opt = quick_options();
  opt.warmup = 0;
  opt.reps = 1;
  opt.json_path = ::testing::TempDir() + "pool_only_kernelbench.json";
  const PoolOnlyReport r = run_pool_only(p, opt);
  expect_all_passed(r);
  EXPECT_GT(r.generate_s, 0.0);
  std::ifstream f(opt.json_path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("\"mode\": \"pool_only\""), std::string::npos) << text.str().substr(0, 400);
  EXPECT_NE(text.str().find("\"provenance\""), std::string::npos);
  std::remove(opt.json_path.c_str());
}

// Test doubles for the poisoning test: a pool phase that writes nothing, one that marks nothing,
// and one that writes only on its first call (the warm-up), delegating to a real stage.
const StageDescriptor* g_real_stage = nullptr;
int g_writes_left = 0;
void pool_writes_nothing(const PoolArgs& a) { a.marks.begin(Phase::Pool); }
void pool_marks_nothing(const PoolArgs&) {}
void pool_writes_once(const PoolArgs& a) {
  if (g_writes_left-- > 0) {
    g_real_stage->run_pool(a);
  } else {
    a.marks.begin(Phase::Pool);
  }
}

TEST(PoolOnlyGpu, AnUnwrittenPooledFailsTheCheck) {
  SKIP_WITHOUT_GPU();
  ASSERT_FALSE(stages_with_pool_phase().empty());
  const Problem p = output_shape(2, 3, 13, 11);
  std::vector<float> host(size_t(p.out_elems()));
  const PoolReference ref = generate_pool_tensor(p, host.data());
  const std::vector<double> tol = pool_tolerance(p, ref);
  GpuSession gpu(p);
  DeviceBuffer<float> tensor(host.size(), "test tensor");
  ASSERT_EQ(cudaMemcpy(tensor.get(), host.data(), tensor.bytes(), cudaMemcpyHostToDevice), cudaSuccess);

  const StageDescriptor& real = *stages_with_pool_phase().front();
  // Control: the real pool phase passes on this tensor.
  const Agreement ok = check_pooled(gpu.time_pool(real, tensor.get(), 1, 1, true).pooled, ref, tol);
  EXPECT_TRUE(ok.pass()) << ok.summary();

  StageDescriptor lazy = real;
  lazy.run_pool = pool_writes_nothing;
  const Agreement none = check_pooled(gpu.time_pool(lazy, tensor.get(), 0, 1, true).pooled, ref, tol);
  EXPECT_FALSE(none.pass());
  EXPECT_EQ(none.nan_count, p.pooled_elems()) << none.summary();

  // Poisoned before every repetition, not once: what the warm-up wrote does not survive.
  g_real_stage = &real;
  g_writes_left = 1;
  lazy.run_pool = pool_writes_once;
  const Agreement once = check_pooled(gpu.time_pool(lazy, tensor.get(), 1, 1, false).pooled, ref, tol);
  EXPECT_FALSE(once.pass());
  EXPECT_EQ(once.nan_count, p.pooled_elems()) << once.summary();

  lazy.run_pool = pool_marks_nothing;
  EXPECT_THROW(gpu.time_pool(lazy, tensor.get(), 0, 1, false), std::logic_error);
}

class NoMarks : public PhaseMarks {
 public:
  void begin(Phase) override {}
};

// The pool phase alone on a stage's own convT output gives the pooled of its full run: bitwise
// for a deterministic stage (01), within the pool-only tolerance for the atomic ones. Stages
// 01-05 keep their convT output at the start of their workspace (per_thread_loop.cu,
// lib/plane_sums.cuh); the test reads it there.
TEST(PoolOnlyGpu, PoolPhaseAloneGivesThePooledOfTheFullRun) {
  SKIP_WITHOUT_GPU();
  for (Distribution d : {Distribution::Structured, Distribution::Uniform}) {
    Problem p = testing::make(2, 3, 5, 13, 11, {3, 3});  // convT output 15 x 13: odd, not /4
    p.distribution = d;
    const HostInputs in = make_inputs(p);
    auto upload = [](const std::vector<float>& h, const char* what) {
      DeviceBuffer<float> b(h.size(), what);
      EXPECT_EQ(cudaMemcpy(b.get(), h.data(), b.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
      return b;
    };
    const DeviceBuffer<float> x = upload(in.x, "x"), w = upload(in.weight, "weight"),
                              cb = upload(in.conv_bias, "conv_bias"), bias = upload(in.bias, "bias");
    const size_t planes = size_t(p.pooled_elems());
    DeviceBuffer<float> pooled(planes, "pooled"), alone(planes, "pooled of the pool phase alone"),
        y(size_t(p.batch), "y");
    NoMarks marks;
    for (const StageDescriptor* s : stages_with_pool_phase()) {
      SCOPED_TRACE(s->label() + " on " + p.describe());
      const size_t ws_bytes = s->workspace_bytes ? s->workspace_bytes(p) : 0;
      ASSERT_GE(ws_bytes, size_t(p.out_elems()) * sizeof(float)) << "the convT output is not in the workspace";
      DeviceBuffer<unsigned char> ws(ws_bytes, "workspace");
      if (s->prepare) s->prepare(p);
      ASSERT_EQ(cudaMemset(pooled.get(), 0xFF, pooled.bytes()), cudaSuccess);
      s->run_gpu({p, {x.get(), w.get(), cb.get(), bias.get()}, pooled.get(), y.get(), ws.get(), nullptr, marks});
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<double> full = to_host(pooled.get(), planes);

      const float* conv_out = reinterpret_cast<const float*>(ws.get());
      std::vector<float> conv(size_t(p.out_elems()));
      ASSERT_EQ(cudaMemcpy(conv.data(), conv_out, conv.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      const PoolReference ref = pool_reference(p, conv.data());
      const std::vector<double> tol = pool_tolerance(p, ref);
      DeviceBuffer<unsigned char> pool_ws(s->pool_workspace_bytes ? s->pool_workspace_bytes(p) : 0, "pool workspace");
      ASSERT_EQ(cudaMemset(alone.get(), 0xFF, alone.bytes()), cudaSuccess);
      s->run_pool({p, conv_out, alone.get(), pool_ws.get(), nullptr, marks});
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<double> got = to_host(alone.get(), planes);

      EXPECT_TRUE(check_pooled(full, ref, tol).pass()) << "full run: " << check_pooled(full, ref, tol).summary();
      EXPECT_TRUE(check_pooled(got, ref, tol).pass()) << "pool alone: " << check_pooled(got, ref, tol).summary();
      if (s->deterministic) {
        EXPECT_TRUE(bitwise_equal(full, got)) << "pooled differs from the full run's";
      }
    }
  }
}

}  // namespace
}  // namespace ladder
