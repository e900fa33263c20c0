// What the ladder program holds in host memory for a problem (toolkit/host_memory.hpp checks it).
#pragma once

#include "host_memory.hpp"
#include "problem.hpp"

namespace ladder {

/// What `ladder` holds in host memory at its peak for problem `p`: the inputs (x, weight,
/// conv_bias, bias, fp32), the fp64 oracle (per-plane tap sums R, pooled, y, magnitudes), its
/// tolerances, `stages` stages' outputs (pooled and y as double, plus the fp32 copy each is read
/// back or dumped through), and, when `literal_cpu_stage` is set, stage 00's fp64 convT output.
/// GPU memory is not counted here: DeviceBuffer checks it before every allocation.
HostMemoryNeed ladder_host_memory_need(const Problem& p, int stages, bool literal_cpu_stage);

}  // namespace ladder
