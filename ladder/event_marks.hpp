// Phase timing shared by the tracks' runners: a rung calls marks->begin("phase") before a phase's
// first launch, and EventMarks records a CUDA event there; time_phases times whole repetitions
// with CUDA events and each phase from its event to the next one (or to the end of the run).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda_check.hpp"
#include "timing.hpp"  // Spread, spread_of, L2Flush

namespace ladder {

/// Records a CUDA event on `stream` at every mark; events are created once and reused by later
/// repetitions (reset() between them). Base: a track's PhaseMarks interface (virtual
/// begin(const char*)). begin throws CudaError when an event cannot be created or recorded.
template <class Base>
class EventMarks : public Base {
 public:
  explicit EventMarks(cudaStream_t stream) : stream_(stream) {}
  ~EventMarks() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);  // no throw from a destructor
  }
  EventMarks(const EventMarks&) = delete;
  EventMarks& operator=(const EventMarks&) = delete;
  void begin(const char* phase) override {
    if (marks_.size() == pool_.size()) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      pool_.push_back(e);
    }
    CUDA_CHECK(cudaEventRecord(pool_[marks_.size()], stream_));
    marks_.emplace_back(phase, pool_[marks_.size()]);
  }
  void reset() { marks_.clear(); }
  const std::vector<std::pair<std::string, cudaEvent_t>>& marks() const { return marks_; }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> pool_;
  std::vector<std::pair<std::string, cudaEvent_t>> marks_;
};

/// Two events, destroyed with the object (also when a check throws). Throws CudaError.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start));
    if (cudaError_t e = cudaEventCreate(&stop); e != cudaSuccess) {  // do not leak start
      cudaEventDestroy(start);
      CUDA_CHECK(e);
    }
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

/// Times `run` with CUDA events: `warmup` untimed runs, then `reps` timed ones, each after an
/// optional L2 flush and `before` (poisoning), both outside the timed region. `run` gets the
/// marks to hand to the rung (null during warm-up and when phase_ms is null); phase_ms receives
/// the median ms of each phase, in the order marked. Returns the spread of the totals, ms.
/// Base: a track's PhaseMarks interface. Throws CudaError.
template <class Base>
Spread time_phases(const std::function<void(Base*)>& run, const std::function<void()>& before, int warmup, int reps,
                   const L2Flush* flush, cudaStream_t stream,
                   std::vector<std::pair<std::string, double>>* phase_ms = nullptr) {
  EventMarks<Base> marks(stream);
  EventPair ev;
  for (int i = 0; i < warmup; ++i) {
    before();
    run(nullptr);
  }
  std::vector<double> total;
  std::vector<std::pair<std::string, std::vector<double>>> phases;
  for (int i = 0; i < reps; ++i) {
    if (flush) (*flush)(stream);
    before();
    marks.reset();
    CUDA_CHECK(cudaEventRecord(ev.start, stream));
    run(phase_ms ? &marks : nullptr);
    CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    CUDA_CHECK(cudaEventSynchronize(ev.stop));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, ev.start, ev.stop));
    total.push_back(t);
    const auto& m = marks.marks();
    for (size_t k = 0; k < m.size(); ++k) {
      CUDA_CHECK(cudaEventElapsedTime(&t, m[k].second, k + 1 < m.size() ? m[k + 1].second : ev.stop));
      if (phases.size() <= k) phases.emplace_back(m[k].first, std::vector<double>{});
      phases[k].second.push_back(t);
    }
  }
  if (phase_ms) {
    phase_ms->clear();
    for (auto& [name, v] : phases) phase_ms->emplace_back(name, spread_of(v).median);
  }
  return spread_of(total);
}

/// Median ms of `enqueue` alone (the floors), timed as time_phases does. Throws CudaError.
inline double time_median(const std::function<void()>& enqueue, int warmup, int reps, const L2Flush* flush,
                          cudaStream_t stream) {
  struct NoMarks {
    virtual ~NoMarks() = default;
    virtual void begin(const char*) = 0;
  };
  return time_phases<NoMarks>([&](NoMarks*) { enqueue(); }, [] {}, warmup, reps, flush, stream).median;
}

}  // namespace ladder
