// Device discovery and device memory that says how much it needed when it runs out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "cuda_check.hpp"

namespace ladder {

/// Whether a usable CUDA device exists; if not, `why` says why in one line:
/// cuda_unavailable_reason() of what the runtime reported.
bool cuda_device_available(std::string* why = nullptr);

/// Why no CUDA device can be used, from cudaGetDeviceCount()'s `code` and `count` and the
/// versions cudaDriverGetVersion() (0 without a driver) and cudaRuntimeGetVersion() report:
/// "no NVIDIA driver / no GPU" (kNoDriverOrGpu) for cudaErrorNoDevice, for 0 devices and for
/// cudaErrorInsufficientDriver with driver version 0 (no driver installed); for a driver older
/// than the runtime, the error, CUDA's description and driver_version_hint()'s advice (a toolkit
/// no newer than the driver); for any other error, the same with cuda_error_hint().
std::string cuda_unavailable_reason(cudaError_t code, int count, int driver_version, int runtime_version);

/// "NVIDIA H100 80GB HBM3, 132 SMs, 50 MiB L2, 79.1 GiB, sm_90".
std::string device_description();

/// FP32 FMA peak of the current device in TFLOP/s: SMs x FP32 lanes per SM x max SM clock x 2
/// (an FMA is two flops). Lanes per SM from NVIDIA's architecture whitepapers: 64 on sm_60, sm_70,
/// sm_75 and sm_80; 128 on sm_61, sm_86, sm_89, sm_90 and newer. `formula` receives the numbers used.
double fp32_peak_tflops(std::string* formula = nullptr);

/// Specified DRAM bandwidth of the current device in GB/s (1e9 bytes/s): 2 transfers per clock x
/// memory clock x bus width / 8, from cudaDevAttrMemoryClockRate (kHz) and
/// cudaDevAttrGlobalMemoryBusWidth (bits). A datasheet-style number no kernel reaches; 0 where the
/// device reports either attribute as 0. `formula` receives the numbers used.
double dram_peak_gbps(std::string* formula = nullptr);

/// The dynamic shared memory one block may opt in to on the current device, in bytes:
/// cudaDevAttrMaxSharedMemoryPerBlockOptin (64 KiB on sm_75, 163 KiB on sm_80, 99 KiB on sm_86
/// and sm_89, 227 KiB on sm_90), or less where the environment variable
/// LADDER_SHARED_MEMORY_LIMIT=<bytes> asks for less: the tests use it to run a small GPU's
/// shared-memory plans on a large one. Throws CudaError without a device and
/// std::invalid_argument when the variable is set but not a positive integer.
size_t shared_memory_per_block_limit();

/// The environment variable that lowers shared_memory_per_block_limit().
inline constexpr const char* kSharedMemoryLimitVariable = "LADDER_SHARED_MEMORY_LIMIT";

/// Thrown when an allocation does not fit: names what it was for, bytes needed and free.
class DeviceMemoryError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// An owning device allocation of `count` elements of T. Checks free memory first so that the
/// error names the buffer, the bytes it needs and the bytes available; throws DeviceMemoryError.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t count, const std::string& what);
  ~DeviceBuffer() { release(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(o.count_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    release();
    ptr_ = std::exchange(o.ptr_, nullptr);
    count_ = o.count_;
    return *this;
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() {
    if (ptr_) cudaFree(ptr_);  // cannot throw from a destructor; a failure here is sticky anyway
    ptr_ = nullptr;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

/// Allocates `bytes` or throws DeviceMemoryError("not enough GPU memory for <what>: needs X,
/// Y free of Z").
void* device_allocate(size_t bytes, const std::string& what);

template <typename T>
DeviceBuffer<T>::DeviceBuffer(size_t count, const std::string& what)
    : ptr_(static_cast<T*>(device_allocate(count * sizeof(T), what))), count_(count) {}

/// Human-readable bytes: "2.16 GB" (decimal units, as bandwidths are quoted).
std::string format_bytes(double bytes);

}  // namespace ladder
