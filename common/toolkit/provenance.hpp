// Where a set of results came from: the source revision, the toolchain, the driver, the host
// and the date, recorded next to every ladder result (table header and JSON).
#pragma once

#include <string>

namespace ladder {

struct Provenance {
  std::string git_commit = "unknown";  ///< full hash of HEAD, or "unknown" (no git, no .git)
  std::string git_dirty = "unknown";   ///< "yes" if tracked files differ from HEAD, "no", or "unknown"
  std::string nvcc_version;            ///< CUDA compiler that built the kernels, "13.0.88"
  std::string cuda_runtime_version;    ///< cudaRuntimeGetVersion, "13.0"
  std::string driver_cuda_version;     ///< cudaDriverGetVersion: newest CUDA the driver supports; "none" without a driver
  std::string driver_release;          ///< from /proc/driver/nvidia/version, "580.65.06", or "unknown"
  std::string host_cpu;                ///< "model name" of /proc/cpuinfo, or "unknown"
  std::string date_utc;                ///< ISO 8601, "2025-01-31T12:00:00Z"
};

/// Collects the provenance of this run. `nvcc_version` comes from a file nvcc compiled (see
/// ladder/gpu_session.hpp). The commit is, in order: the macro LADDER_GIT_COMMIT if the build
/// defines it; the environment variables LADDER_GIT_COMMIT (and LADDER_GIT_DIRTY, yes/no), for
/// runs from a copy of the tree without .git; else `git rev-parse HEAD` and `git status` in the
/// source tree this file was compiled from, at run time. Never throws.
Provenance collect_provenance(const std::string& nvcc_version);

/// The driver release (e.g. "580.65.06") from the text of /proc/driver/nvidia/version, or "".
std::string nvidia_driver_release(const std::string& proc_version_text);

/// "13.0" from CUDA's integer version 13000.
std::string cuda_version_string(int version);

}  // namespace ladder
