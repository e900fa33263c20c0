// The floor every stage is measured against: one streaming read of x, written to run at the
// DRAM's own pace. Several independent 16-byte loads per thread are in flight at once, enough
// blocks fill every SM, and a grid-stride loop walks x in chunks. ladder/floor_sweep.cu tunes the
// launch (results/floor_sweep_h200.txt); GpuSession::time_streaming_read times the tuned one.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"

namespace ladder {

/// How a streaming read is launched.
struct StreamingReadConfig {
  int loads_in_flight = 4;  ///< independent 16-byte loads per thread per loop trip: 1, 2, 4 or 8
  int block = 256;          ///< threads per block
  /// grid = SMs x blocks_per_sm; 0: as many blocks as are resident on an SM at once
  /// (cudaOccupancyMaxActiveBlocksPerMultiprocessor); -1: enough blocks that every thread makes
  /// one loop trip (grid covers x).
  int blocks_per_sm = 0;
  bool evict_first = false;  ///< __ldcs (cache-streaming, evict-first) instead of plain loads
};

/// The launch the ladder uses: 2 loads in flight, 1024 threads, a grid that covers x, plain loads.
/// On an H200 (results/floor_sweep_h200.txt) it had the fastest median with the ladder's memset
/// flush (0.2432 ms, 4,415 GB/s) and was within 0.3% of the fastest with a clean flush (0.2347 ms).
/// With 2 or more loads in flight and the best grid for each block size, the configurations were
/// within 1% of each other (some grids were up to 7% slower); one wave of resident blocks was
/// 2-3% slower, and evict-first loads 5% slower after the memset flush.
inline constexpr StreamingReadConfig kStreamingReadTuned{2, 1024, -1, false};

/// Reads x once and sums it per thread. x4: n4 float4s (x must be 16-byte aligned); tail: the
/// n % 4 floats past them, read by block 0. Each loop trip a thread issues kLoads loads a grid
/// apart, all before their first use, so kLoads are in flight per thread and every warp-wide load
/// covers 512 contiguous bytes. The sum is stored to *sink only if it equals `never` (the caller
/// passes NaN: no float compares equal to it, but the compiler cannot know that), so the loads
/// cannot be dropped and nothing is written.
/// Why the launch bounds and `unroll 1`: without a register budget ptxas keeps only about 3 of
/// 8 float4 loads in flight (it reuses their registers), and it unrolls the kLoads = 1 loop 4x on
/// its own; either would make kLoads mean something other than what the SASS does. Block sizes up
/// to 1024 get 64 registers, enough for 8 loads (kLoads = 8 uses 46).
template <int kLoads, bool kEvictFirst>
__global__ void __launch_bounds__(1024, 1) streaming_read_kernel(const float4* __restrict__ x4, int64_t n4, const float* __restrict__ tail,
                                      int tail_n, float never, float* __restrict__ sink) {
  const int64_t threads = int64_t(gridDim.x) * blockDim.x;
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  auto load = [&](int64_t j) { return kEvictFirst ? __ldcs(x4 + j) : x4[j]; };
#pragma unroll 1
  for (; i + (kLoads - 1) * threads < n4; i += kLoads * threads) {
    float4 v[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) v[k] = load(i + k * threads);
#pragma unroll
    for (int k = 0; k < kLoads; ++k) acc += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
#pragma unroll 1
  for (; i < n4; i += threads) {  // the last, partial chunk: fewer than kLoads loads per thread
    const float4 v = load(i);
    acc += (v.x + v.y) + (v.z + v.w);
  }
  if (blockIdx.x == 0 && int(threadIdx.x) < tail_n) acc += tail[threadIdx.x];
  if (acc == never) *sink = acc;
}

/// A streaming read planned for one size on the current device; call it to enqueue one read.
struct StreamingReadLaunch {
  void (*kernel)(const float4*, int64_t, const float*, int, float, float*) = nullptr;
  unsigned grid = 0;
  int block = 0;
  int resident_blocks_per_sm = 0;  ///< the occupancy limit of this kernel at this block size

  /// Enqueues one read of x[0..n) (n as planned) on `stream`. sink: one device float, never
  /// written in practice. Throws std::invalid_argument if x is not 16-byte aligned, CudaError if
  /// the launch fails.
  void operator()(const float* x, int64_t n, float* sink, cudaStream_t stream) const {
    if (reinterpret_cast<uintptr_t>(x) % 16 != 0)
      throw std::invalid_argument("streaming read: x must be 16-byte aligned for float4 loads");
    const int64_t n4 = n / 4;
    kernel<<<grid, block, 0, stream>>>(reinterpret_cast<const float4*>(x), n4, x + 4 * n4, int(n - 4 * n4),
                                       std::numeric_limits<float>::quiet_NaN(), sink);
    CUDA_CHECK_LAUNCH("streaming_read_kernel");
  }
};

/// Plans a streaming read of n floats with `cfg` on the current device: picks the kernel and
/// sizes the grid (never more blocks than it takes to give every thread one loop trip). Throws
/// std::invalid_argument for loads_in_flight other than 1, 2, 4, 8, a block size that is not a
/// positive multiple of 32 up to 1024, or blocks_per_sm below -1.
inline StreamingReadLaunch plan_streaming_read(int64_t n, const StreamingReadConfig& cfg = kStreamingReadTuned) {
  if (cfg.block <= 0 || cfg.block > 1024 || cfg.block % 32 != 0)
    throw std::invalid_argument("streaming read: block size " + std::to_string(cfg.block) +
                                " is not a multiple of 32 in [32, 1024]");
  if (cfg.blocks_per_sm < -1)
    throw std::invalid_argument("streaming read: blocks_per_sm " + std::to_string(cfg.blocks_per_sm) +
                                " (use >= 1, 0 for the resident maximum, -1 to cover x)");
  StreamingReadLaunch l;
  const bool ef = cfg.evict_first;
  switch (cfg.loads_in_flight) {
    case 1: l.kernel = ef ? streaming_read_kernel<1, true> : streaming_read_kernel<1, false>; break;
    case 2: l.kernel = ef ? streaming_read_kernel<2, true> : streaming_read_kernel<2, false>; break;
    case 4: l.kernel = ef ? streaming_read_kernel<4, true> : streaming_read_kernel<4, false>; break;
    case 8: l.kernel = ef ? streaming_read_kernel<8, true> : streaming_read_kernel<8, false>; break;
    default:
      throw std::invalid_argument("streaming read: loads_in_flight " + std::to_string(cfg.loads_in_flight) +
                                  " (supported: 1, 2, 4, 8)");
  }
  int dev = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&l.resident_blocks_per_sm, l.kernel, cfg.block, 0));
  l.block = cfg.block;
  const int64_t per_block = int64_t(cfg.loads_in_flight) * cfg.block;  // float4s one block reads per trip
  const int64_t cover = std::max<int64_t>(1, (n / 4 + per_block - 1) / per_block);
  const int64_t per_sm = cfg.blocks_per_sm == 0 ? l.resident_blocks_per_sm : cfg.blocks_per_sm;
  if (per_sm == 0) throw std::invalid_argument("streaming read: no block of " + std::to_string(cfg.block) +
                                               " threads fits on an SM");
  const int64_t grid = cfg.blocks_per_sm == -1 ? cover : std::min<int64_t>(cover, int64_t(sms) * per_sm);
  if (grid > int64_t(std::numeric_limits<int>::max()))
    throw std::invalid_argument("streaming read: " + std::to_string(n) + " floats need more blocks than a grid holds");
  l.grid = unsigned(grid);
  return l;
}

}  // namespace ladder
