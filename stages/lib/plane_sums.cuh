// The plane-sum workspace and final division that stages 02-05 share: each accumulates one fp32
// sum per (n, co) plane with atomics, then divides by the plane size.
#pragma once

#include "cuda_check.hpp"
#include "stage.hpp"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

// Workspace: the convT output, then (256-byte aligned) one fp32 sum per (n, co) plane. The pool
// phase alone (StageDescriptor::run_pool) needs only the sums: plane_sums_bytes.
size_t plane_sums_offset(const Problem& p) {
  return (size_t(p.out_elems()) * sizeof(float) + 255) / 256 * 256;
}
size_t plane_sums_bytes(const Problem& p) { return size_t(p.pooled_elems()) * sizeof(float); }
size_t conv_and_plane_sums_bytes(const Problem& p) { return plane_sums_offset(p) + plane_sums_bytes(p); }
float* plane_sums(const Problem& p, void* workspace) {
  return reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + plane_sums_offset(p));
}

/// pooled[i] = sums[i] / plane_size for the `planes` = N*Cout plane sums; one thread per plane.
__global__ void divide_by_plane_size(const float* __restrict__ sums, int64_t planes,
                                     int64_t plane_size, float* __restrict__ pooled) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= planes) return;
  pooled[i] = sums[i] / float(plane_size);
}

/// Launches divide_by_plane_size on `stream`; throws CudaError on failure.
void launch_divide_by_plane_size(const Problem& p, const float* sums, float* pooled, cudaStream_t stream) {
  constexpr int kBlock = 256;
  divide_by_plane_size<<<blocks_for(p.pooled_elems(), kBlock, "divide_by_plane_size"), kBlock, 0,
                         stream>>>(sums, p.pooled_elems(), p.out_h() * p.out_w(), pooled);
  CUDA_CHECK_LAUNCH("divide_by_plane_size");
}

}  // namespace
}  // namespace ladder
