// What the weight-multicast rung (21, a draft) adds to common/toolkit/wgmma.cuh and tma.cuh: a
// thread block cluster's rank and barrier, an mbarrier arrival on another block of the cluster,
// and the bulk copy that the copy engine writes into every block of a mask (PTX ISA: "mapa", "barrier.cluster", "mbarrier.arrive", "mbarrier.try_wait",
// "cp.async.bulk" with .multicast::cluster). sm_90a only, like the rest (LADDER_HAS_WGMMA); each
// helper traps elsewhere.
#pragma once

#include <cstdint>

#include "wgmma.cuh"  // LADDER_HAS_WGMMA, smem_addr

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// This block's rank in its cluster (0 .. cluster size - 1).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r = 0;
#if LADDER_HAS_WGMMA
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#else
  __trap();
#endif
  return r;
}

/// Every thread of every block of the cluster arrives, then waits for all (release, then
/// acquire): the mbarriers' initializations before any block uses another's, and at the end no
/// block leaves while another may still write its shared memory or arrive on its barriers.
__device__ __forceinline__ void cluster_sync() {
#if LADDER_HAS_WGMMA
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

/// One arrival on the mbarrier at `bar`'s offset in block `cta` of the cluster (this block's own
/// when cta is its rank), with the instruction's default semantics (release at CTA scope). The
/// consumers' release of a slot publishes no data: it says that their wgmma, waited for, no longer
/// read the slot, which the partner's copy engine may then overwrite. A .release.cluster arrival
/// would cost a GPU-scope memory barrier (MEMBAR.ALL.GPU) per release in nvcc 13.0's code.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
#if LADDER_HAS_WGMMA
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
#else
  __trap();
  (void)bar, (void)cta;
#endif
}

/// A bulk copy global -> shared that the copy engine writes at smem_dst's offset in every block of
/// cta_mask (bit i: rank i), completing `bytes` transaction bytes on the mbarrier at bar's offset
/// in each of them. bytes a multiple of 16, both addresses 16-byte aligned.
__device__ __forceinline__ void bulk_copy_multicast(float* smem_dst, const float* gmem_src, uint32_t bytes,
                                                    uint64_t* bar, uint16_t cta_mask) {
#if LADDER_HAS_WGMMA
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;\n" ::
          "r"(smem_addr(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
#else
  __trap();
  (void)smem_dst, (void)gmem_src, (void)bytes, (void)bar, (void)cta_mask;
#endif
}

}  // namespace
}  // namespace ladder
