// What any timed GPU program here shares, the ladder and the tracks: the spread of a set of
// timings, the L2 flush before a timed launch and the compiler that built them (timing.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "device.hpp"

namespace ladder {

/// Returns the median of `v` (by copy; v may be in any order).
double median(std::vector<double> v);

/// Minimum, median and maximum of a set of timings, in ms.
struct Spread {
  double min = 0, median = 0, max = 0;
};
/// The spread of `v` (by copy; any order); all zero if v is empty.
Spread spread_of(std::vector<double> v);

/// Empties L2 before a timed launch: a memset of a device buffer twice the L2's size, then a
/// streaming read of that buffer, so that the next launch finds neither its own data nor dirty
/// lines waiting to be written back in L2 (the ladder's GpuSession and the tracks' runners flush this way; so does grader/).
class L2Flush {
 public:
  /// Allocates the buffer for the current device's L2 (throws DeviceMemoryError) and plans its read.
  L2Flush();
  /// Enqueues the flush on `stream`; throws CudaError.
  void operator()(cudaStream_t stream) const;

 private:
  DeviceBuffer<unsigned char> buffer_;
  std::function<void(cudaStream_t)> read_;  ///< the planned read-back (streaming_read.cuh)
};

/// The CUDA compiler that built the runner (and the kernels linked with it): "13.0.88", for
/// the provenance of a timed result.
std::string nvcc_version();

}  // namespace ladder
