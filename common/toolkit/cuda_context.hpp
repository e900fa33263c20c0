// Whether the CUDA context survived an error. Some errors are "sticky": after an illegal
// address, a misaligned access, a device-side assert or a kernel that crashed, every later
// CUDA call in this process returns the same error, so nothing more can run on the GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace ladder {

/// True for the errors CUDA documents as leaving the context unusable ("the process must be
/// terminated and relaunched"): illegal address, launch timeout, device assert, hardware stack
/// error, illegal instruction, misaligned address, invalid address space, invalid PC, launch
/// failure, uncorrectable ECC error.
bool is_sticky_cuda_error(cudaError_t code);

/// The sticky error the current context is in, or cudaSuccess if it still works. Clears a
/// pending non-sticky error (cudaGetLastError), then synchronizes the device: a context in a
/// sticky state returns its error from every call. Never throws.
cudaError_t sticky_cuda_error();

/// "cudaErrorIllegalAddress (an illegal memory access was encountered)".
std::string cuda_error_text(cudaError_t code);

}  // namespace ladder
