#include "cuda_context.hpp"

namespace ladder {

bool is_sticky_cuda_error(cudaError_t code) {
  switch (code) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

cudaError_t sticky_cuda_error() {
  cudaGetLastError();  // clears a pending non-sticky error; a sticky one stays
  const cudaError_t first = cudaDeviceSynchronize();
  if (first == cudaSuccess || is_sticky_cuda_error(first)) return first;
  // Some other error from work still in flight: clear it and ask again. A sticky one persists.
  cudaGetLastError();
  return cudaDeviceSynchronize();
}

std::string cuda_error_text(cudaError_t code) {
  return std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ")";
}

}  // namespace ladder
