#include "cuda_check.hpp"

// The architectures this build holds code for (CMake defines it; "unknown" elsewhere, e.g. in
// the PyTorch extension's JIT build).
#ifndef LADDER_CUDA_ARCHITECTURES
#define LADDER_CUDA_ARCHITECTURES "unknown"
#endif

namespace ladder {

std::string cuda_error_hint(cudaError_t code) {
  if (code == cudaErrorNoKernelImageForDevice) {
    int dev = 0, major = 0, minor = 0;
    std::string gpu = "this GPU's";
    if (cudaGetDevice(&dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess)
      gpu = std::to_string(major) + std::to_string(minor);
    return ". This build holds code for CUDA architectures " LADDER_CUDA_ARCHITECTURES
           " only; reconfigure with -DCMAKE_CUDA_ARCHITECTURES=" + gpu + " and rebuild";
  }
  if (code == cudaErrorInsufficientDriver || code == cudaErrorUnsupportedPtxVersion) {
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    return driver_version_hint(driver, runtime);
  }
  return "";
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string driver_version_hint(int driver_version, int runtime_version) {
  if (driver_version <= 0) return ". " + std::string(kNoDriverOrGpu);
  return ". The driver supports CUDA " + cuda_version_text(driver_version) + ", this program was built with CUDA " +
         cuda_version_text(runtime_version) +
         ": build with a toolkit no newer than the driver (e.g. CUDA 12.x on Colab)";
}

void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line) {
  throw CudaError(code, std::string("CUDA error ") + cudaGetErrorName(code) + " (" +
                            cudaGetErrorString(code) + ") in " + expr + " at " + file + ":" +
                            std::to_string(line) + cuda_error_hint(code));
}

}  // namespace ladder
