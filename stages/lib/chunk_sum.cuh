// A thread's share of the sum of a float range read with 16-byte loads, several in flight: stage
// 05's loads as a function, for the chunks of x that stages 12 and 13 sum. A region of rung 12,
// the first stage that calls it.
#pragma once

#include <cstdint>

#include "lib/aligned_split.cuh"
#include "todo.cuh"

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

/// This thread's share of the sum of src[0, len) when a block of kBlockThreads threads reads it:
/// 16-byte loads for the aligned body, kUnroll of them issued before any is used (whole tiles),
/// then the rest one at a time; head and tail (< 4 floats each) by the first threads. The
/// whole-tile loop has no predicates, so the compiler keeps all kUnroll loads in flight instead
/// of consuming each one before the next. Read-only data (__ldg).
template <int kBlockThreads, int kUnroll>
__device__ inline float chunk_partial_sum(const float* __restrict__ src, int len) {
  // BEGIN SOLUTION 12
  // STUB: ladder_todo("12.4", "chunk_partial_sum: this thread's share of src[0, len), the body in float4s");
  // STUB: ladder_unused(src);
  // STUB: return 0.0f * float(len);
  const ChunkSplit s = split_chunk(reinterpret_cast<uintptr_t>(src), len);
  float acc = 0.0f;
  if (int(threadIdx.x) < s.head) acc += __ldg(src + threadIdx.x);
  if (int(threadIdx.x) < len - s.tail_begin) acc += __ldg(src + s.tail_begin + threadIdx.x);
  const float4* body = reinterpret_cast<const float4*>(src + s.head);
  int i = threadIdx.x;
  for (; i + (kUnroll - 1) * kBlockThreads < s.body4; i += kUnroll * kBlockThreads) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(body + i + u * kBlockThreads);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  for (; i < s.body4; i += kBlockThreads) {
    const float4 v = __ldg(body + i);
    acc += (v.x + v.y) + (v.z + v.w);
  }
  return acc;
  // END SOLUTION
}

}  // namespace
}  // namespace ladder
