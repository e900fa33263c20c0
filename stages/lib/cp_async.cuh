// cp.async, the asynchronous global -> shared copy of sm_80 and newer (PTX ISA, "cp.async"),
// the idea of stage 09 and the copies of the tensor-core stages: 4- and 16-byte copies, commit and
// wait. Below sm_80, or built with LADDER_NO_CP_ASYNC (a test runs the sm_75 path on a newer GPU),
// each copy is a plain synchronous one and commit and wait do nothing.
#pragma once

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

// cp.async exists from sm_80 on. LADDER_NO_CP_ASYNC takes the fallback on any GPU: a test builds
// the stage so, to run on a newer GPU the path that an sm_75 build takes.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(LADDER_NO_CP_ASYNC)
#define LADDER_HAS_CP_ASYNC 1
#else
#define LADDER_HAS_CP_ASYNC 0
#endif

/// 4-byte asynchronous global -> shared copy (sm_80+); src_valid false writes 0.0f without
/// reading global memory, which is how the zero padding of the input patch is filled. Below
/// sm_80, a plain copy.
__device__ inline void cp_async_f32(float* smem_dst, const float* gmem_src, bool src_valid) {
#if LADDER_HAS_CP_ASYNC
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem_src),
               "r"(src_valid ? 4 : 0)
               : "memory");
#else
  *smem_dst = src_valid ? *gmem_src : 0.0f;
#endif
}
/// Closes this thread's group of copies issued since the last commit.
__device__ inline void cp_async_commit() {
#if LADDER_HAS_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/// Waits until at most `kPending` of this thread's committed copy groups are still in flight.
template <int kPending>
__device__ inline void cp_async_wait() {
#if LADDER_HAS_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

/// 16-byte asynchronous copy global -> shared (both 16-byte aligned).
__device__ inline void cp_async_16(float* smem_dst, const float* gmem_src) {
#if LADDER_HAS_CP_ASYNC
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem_src) : "memory");
#else
  *reinterpret_cast<float4*>(smem_dst) = *reinterpret_cast<const float4*>(gmem_src);
#endif
}

}  // namespace
}  // namespace ladder
