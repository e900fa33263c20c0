// Hopper's tensor-map copies and the warp-specialization instructions, as the warp-specialized
// rung (17) uses them: the tiled tensor copy (TMA with a tensor map) completing on an mbarrier,
// the tensor map's prefetch, the register hand-over between warpgroups (setmaxnreg), a plain
// mbarrier arrival (the release of a ring slot), and a named barrier over part of the block.
// Like wgmma.cuh's helpers, each exists only in sm_90a code (LADDER_HAS_WGMMA: setmaxnreg is an
// sm_90a instruction) and traps elsewhere; the host takes another path (wgmma_here()). The host
// half, encoding a tensor map, is tensor_map.hpp.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: nothing here calls the driver)

#include <cstdint>

#include "wgmma.cuh"  // LADDER_HAS_WGMMA, smem_addr, the mbarrier helpers

namespace ladder {
namespace {  // internal linkage: each including program compiles its own copy

/// Fetches the tensor map `map` (a __grid_constant__ kernel parameter) into the copy engine's
/// cache ahead of the first copy that uses it (PTX ISA, "prefetch.tensormap"). A hint: no effect
/// on results.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
#if LADDER_HAS_WGMMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#else
  (void)map;
#endif
}

/// One box of a 5-D tensor, global -> shared, by the copy engine (PTX ISA, "cp.async.bulk.tensor",
/// tiled mode): the box of `map`'s box size whose first element is at coordinates (c0, c1, c2, c3,
/// c4), innermost first, in elements. Coordinates may be negative or past the end: those elements
/// are filled with zeros (the map's out-of-bounds fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), and the
/// whole box, filled elements included, counts as transaction bytes on `bar`. The box lands
/// densely, innermost dimension fastest; `smem_dst` 128-byte aligned.
__device__ __forceinline__ void tma_load_5d(void* smem_dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            int c4, uint64_t* bar) {
#if LADDER_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(smem_addr(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_addr(bar))
      : "memory");
#else
  __trap();
  (void)smem_dst, (void)map, (void)c0, (void)c1, (void)c2, (void)c3, (void)c4, (void)bar;
#endif
}

/// Lowers the registers of every thread of the calling warpgroup to kRegs (PTX ISA, "setmaxnreg"),
/// returning the rest to the block's pool for another warpgroup's setmaxnreg_inc. All 128 threads
/// of the warpgroup execute it together. kRegs: a multiple of 8 in [24, 256]. Takes effect only in
/// a kernel with a register cap at entry (__launch_bounds__(threads, 1)); ptxas says when it
/// ignores it (warning C7508).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
#if LADDER_HAS_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

/// Raises the registers of every thread of the calling warpgroup to kRegs, waiting until the pool
/// holds them (another warpgroup's setmaxnreg_dec). Same rules as setmaxnreg_dec; the block's
/// total after every change must fit what it was launched with.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
#if LADDER_HAS_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
#endif
}

/// One arrival on `bar`, no transaction bytes (PTX ISA, "mbarrier.arrive"): release semantics, so
/// the caller's earlier reads of what the barrier guards are done before a waiter on the phase
/// proceeds. The consumers' release of a ring slot to the producer.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if LADDER_HAS_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#else
  __trap();
  (void)bar;
#endif
}

/// Named barrier kId over kCount threads (whole warps) of the block (PTX ISA, "bar.sync"): the
/// threads that must meet, and no others; barrier 0 is __syncthreads'.
template <int kId, int kCount>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(kId > 0 && kId < 16 && kCount % 32 == 0, "named barrier: id 1..15, whole warps");
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kCount) : "memory");
}

/// Pins the value of `v` at this point of the program: the compiler may not move reads or writes
/// of it across the call (an empty asm that "uses and redefines" the register). Keeps the reads of
/// wgmma accumulators after the wgmma_wait that covers them.
__device__ __forceinline__ void pin_register(float& v) { asm volatile("" : "+f"(v)::"memory"); }

}  // namespace
}  // namespace ladder
