// Every CUDA runtime call and every launch goes through these checks: a failure throws
// CudaError naming the call, the file and line, and CUDA's own error string.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ladder {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

/// What to do about the errors a course machine meets first, as ". <advice>": a binary built for
/// another GPU (it names the architectures built and this GPU's), a toolkit newer than the
/// driver (Colab's T4 driver runs CUDA 12.x only), or no driver at all (driver_version_hint()).
/// Empty for every other error.
std::string cuda_error_hint(cudaError_t code);

/// What a machine without a usable GPU is told, in one short line: no driver is loaded (the
/// runtime reports driver version 0), or the driver sees no device.
inline constexpr const char* kNoDriverOrGpu = "no NVIDIA driver / no GPU";

/// A CUDA version number as the runtime encodes it (1000 x major + 10 x minor) as "12.4".
std::string cuda_version_text(int version);

/// cuda_error_hint()'s advice for cudaErrorInsufficientDriver, from cudaDriverGetVersion() and
/// cudaRuntimeGetVersion(): ". no NVIDIA driver / no GPU" where `driver_version` is 0 (no driver
/// is installed: an older toolkit would not help), else ". The driver supports CUDA 12.4, this
/// program was built with CUDA 13.0: build with a toolkit no newer than the driver (...)".
std::string driver_version_hint(int driver_version, int runtime_version);

[[noreturn]] void throw_cuda_error(cudaError_t code, const char* expr, const char* file, int line);

inline void cuda_check(cudaError_t code, const char* expr, const char* file, int line) {
  if (code != cudaSuccess) throw_cuda_error(code, expr, file, line);
}

}  // namespace ladder

/// Checks a CUDA runtime call.
#define CUDA_CHECK(expr) ::ladder::cuda_check((expr), #expr, __FILE__, __LINE__)
/// Checks the launch just made (bad configuration, too much shared memory, ...). Errors raised
/// while the kernel runs surface at the next synchronizing call, which is checked too.
#define CUDA_CHECK_LAUNCH(name) ::ladder::cuda_check(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
