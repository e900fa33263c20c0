// The TF32 tensor-core instruction every mma.sync rung uses (the main ladder's stages 10-14 and the
// tracks' tensor-core rungs): the m16n8k8 mma itself, cvt.rna's rounding, and the host's question
// whether a kernel's code here has them (sm_80+). Internal linkage, as LADDER_NO_TF32_MMA (a test
// build that takes the general path) is decided per translation unit.
#pragma once

#include <cstdint>
#include <string>

#include "cuda_check.hpp"

namespace ladder {
namespace {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define LADDER_HAS_TF32_MMA 1
#else
#define LADDER_HAS_TF32_MMA 0
#endif

/// d += a * b on tensor cores, one warp: a 16x8 TF32 tile (row-major fragment, 4 registers),
/// b 8x8 TF32 (column-major fragment, 2 registers), d 16x8 FP32 (4 registers). Fragment
/// layout (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32), g = lane / 4, t = lane % 4:
///   a0 (row g, col t)   a1 (g+8, t)    a2 (g, t+4)    a3 (g+8, t+4)
///   b0 (row t, col g)   b1 (t+4, g)
///   d0 (row g, col 2t)  d1 (g, 2t+1)   d2 (g+8, 2t)   d3 (g+8, 2t+1)
__device__ inline void mma_tf32(float (&d)[4], const uint2& a_lo, const uint2& a_hi, const uint2& b) {
#if LADDER_HAS_TF32_MMA
  // a_lo = (a0, a2), a_hi = (a1, a3), b = (b0, b1): the order the shared layout delivers them
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a_lo.x), "r"(a_hi.x), "r"(a_lo.y), "r"(a_hi.y), "r"(b.x), "r"(b.y));
#else
  __trap();  // hosts check tf32_mma_in before launching a kernel that reaches here
  (void)d, (void)a_lo, (void)a_hi, (void)b;
#endif
}

/// x rounded to TF32, to nearest with ties away from zero (cvt.rna; PTX ISA, "cvt"), as the 32-bit
/// register an mma operand takes: x's FP32 encoding with the low 13 mantissa bits zero. Below
/// sm_80, x unchanged (no tensor core runs there). common/toolkit/tf32.hpp emulates it.
__device__ inline uint32_t tf32_bits(float x) {
#if LADDER_HAS_TF32_MMA
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  return __float_as_uint(x);
#endif
}

/// Whether `kernel`'s code on this device has TF32 mma: it was compiled for compute_80 or newer
/// (the kernel's ptxVersion, so a newer GPU running PTX JIT-compiled from an older architecture
/// counts as old). Built with LADDER_NO_TF32_MMA (a test), false: the path an sm_75 build takes,
/// on any GPU. Throws CudaError.
template <typename Kernel>
bool tf32_mma_in(Kernel kernel) {
#ifdef LADDER_NO_TF32_MMA
  (void)kernel;
  return false;
#else
  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  return attr.ptxVersion >= 80;
#endif
}

/// What a tensor-core stage says when its kernel has no TF32 mma here (`what`: the stage's
/// arithmetic, e.g. "TF32 mma"): every problem then takes the general FP32 path.
inline std::string no_tf32_mma_note(const char* what) {
#ifdef LADDER_NO_TF32_MMA
  (void)what;
  return "built with LADDER_NO_TF32_MMA: every problem takes the general FP32 path";
#else
  return std::string(what) + " needs code for sm_80 or newer: every problem takes the general FP32 path";
#endif
}

}  // namespace
}  // namespace ladder
