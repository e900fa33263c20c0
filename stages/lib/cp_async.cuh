// cp.async, the asynchronous global -> shared copy of sm_80 and newer (PTX ISA, "cp.async"),
// the idea of stage 09 and the copies of the tensor-core stages: 4- and 16-byte copies (the latter
// also zero-filling), commit and wait (also with a run-time count), and the alignment arithmetic
// of a patch row copied 16 bytes at a time. Below sm_80, or built with LADDER_NO_CP_ASYNC (a test
// runs the sm_75 path on a newer GPU), each copy is a plain synchronous one and commit and wait do
// nothing.
#pragma once

#include <cstdint>

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

/// 16-byte asynchronous copy global -> shared that writes zeros instead when `valid` is false
/// (src-size 0: nothing is read). Below sm_80, a plain copy.
__device__ inline void cp_async_16_or_zero(float* smem_dst, const float* gmem_src, bool valid) {
#if LADDER_HAS_CP_ASYNC
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(valid ? 16 : 0)
               : "memory");
#else
  *reinterpret_cast<float4*>(smem_dst) = valid ? *reinterpret_cast<const float4*>(gmem_src) : float4{};
#endif
}

/// Waits until at most `pending` (0, 1 or 2, the same in every thread) of this thread's copy groups are
/// in flight: cp.async.wait_group takes an immediate, so one branch per count.
__device__ inline void cp_async_wait_dynamic(int pending) {
  if (pending >= 2) cp_async_wait<2>();
  else if (pending == 1) cp_async_wait<1>();
  else cp_async_wait<0>();
}

/// A patch row copied 16 bytes at a time from a row of x that starts 16-byte aligned: the patch's
/// first column, tile_col0 + padding_w - (kernel_w - 1) with tile_col0 a multiple of 4, lies
/// `shift` columns (0..3) past an aligned column, and its tile_cols + kernel_w - 1 columns then
/// take `vectors` 16-byte vectors from that aligned column on. Host code: the plans of the rungs
/// that copy x this way (14, 15).
struct AlignedPatchRow {
  int shift;
  int vectors;
};
inline AlignedPatchRow aligned_patch_row(int64_t padding_w, int64_t kernel_w, int64_t tile_cols) {
  const int64_t shift = ((padding_w - (kernel_w - 1)) % 4 + 4) % 4;
  return {int(shift), int((shift + tile_cols + kernel_w - 1 + 3) / 4)};
}

}  // namespace
}  // namespace ladder
