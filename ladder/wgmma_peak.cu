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
// Plain argument parsing, as in mma_peak: it builds with nvcc alone (nvcc -O3 -std=c++17
// -gencode=arch=compute_90a,code=sm_90a -Icommon/toolkit -o wgmma_peak ladder/wgmma_peak.cu
// common/toolkit/device.cpp common/toolkit/cuda_check.cpp).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_check.hpp"

namespace {

constexpr int kWgmmaPerCommit = 16;    // wgmmas issued between a commit and the wait
constexpr int kSmemFloats = 8192;      // 32 KB of operands; the descriptors stay inside it

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LADDER_HAS_WGMMA 1
#endif

#ifdef LADDER_HAS_WGMMA
/// A shared-memory matrix descriptor without swizzle: start address, leading- and
/// stride-dimension byte offsets, each in 16-byte units (PTX ISA, "Matrix Descriptor Format").
__device__ uint64_t smem_descriptor(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return (uint64_t((addr >> 4) & 0x3FFF)) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32);
}

/// d (64 x 128 fp32 accumulators of one warpgroup, 64 per thread) += A (64 x 8) * B (8 x 128), both
/// TF32 from shared memory, K-major.
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

/// Fills the operands with `value` (A) and 1 (B), then runs iters x kWgmmaPerCommit wgmmas per
/// warpgroup; out: thread 0 of each block writes its first accumulator.
__device__ void fill_and_run(float value, int iters, float* out) {
  extern __shared__ __align__(128) float smem[];
  for (int i = threadIdx.x; i < kSmemFloats; i += blockDim.x) smem[i] = i < kSmemFloats / 2 ? value : 1.0f;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // ordinary stores -> async proxy
  __syncthreads();
  const uint64_t a = smem_descriptor(smem, 128, 256);
  const uint64_t b = smem_descriptor(smem + kSmemFloats / 2, 128, 256);
  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kWgmmaPerCommit; ++k) wgmma_m64n128k8(d, a, b);
    wgmma_commit();
    wgmma_wait_all();
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += d[i];
  if (threadIdx.x == 0) out[blockIdx.x] = d[0];
  if (s == 1.2345f) out[gridDim.x] = s;  // keeps every accumulator alive
}
#endif

__global__ void wgmma_loop(float value, int iters, float* out) {
#ifdef LADDER_HAS_WGMMA
  fill_and_run(value, iters, out);
#else
  (void)value, (void)iters, (void)out;
  __trap();
#endif
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "wgmma_peak: %s\nusage: wgmma_peak [--reps R] [--iters N]\n", why);
  std::exit(2);
}

int positive(const char* flag, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < 1 || v > (1L << 30)) usage((std::string(flag) + " needs a positive integer").c_str());
  return int(v);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7, iters = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
    if (arg == "--reps") reps = positive("--reps", argv[++i]);
    else if (arg == "--iters") iters = positive("--iters", argv[++i]);
    else usage(("unknown option " + arg).c_str());
  }
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

    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    double best = 0;
    for (const int warpgroups : {1, 2, 3, 4})
      for (const int per_sm : {1, 2}) {
        const int blocks = prop.multiProcessorCount * per_sm, threads = 128 * warpgroups;
        wgmma_loop<<<blocks, threads, smem>>>(1.0f, 10, out);  // warm-up
        CUDA_CHECK_LAUNCH("wgmma_loop");
        std::vector<float> ms(reps);
        for (float& m : ms) {
          CUDA_CHECK(cudaEventRecord(e0));
          wgmma_loop<<<blocks, threads, smem>>>(1.0f, iters, out);
          CUDA_CHECK_LAUNCH("wgmma_loop");
          CUDA_CHECK(cudaEventRecord(e1));
          CUDA_CHECK(cudaEventSynchronize(e1));
          CUDA_CHECK(cudaEventElapsedTime(&m, e0, e1));
        }
        std::sort(ms.begin(), ms.end());
        const double flops = double(blocks) * warpgroups * iters * kWgmmaPerCommit * 131072.0;
        const double tflops = flops / (ms[ms.size() / 2] * 1e-3) / 1e12;
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
