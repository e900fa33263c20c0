// mma_peak: the TF32 tensor-core throughput that mma.sync can reach on this GPU, the ceiling
// stage 10 is measured against (its chapter quotes the share). Every warp runs kChains
// independent m16n8k8 TF32 mma chains (enough to cover the instruction's latency) on register
// operands, so nothing but the tensor pipe limits it; the grid is swept over warps per block and
// blocks per SM, timed with CUDA events (median of --reps), and the best is the measured peak.
// Each mma is 2 * 16 * 8 * 8 = 2048 flops. Needs sm_80 or newer (exits with a message below).
//
//   mma_peak [--reps R] [--iters N]
//
// It builds with nvcc alone (nvcc -O3 -arch=sm_90 -Icommon/toolkit -o mma_peak
// ladder/mma_peak.cu common/toolkit/device.cpp common/toolkit/cuda_check.cpp); the options and the
// timing are ladder/peak_harness.hpp's.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "cuda_check.hpp"
#include "peak_harness.hpp"

namespace {

constexpr int kChains = 8;  // independent accumulators per warp

/// iters x kChains dependent-free mma per warp. The operands are arbitrary bits; the sums are
/// consumed (an impossible compare) so the compiler keeps every mma.
__global__ void mma_loop(float* sink, int iters) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float d[kChains][4] = {};
  const uint32_t a[4] = {threadIdx.x, 1u, 2u, 3u}, b[2] = {5u, 7u};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c)
      asm volatile(
          "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float s = 0.0f;
  for (int c = 0; c < kChains; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  if (s == 1.2345f) *sink = s;
#else
  (void)sink, (void)iters;
  __trap();
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const ladder::PeakOptions opt = ladder::parse_peak_options(
      argc, argv, "mma_peak: the TF32 mma.sync throughput this GPU reaches (the tensor-core rungs' ceiling)", 20000);
  const int reps = opt.reps, iters = opt.iters;
  if (!ladder::peak_gpu_present("mma_peak")) return 0;
  try {
    int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    if (major < 8) {
      std::fprintf(stderr, "mma_peak: %s is sm_%d%d; TF32 mma.sync needs sm_80 or newer\n", prop.name, major, minor);
      return 1;
    }
    std::printf("device: %s, %d SMs, max SM clock %.2f GHz, sm_%d%d\n", prop.name, sms, khz / 1e6, major, minor);
    std::printf("mma.sync.m16n8k8 TF32 (FP32 accumulate), %d independent chains per warp, %d iterations, "
                "median of %d\n", kChains, iters, reps);
    float* sink = nullptr;
    CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
    double best = 0;
    for (const int warps : {4, 8, 16})
      for (const int per_sm : {1, 2, 4}) {
        const int blocks = sms * per_sm;
        mma_loop<<<blocks, warps * 32>>>(sink, 100);  // warm-up
        CUDA_CHECK_LAUNCH("mma_loop");
        const float ms = ladder::median_launch_ms(reps, [&] {
          mma_loop<<<blocks, warps * 32>>>(sink, iters);
          CUDA_CHECK_LAUNCH("mma_loop");
        });
        const double flops = double(blocks) * warps * iters * kChains * 2048.0;
        const double tflops = flops / (ms * 1e-3) / 1e12;
        best = std::max(best, tflops);
        std::printf("  %2d warps/block, %d blocks/SM: %7.1f TFLOP/s\n", warps, per_sm, tflops);
      }
    std::printf("measured TF32 mma.sync peak: %.1f TFLOP/s\n", best);
    CUDA_CHECK(cudaFree(sink));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mma_peak: %s\n", e.what());
    return 1;
  }
  return 0;
}
