// Phase timing shared by the tracks' runners: a rung calls marks->begin("phase") before a phase's
// first launch, and this records a CUDA event there. The runner times each phase from its event
// to the next one (or to the end of the run).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "cuda_check.hpp"

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

}  // namespace ladder
