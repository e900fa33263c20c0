// Encoding a tensor map (the descriptor the copy engine's tiled tensor copies read; the device
// half is tma.cuh) on the host, with errors that name the parameter at fault. The driver function
// cuTensorMapEncodeTiled is reached through the runtime's lookup of driver entry points (the
// versioned one from CUDA 12.5 on, the unversioned one before) in tensor_map.cpp, so nothing
// links libcuda directly and no stage's object imports the lookup; the driver's bare
// CUDA_ERROR_INVALID_VALUE is preceded by checks of each documented requirement, each with its own
// message.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>
#include <string>

namespace ladder {

/// A tiled tensor map of fp32 elements: up to 5 dimensions, innermost first. Sizes in elements,
/// strides in bytes (stride[i] between consecutive indices of dimension i + 1; dimension 0 is
/// contiguous), the box in elements. No interleave, no swizzle, out-of-bounds elements read as
/// zeros.
struct TensorMapF32 {
  const void* base = nullptr;  ///< global address of element (0, ..., 0)
  int rank = 0;                ///< 1..5
  uint64_t size[5] = {};       ///< elements per dimension, 1 .. 2^32
  uint64_t stride[4] = {};     ///< bytes, dimensions 1 .. rank-1: multiples of 16, < 2^40
  uint32_t box[5] = {};        ///< box elements per dimension, 1 .. 256; box[0] * 4 a multiple of 16
};

/// Why `m` cannot be encoded (the first unmet requirement, naming the parameter), or "" when it
/// meets every requirement the driver documents for cuTensorMapEncodeTiled. Host-only, no CUDA
/// call: the checks a test can run without a GPU.
inline std::string tensor_map_problem(const TensorMapF32& m) {
  auto at = [](const char* what, int i) { return std::string(what) + "[" + std::to_string(i) + "]"; };
  if (m.rank < 1 || m.rank > 5) return "rank " + std::to_string(m.rank) + " is not 1..5";
  if (reinterpret_cast<uintptr_t>(m.base) % 16 != 0) return "the base address is not 16-byte aligned";
  for (int i = 0; i < m.rank; ++i) {
    if (m.size[i] < 1 || m.size[i] > (uint64_t(1) << 32))
      return at("size", i) + " = " + std::to_string(m.size[i]) + " is not in 1 .. 2^32";
    if (m.box[i] < 1 || m.box[i] > 256) return at("box", i) + " = " + std::to_string(m.box[i]) + " is not in 1 .. 256";
  }
  if (m.box[0] * sizeof(float) % 16 != 0)
    return "box[0] = " + std::to_string(m.box[0]) + " elements is " + std::to_string(m.box[0] * sizeof(float)) +
           " bytes, not a multiple of 16";
  for (int i = 0; i + 1 < m.rank; ++i) {
    if (m.stride[i] % 16 != 0)
      return at("stride", i) + " = " + std::to_string(m.stride[i]) + " bytes (dimension " + std::to_string(i + 1) +
             ") is not a multiple of 16";
    if (m.stride[i] >= (uint64_t(1) << 40))
      return at("stride", i) + " = " + std::to_string(m.stride[i]) + " bytes is not below 2^40";
  }
  return "";
}

/// The parameters of `m`, for an error message.
inline std::string describe_tensor_map(const TensorMapF32& m) {
  std::string s = "rank " + std::to_string(m.rank) + ", size (";
  for (int i = 0; i < m.rank; ++i) s += (i ? ", " : "") + std::to_string(m.size[i]);
  s += "), strides (";
  for (int i = 0; i + 1 < m.rank; ++i) s += (i ? ", " : "") + std::to_string(m.stride[i]);
  s += ") bytes, box (";
  for (int i = 0; i < m.rank; ++i) s += (i ? ", " : "") + std::to_string(m.box[i]);
  return s + ")";
}

/// Encodes `m` for the copy engine. `what` names the tensor in errors. Throws std::invalid_argument
/// naming the parameter when `m` breaks a documented requirement (tensor_map_problem), CudaError
/// when the runtime cannot reach the driver's encoder (a driver older than CUDA 12.0) or the
/// encoder refuses `m` (the message lists every parameter). Compiled in the course library
/// (tensor_map.cpp), not inline: the driver entry point lookup stays out of the stages' objects,
/// whose imports the grader's integrity check limits (grader/integrity.py, rule 4 refuses a
/// rung's own lookup of a driver entry point; LIBRARY_ALLOWED lists this function).
CUtensorMap encode_tensor_map_f32(const TensorMapF32& m, const char* what);

}  // namespace ladder
