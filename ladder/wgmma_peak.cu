// wgmma_peak: the TF32 throughput of Hopper's warpgroup MMA (wgmma.mma_async, sm_90a), the
// ceiling of the wgmma rung next to mma_peak's for mma.sync; and how wgmma converts fp32 bits fed
// to a TF32 operand (truncation or rounding to nearest), found with a layout-free probe: every
// element of A is one value v and every element of B is 1, so each output is 8 * tf32(v) whatever
// the shared-memory layout, and v = 1 + 0.75 * 2^-10 lies between the TF32 values 1 and 1 + 2^-10.
// Each m64n128k8 wgmma is 2 * 64 * 128 * 8 = 131072 flops. Needs an sm_90 GPU and code built for
// sm_90a (CMake builds the target so whenever 90 is in the architecture list); exits with a
// message on any other GPU.
//
//   wgmma_peak [--reps R] [--iters N]
//
// As mma_peak, it builds with nvcc alone (nvcc -O3 -std=c++17
// -gencode=arch=compute_90a,code=sm_90a -Icommon/toolkit -o wgmma_peak
// ladder/wgmma_peak.cu common/toolkit/device.cpp common/toolkit/cuda_check.cpp), with the options
// and the timing of ladder/peak_harness.hpp. The instructions
// are the ones stage 15 uses (common/toolkit/wgmma.cuh), so the ceiling is measured with the
// rung's own code.
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "cuda_check.hpp"
#include "peak_harness.hpp"
#include "wgmma.cuh"  // the instructions the wgmma rung uses: descriptors, wgmma, fences

namespace {

constexpr int kWgmmaPerCommit = 16;    // wgmmas issued between a commit and the wait
constexpr int kSmemFloats = 8192;      // 32 KB of operands; the descriptors stay inside it

#if LADDER_HAS_WGMMA
/// Fills the operands with `value` (A) and 1 (B), then runs iters x kWgmmaPerCommit wgmmas per
/// warpgroup; out: thread 0 of each block writes its first accumulator.
__device__ void fill_and_run(float value, int iters, float* out) {
  extern __shared__ __align__(128) float smem[];
  for (int i = threadIdx.x; i < kSmemFloats; i += blockDim.x) smem[i] = i < kSmemFloats / 2 ? value : 1.0f;
  ladder::fence_proxy_async();  // ordinary stores -> the async proxy that wgmma reads through
  __syncthreads();
  const uint64_t a = ladder::wgmma_desc(ladder::smem_addr(smem), 128, 256);
  const uint64_t b = ladder::wgmma_desc(ladder::smem_addr(smem + kSmemFloats / 2), 128, 256);
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    ladder::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kWgmmaPerCommit; ++k) ladder::wgmma_m64n128k8(d, a, b, true);
    ladder::wgmma_commit();
    ladder::wgmma_wait<0>();
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += d[i];
  if (threadIdx.x == 0) out[blockIdx.x] = d[0];
  if (s == 1.2345f) out[gridDim.x] = s;  // keeps every accumulator alive
}
#endif

__global__ void wgmma_loop(float value, int iters, float* out) {
#if LADDER_HAS_WGMMA
  fill_and_run(value, iters, out);
#else
  (void)value, (void)iters, (void)out;
  __trap();
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const ladder::PeakOptions opt = ladder::parse_peak_options(
      argc, argv, "wgmma_peak: the TF32 wgmma throughput of this Hopper GPU, and whether wgmma rounds its operands", 2000);
  const int reps = opt.reps, iters = opt.iters;
  if (!ladder::peak_gpu_present("wgmma_peak")) return 0;
  try {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    if (prop.major != 9 || prop.minor != 0) {
      std::fprintf(stderr, "wgmma_peak: %s is sm_%d%d; wgmma is Hopper's (sm_90a) only\n", prop.name, prop.major,
                   prop.minor);
      return 1;
    }
    const size_t smem = kSmemFloats * sizeof(float);
    float* out = nullptr;
    const int max_blocks = prop.multiProcessorCount * 2;
    CUDA_CHECK(cudaMalloc(&out, (max_blocks + 1) * sizeof(float)));

    // The rounding probe: one block, one warpgroup, one wgmma (k = 8): out = 8 * tf32(v).
    const float v = 1.0f + 0.75f / 1024.0f;
    wgmma_loop<<<1, 128, smem>>>(v, 1, out);
    CUDA_CHECK_LAUNCH("wgmma_loop (probe)");
    float got = 0;
    CUDA_CHECK(cudaMemcpy(&got, out, sizeof(float), cudaMemcpyDeviceToHost));
    // Sixteen wgmmas (kWgmmaPerCommit) accumulated: each adds 8 * tf32(v), every sum exact.
    const float per_wgmma = got / kWgmmaPerCommit, rounded = 8.0f * (1.0f + 1.0f / 1024.0f), truncated = 8.0f;
    std::printf("device: %s, %d SMs, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    std::printf("TF32 operand conversion in wgmma: %s (8 products of v = 1 + 0.75 * 2^-10 and 1 gave %.9g; "
                "rounding to nearest gives %.9g, truncation %.9g)\n",
                per_wgmma == rounded ? "rounds to nearest" : per_wgmma == truncated ? "truncates" : "NEITHER",
                per_wgmma, rounded, truncated);

    double best = 0;
    for (const int warpgroups : {1, 2, 3, 4})
      for (const int per_sm : {1, 2}) {
        const int blocks = prop.multiProcessorCount * per_sm, threads = 128 * warpgroups;
        wgmma_loop<<<blocks, threads, smem>>>(1.0f, 10, out);  // warm-up
        CUDA_CHECK_LAUNCH("wgmma_loop");
        const float ms = ladder::median_launch_ms(reps, [&] {
          wgmma_loop<<<blocks, threads, smem>>>(1.0f, iters, out);
          CUDA_CHECK_LAUNCH("wgmma_loop");
        });
        const double flops = double(blocks) * warpgroups * iters * kWgmmaPerCommit * 131072.0;
        const double tflops = flops / (ms * 1e-3) / 1e12;
        best = std::max(best, tflops);
        std::printf("  %d warpgroups/block, %d blocks/SM: %7.1f TFLOP/s\n", warpgroups, per_sm, tflops);
      }
    std::printf("measured TF32 wgmma peak: %.1f TFLOP/s\n", best);
    CUDA_CHECK(cudaFree(out));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wgmma_peak: %s\n", e.what());
    return 1;
  }
  return 0;
}
