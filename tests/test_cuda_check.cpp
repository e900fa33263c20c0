// The advice CudaError adds to the errors a course machine meets first (common/cuda_check.cpp):
// a binary built for another GPU, a toolkit newer than the driver. No GPU needed.
#include <gtest/gtest.h>

#include <string>

#include "cuda_check.hpp"

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
  for (const cudaError_t e : {cudaErrorInsufficientDriver, cudaErrorUnsupportedPtxVersion}) {
    const std::string hint = cuda_error_hint(e);
    EXPECT_TRUE(contains(hint, "The driver supports CUDA ")) << hint;
    EXPECT_TRUE(contains(hint, "this program was built with CUDA ")) << hint;
  }
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
