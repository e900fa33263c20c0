// The advice CudaError adds to the errors a course machine meets first (common/toolkit/cuda_check.cpp):
// a binary built for another GPU, a toolkit newer than the driver, no driver at all; and the one
// line a program without a usable GPU prints (common/toolkit/device.cpp). No GPU needed.
#include <gtest/gtest.h>

#include <string>

#include "cuda_check.hpp"
#include "device.hpp"

namespace ladder {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CudaErrorHint, NamesTheBuiltArchitecturesForAMissingKernelImage) {
  const std::string hint = cuda_error_hint(cudaErrorNoKernelImageForDevice);
  EXPECT_TRUE(contains(hint, "This build holds code for CUDA architectures ")) << hint;
  EXPECT_FALSE(contains(hint, "architectures unknown")) << "CMake defines LADDER_CUDA_ARCHITECTURES: " << hint;
  EXPECT_TRUE(contains(hint, "-DCMAKE_CUDA_ARCHITECTURES=")) << hint;
}

TEST(CudaErrorHint, ComparesDriverAndToolkitForAnOldDriver) {
  const std::string hint = driver_version_hint(12040, 13000);
  EXPECT_TRUE(contains(hint, "The driver supports CUDA 12.4, this program was built with CUDA 13.0")) << hint;
  EXPECT_TRUE(contains(hint, "build with a toolkit no newer than the driver")) << hint;
}

// Without a driver the runtime reports cudaErrorInsufficientDriver and driver version 0: that is
// no driver (or no GPU), not an old one, and an older toolkit would not help.
TEST(CudaErrorHint, SaysNoDriverWhenTheDriverVersionIsZero) {
  const std::string hint = driver_version_hint(0, 13000);
  EXPECT_EQ(hint, ". no NVIDIA driver / no GPU");
  EXPECT_FALSE(contains(hint, "toolkit")) << hint;
}

TEST(CudaErrorHint, UsesThisMachinesVersionsForADriverError) {
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  for (const cudaError_t e : {cudaErrorInsufficientDriver, cudaErrorUnsupportedPtxVersion})
    EXPECT_EQ(cuda_error_hint(e), driver_version_hint(driver, runtime));
}

TEST(CudaUnavailableReason, IsOneShortLineWithoutADriverOrAGpu) {
  EXPECT_EQ(cuda_unavailable_reason(cudaErrorInsufficientDriver, 0, 0, 13000), "no NVIDIA driver / no GPU");
  EXPECT_EQ(cuda_unavailable_reason(cudaErrorNoDevice, 0, 12040, 13000), "no NVIDIA driver / no GPU");
  EXPECT_EQ(cuda_unavailable_reason(cudaSuccess, 0, 13000, 13000), "no NVIDIA driver / no GPU");
}

TEST(CudaUnavailableReason, KeepsTheAdviceForADriverOlderThanTheRuntime) {
  const std::string why = cuda_unavailable_reason(cudaErrorInsufficientDriver, 0, 12040, 13000);
  EXPECT_TRUE(contains(why, "cudaErrorInsufficientDriver")) << why;
  EXPECT_TRUE(contains(why, "The driver supports CUDA 12.4, this program was built with CUDA 13.0")) << why;
  EXPECT_FALSE(contains(why, "no NVIDIA driver")) << why;
}

TEST(CudaUnavailableReason, NamesAnyOtherError) {
  const std::string why = cuda_unavailable_reason(cudaErrorDevicesUnavailable, 0, 13000, 13000);
  EXPECT_TRUE(contains(why, "cudaErrorDevicesUnavailable")) << why;
}

// This machine's own answer agrees with cuda_unavailable_reason(), and fits on one line.
TEST(CudaUnavailableReason, IsWhatCudaDeviceAvailableReports) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is available";
  int count = 0, driver = 0, runtime = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  cudaGetLastError();
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  EXPECT_EQ(why, cuda_unavailable_reason(e, count, driver, runtime));
  EXPECT_EQ(why.find('\n'), std::string::npos) << why;
}

TEST(CudaErrorHint, IsEmptyForOtherErrors) {
  EXPECT_EQ(cuda_error_hint(cudaErrorMemoryAllocation), "");
  EXPECT_EQ(cuda_error_hint(cudaErrorIllegalAddress), "");
}

TEST(CudaErrorHint, IsPartOfTheThrownMessage) {
  try {
    CUDA_CHECK(cudaErrorNoKernelImageForDevice);
    FAIL() << "CUDA_CHECK did not throw";
  } catch (const CudaError& e) {
    EXPECT_TRUE(contains(e.what(), "cudaErrorNoKernelImageForDevice")) << e.what();
    EXPECT_TRUE(contains(e.what(), "-DCMAKE_CUDA_ARCHITECTURES=")) << e.what();
  }
}

}  // namespace
}  // namespace ladder
