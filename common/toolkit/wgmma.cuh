// Hopper's asynchronous tensor-core and copy instructions, as the wgmma rungs (15, 16, 17) and the
// wgmma_peak program use them:
// shared-memory matrix descriptors, wgmma.mma_async (TF32, m64n128k8; A from shared memory or, for
// rung 17, from registers) with its fence, commit and
// wait, mbarriers with transaction counts, the bulk copy (TMA without a tensor map) and the proxy
// fence. All of it exists only in code compiled for sm_90a (LADDER_HAS_WGMMA); elsewhere each
// helper traps, and the host takes another path (stages/lib/wgmma_host.cuh: wgmma_here()).
#pragma once

#include <cstdint>

namespace ladder {
namespace {  // internal linkage: each including program compiles its own copy

// wgmma and its companions are sm_90a features: __CUDA_ARCH_FEAT_SM90_ALL is defined only when
// nvcc compiles for sm_90a (CMake does so for this rung whenever 90 is in the architecture list).
// LADDER_NO_WGMMA makes a test build take the path every other GPU takes.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(LADDER_NO_WGMMA)
#define LADDER_HAS_WGMMA 1
#else
#define LADDER_HAS_WGMMA 0
#endif

__device__ inline uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

/// A shared-memory matrix descriptor without swizzle (PTX ISA, "Matrix Descriptor Format"): the
/// start address, the leading byte offset (between the 8-row x 16-byte core matrices adjacent in
/// K) and the stride byte offset (between those adjacent in M or N), each stored >> 4 in 14 bits.
__device__ inline uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr >> 4) & 0x3FFF) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t((sbo >> 4) & 0x3FFF) << 32);
}

/// d (64 x 128 fp32 accumulators of the warpgroup, 64 per thread) = A (64 x 8) * B (8 x 128)
/// + (accumulate ? d : 0); A and B TF32 in shared memory, K-major, given by descriptors.
__device__ __forceinline__ void wgmma_m64n128k8(float (&d)[64], uint64_t a, uint64_t b, bool accumulate) {
#if LADDER_HAS_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(int(accumulate)));
#else
  __trap();
  (void)d, (void)a, (void)b, (void)accumulate;
#endif
}
/// The same product with A from registers (PTX ISA, "Register Fragments and Shared Memory Matrix
/// Layouts", m64nNk8 A): warp w of the warpgroup holds A rows 16w .. 16w+15, and lane l = 4g + t
/// holds a[0] = A(g, t), a[1] = A(g + 8, t), a[2] = A(g, t + 4), a[3] = A(g + 8, t + 4), each the
/// bits of a TF32 value (round first: wgmma truncates). B as above, by descriptor. The registers
/// of a and d belong to the wgmma until a wgmma_wait covers it: neither may be written before.
__device__ __forceinline__ void wgmma_m64n128k8_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t b,
                                                   bool accumulate) {
#if LADDER_HAS_WGMMA
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int(accumulate)));
#else
  __trap();
  (void)d, (void)a, (void)b, (void)accumulate;
#endif
}
/// Orders this warpgroup's register accesses before the wgmma that follow (PTX ISA, "wgmma.fence").
__device__ __forceinline__ void wgmma_fence() {
#if LADDER_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
/// Closes the wgmma issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() {
#if LADDER_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
/// Waits until at most kPending of this warpgroup's committed wgmma groups are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if LADDER_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
/// mbarrier helpers (PTX ISA, "mbarrier"): init with an arrival count, arrive with an expected
/// transaction byte count, and wait for the phase with the given parity to complete.
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#if LADDER_HAS_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
#else
  __trap();
  (void)bar, (void)count;
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if LADDER_HAS_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
#else
  __trap();
  (void)bar, (void)bytes;
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
#if LADDER_HAS_WGMMA
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)), "r"(parity) : "memory");
#else
  __trap();
  (void)bar, (void)parity;
#endif
}
/// One bulk asynchronous copy global -> shared (TMA without a tensor map; PTX ISA,
/// "cp.async.bulk"): `bytes` (a multiple of 16, both addresses 16-byte aligned), completion
/// counted on `bar` as transaction bytes.
__device__ __forceinline__ void bulk_copy(float* smem_dst, const float* gmem_src, uint32_t bytes, uint64_t* bar) {
#if LADDER_HAS_WGMMA
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(smem_dst)),
               "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
#else
  __trap();
  (void)smem_dst, (void)gmem_src, (void)bytes, (void)bar;
#endif
}

/// Makes the mbarrier initializations visible to the other threads and to the async proxy.
__device__ __forceinline__ void fence_mbarrier_init() {
#if LADDER_HAS_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// Makes this thread's ordinary shared-memory writes visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_proxy_async() {
#if LADDER_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

}  // namespace
}  // namespace ladder
