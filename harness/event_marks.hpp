// Phase timing shared by the ladder and the tracks' runners: a rung calls marks.begin(phase)
// before a phase's first launch, and EventMarks records a CUDA event there; time_phases (the
// tracks) times whole repetitions with CUDA events and each phase from its event to the next one
// (or to the end of the run).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_check.hpp"
#include "timing.hpp"  // Spread, spread_of, L2Flush

namespace ladder {

/// Records a CUDA event on `stream` at every mark, in a pool of events created once and reused by
/// later repetitions (reset() between them). A phase starts at begin(phase); mark() records an
/// unnamed event, the end of the last phase. Base: the PhaseMarks interface of the program, with
/// a virtual begin(Key): the ladder's begin(Phase), a track's begin(const char*). Call reserve()
/// before the first timed repetition: creating an event between two marks is host work inside
/// the timed region. begin and mark throw CudaError when an event cannot be created or recorded.
template <class Base, class Key>
class EventMarks : public Base {
 public:
  /// What phases() holds: a track's names as strings, the ladder's Phase as it is.
  using Name = std::conditional_t<std::is_same_v<Key, const char*>, std::string, Key>;
  explicit EventMarks(cudaStream_t stream) : stream_(stream) {}
  ~EventMarks() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);  // no throw from a destructor
  }
  EventMarks(const EventMarks&) = delete;
  EventMarks& operator=(const EventMarks&) = delete;
  /// Creates events until the pool holds `marks`.
  void reserve(size_t marks) {
    while (pool_.size() < marks) pool_.push_back(create());
  }
  void begin(Key phase) override {
    mark();
    phases_.emplace_back(phase);
  }
  void mark() {
    if (used_ == pool_.size()) pool_.push_back(create());
    CUDA_CHECK(cudaEventRecord(pool_[used_], stream_));
    ++used_;
  }
  void reset() {
    phases_.clear();
    used_ = 0;
  }
  /// The phases begun since reset(), in order; phase i starts at event i.
  const std::vector<Name>& phases() const { return phases_; }
  /// Events recorded since reset().
  size_t marks() const { return used_; }
  cudaEvent_t event(size_t i) const { return pool_[i]; }
  /// ms from event `from` to event `to` (both recorded and complete).
  float elapsed(size_t from, size_t to) const {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, pool_[from], pool_[to]));
    return ms;
  }

 private:
  static cudaEvent_t create() {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  cudaStream_t stream_;
  std::vector<cudaEvent_t> pool_;
  std::vector<Name> phases_;
  size_t used_ = 0;
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
/// marks to hand to the rung (null when phase_ms is null); phase_ms receives
/// the median ms of each phase, in the order marked. Returns the spread of the totals, ms.
/// Base: a track's PhaseMarks interface. Throws CudaError.
template <class Base>
Spread time_phases(const std::function<void(Base*)>& run, const std::function<void()>& before, int warmup, int reps,
                   const L2Flush* flush, cudaStream_t stream,
                   std::vector<std::pair<std::string, double>>* phase_ms = nullptr) {
  EventMarks<Base, const char*> marks(stream);
  EventPair ev;
  // Warm-up runs get the marks too, so that every event a timed run records already exists:
  // creating one there would put host work between two marks.
  for (int i = 0; i < warmup; ++i) {
    before();
    marks.reset();
    run(phase_ms ? &marks : nullptr);
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
    const auto& m = marks.phases();
    for (size_t k = 0; k < m.size(); ++k) {
      CUDA_CHECK(cudaEventElapsedTime(&t, marks.event(k), k + 1 < m.size() ? marks.event(k + 1) : ev.stop));
      if (phases.size() <= k) phases.emplace_back(m[k], std::vector<double>{});
      phases[k].second.push_back(t);
    }
  }
  if (phase_ms) {
    phase_ms->clear();
    for (auto& [name, v] : phases) phase_ms->emplace_back(name, spread_of(v).median);
  }
  return spread_of(total);
}

/// time_phases of a rung's `pass` on `args`, a struct whose `marks` receives the phases: each run gets
/// a copy of `args` with the marks time_phases hands it. Returns the spread of the totals, ms.
template <class Base, class Args>
Spread time_pass(void (*pass)(const Args&), const Args& args, const std::function<void()>& before, int warmup,
                 int reps, const L2Flush* flush, cudaStream_t stream,
                 std::vector<std::pair<std::string, double>>* phase_ms) {
  const auto run = [&](Base* marks) {
    Args timed = args;
    timed.marks = marks;
    pass(timed);
  };
  return time_phases<Base>(run, before, warmup, reps, flush, stream, phase_ms);
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
