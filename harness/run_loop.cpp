#include "run_loop.hpp"

#include <cstdio>

#include "cuda_check.hpp"
#include "cuda_context.hpp"

namespace ladder {

void poison(void* data, size_t bytes, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(data, 0xff, bytes, stream));  // all bits set: NaN, or -1
}

cudaError_t sticky_error_after(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const CudaError*>(&e); ce && is_sticky_cuda_error(ce->code()))
    return ce->code();
  return sticky_cuda_error();
}

std::string track_skip_note(Skip why, const std::string& unsupported, double macs, double cpu_max_macs) {
  switch (why) {
    case Skip::Unsupported:
      return unsupported.empty() ? "" : "skipped: " + unsupported;
    case Skip::Lost:
      return "not run: an earlier rung left the CUDA context unusable (" + cuda_error_text(sticky_cuda_error()) + ")";
    case Skip::CpuCost: {
      char buf[160];
      std::snprintf(buf, sizeof buf, "skipped: %.3g multiply-adds exceed --cpu-max-macs %.3g (--force-cpu runs it)",
                    macs, cpu_max_macs);
      return buf;
    }
    case Skip::NoDevice:
      return "not run: no CUDA device";
    default:
      return "";
  }
}

}  // namespace ladder
