// ldmatrix for 32-bit (TF32) fragments, for the draft of stage 20. ldmatrix moves 8x8 matrices
// of 16-bit elements from shared memory into registers; a matrix row is 16 contiguous bytes whose
// address one lane supplies. Read as 32-bit words, a row is 4 words, and the two 16-bit elements
// a lane receives from it (2*(lane%4) and 2*(lane%4)+1 of row lane/4, lower half first) are
// exactly word lane%4 of the row, bit for bit. So for 32-bit data one m8n8 matrix is an 8 x 4
// block of words, and lane (g, t) = (lane/4, lane%4) receives word t of row g: the position of
// element (row g, k t) in the TF32 fragments of mma.m16n8k8. (The .trans form would swap 16-bit
// halves between lanes and split every 32-bit value; it is of no use for TF32.)
#pragma once

#include <cstdint>

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// ldmatrix.sync.aligned.m8n8.x4.shared.b16: four 8x8 b16 matrices, one warp, all 32 lanes.
/// Lane l passes the address of row l % 8 of matrix l / 8 (shared memory, 16-byte aligned);
/// register i of the result holds, for lane (g, t), 32-bit word t of row g of matrix i.
/// sm_75 and newer; the kernels that call it run only where TF32 mma exists (sm_80+), and below
/// sm_75 the call traps, as mma_tf32 does below sm_80.
__device__ inline uint4 ldmatrix_x4(const float* smem_row) {
  uint4 r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem_row));
  // volatile, as the mma and cp.async wrappers: the compiler keeps it between the step's barrier
  // and the next one, in program order with the other volatile asm.
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "r"(addr));
#else
  __trap();
  (void)smem_row;
  r = uint4{0, 0, 0, 0};
#endif
  return r;
}

}  // namespace
}  // namespace ladder
