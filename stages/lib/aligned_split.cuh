// The 16-byte head/body/tail split that the float4-loading stages share: a range of floats that
// starts anywhere is read as a few scalars up to the first 16-byte boundary, aligned float4s,
// and a few scalars after the last whole float4. Stage 05 splits its planes with it; stages 12
// and 13 sum chunks of x through chunk_sum.cuh.
#pragma once

#include <cstdint>

namespace ladder {
// Internal linkage, as for the conv kernel: each including stage compiles its own copy.
namespace {

/// Splits `len` floats starting at address `addr` into a scalar head up to the next 16-byte
/// boundary, a body of float4s, and a scalar tail (< 4 floats). Planes start anywhere when
/// H*W % 4 != 0, so alignment is taken from the address, not assumed.
struct ChunkSplit {
  int head, body4, tail_begin;
};
__host__ __device__ inline ChunkSplit split_chunk(uintptr_t addr, int len) {
  const int misaligned = int((addr >> 2) & 3);  // floats past the last 16-byte boundary
  int head = (4 - misaligned) & 3;
  head = head < len ? head : len;
  const int body4 = (len - head) / 4;
  return {head, body4, head + 4 * body4};
}

}  // namespace
}  // namespace ladder
