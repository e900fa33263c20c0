// A test-only GPU "stage" whose kernel writes through an invalid pointer: the CUDA context is
// lost (cudaErrorIllegalAddress, a sticky error). tests/sticky/check_sticky.sh runs it before a
// real stage in one program and checks that the ladder names this stage and does not run the
// next one. Never part of the ladder.
#include <cstdint>

#include "cuda_check.hpp"
#include "lib/register_stage.hpp"

namespace ladder {
namespace {

/// Writes to an address no allocation covers. volatile: the store cannot be optimized away.
__global__ void write_to_invalid_address(float* pooled) {
  volatile float* bad = reinterpret_cast<volatile float*>(uintptr_t(0x10));
  *bad = 1.0f;
  pooled[threadIdx.x] = 0.0f;  // not reached in practice; keeps pooled "written" for the compiler
}

void run(const GpuStageArgs& a) {
  a.marks.begin(Phase::Fused);
  write_to_invalid_address<<<1, 1, 0, a.stream>>>(a.pooled);
  CUDA_CHECK_LAUNCH("write_to_invalid_address");
}

size_t workspace_bytes(const Problem&) { return 0; }

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "test only: a kernel that writes to an invalid address (a sticky CUDA error)";
  d.workspace_bytes = workspace_bytes;
  d.run_gpu = run;
}

}  // namespace ladder
