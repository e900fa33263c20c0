#include "device.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ladder {

std::string cuda_unavailable_reason(cudaError_t code, int count, int driver_version, int runtime_version) {
  if (code == cudaSuccess && count == 0) return kNoDriverOrGpu;
  if (code == cudaErrorNoDevice) return kNoDriverOrGpu;
  if (code == cudaErrorInsufficientDriver && driver_version <= 0) return kNoDriverOrGpu;
  if (code == cudaErrorInsufficientDriver)  // a driver older than this build's runtime: keep the advice
    return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code) +
           driver_version_hint(driver_version, runtime_version);
  return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code) + cuda_error_hint(code);
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && count > 0) return true;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (why) *why = cuda_unavailable_reason(e, count, driver, runtime);
  cudaGetLastError();  // clear the sticky-free error so later calls start clean
  return false;
}

std::string device_description() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  char buf[128];
  std::snprintf(buf, sizeof buf, ", %d SMs, %d MiB L2, %.1f GiB, sm_%d%d", prop.multiProcessorCount,
                prop.l2CacheSize >> 20, double(prop.totalGlobalMem) / double(1ull << 30), prop.major,
                prop.minor);
  return std::string(prop.name) + buf;
}

double fp32_peak_tflops(std::string* formula) {
  int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const bool half_width = (major == 6 && minor == 0) || major == 7 || (major == 8 && minor == 0);
  const int lanes = half_width ? 64 : 128;
  const double tflops = double(sms) * lanes * (double(khz) * 1e3) * 2.0 / 1e12;
  if (formula) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%d SMs x %d FP32 lanes x %.2f GHz x 2 = %.1f TFLOP/s", sms, lanes,
                  double(khz) / 1e6, tflops);
    *formula = buf;
  }
  return tflops;
}

double dram_peak_gbps(std::string* formula) {
  int dev = 0, khz = 0, bits = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  // HBM and GDDR move data on both clock edges: two transfers per memory clock per bus bit.
  const double gbps = 2.0 * (double(khz) * 1e3) * double(bits) / 8.0 / 1e9;
  if (formula) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "2 x %.0f MHz x %d bits / 8 = %.0f GB/s", double(khz) / 1e3, bits, gbps);
    *formula = buf;
  }
  return gbps;
}

size_t shared_memory_per_block_limit() {
  int dev = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  size_t limit = size_t(optin);
  if (const char* v = std::getenv(kSharedMemoryLimitVariable); v && *v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long asked = std::strtoull(v, &end, 10);
    if (!std::isdigit(static_cast<unsigned char>(v[0])) || *end != '\0' || errno == ERANGE || asked == 0)
      throw std::invalid_argument(std::string(kSharedMemoryLimitVariable) + "='" + v +
                                  "' is not a positive number of bytes (e.g. 65536 for a T4's 64 KiB)");
    if (asked < limit) limit = size_t(asked);
  }
  return limit;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int i = 0;
  while (bytes >= 1000.0 && i < 4) {
    bytes /= 1000.0;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f %s" : "%.2f %s", bytes, units[i]);
  return buf;
}

void* device_allocate(size_t bytes, const std::string& what) {
  if (bytes == 0) return nullptr;
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::string detail = "not enough GPU memory for " + what + ": needs " + format_bytes(double(bytes)) +
                             " (" + std::to_string(bytes) + " bytes), " + format_bytes(double(free_bytes)) +
                             " free of " + format_bytes(double(total_bytes));
  if (bytes > free_bytes) throw DeviceMemoryError(detail);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw DeviceMemoryError(detail);
  }
  CUDA_CHECK(e);
  return p;
}

}  // namespace ladder
