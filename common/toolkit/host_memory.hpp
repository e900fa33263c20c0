// Host memory: what this process may still allocate, and a need (named parts) checked against
// it, so that a run too large for the machine stops with a message instead of the OOM killer.
// What a problem needs is the model's (host_memory_need.hpp).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ladder {

/// What the kernel says this process may still allocate. Bytes; -1 where unknown.
struct HostMemory {
  double available = -1;     ///< MemAvailable of /proc/meminfo (free + reclaimable)
  double cgroup_limit = -1;  ///< tightest memory limit of this process's cgroup or an ancestor
  double cgroup_usage = -1;  ///< current usage of the cgroup that has that limit
  std::string cgroup_file;   ///< the limit file read (memory.max or memory.limit_in_bytes)

  /// The smaller of `available` and cgroup_limit - cgroup_usage, over those known;
  /// +infinity if neither is.
  double usable() const;
  /// "MemAvailable 22.68 GB in /proc/meminfo; cgroup limit 16.00 GB in FILE, 2.74 GB of it in use".
  std::string describe() const;
};

/// Reads /proc/meminfo and the memory cgroup of this process (v2: memory.max and memory.current;
/// v1: memory.limit_in_bytes and memory.usage_in_bytes), walking from the process's cgroup up to
/// the root of the mount. Never throws: what cannot be read stays -1.
HostMemory probe_host_memory();

/// MemAvailable in bytes from the text of /proc/meminfo, or -1 if absent.
double meminfo_available_bytes(const std::string& meminfo);
/// A cgroup limit file's value in bytes, or -1 for no limit ("max", v1's near-2^63 value, empty).
double cgroup_limit_bytes(const std::string& text);

/// One named part of the ladder's host memory, in bytes.
struct HostMemoryItem {
  std::string what;
  double bytes = 0;
};

/// The ladder's host memory for one problem, largest parts first.
struct HostMemoryNeed {
  std::vector<HostMemoryItem> items;
  double total() const;
  /// "x 51.54 GB, the fp64 oracle 12.89 GB, ..." (every part of at least 1% of the total).
  std::string describe() const;
};

/// Thrown when a run needs more host memory than the machine has.
class HostMemoryError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws HostMemoryError("ladder needs 64.40 GB of host memory (x 51.54 GB, ...) but this
/// machine has 23.10 GB available (MemAvailable ...)") if need.total() exceeds have.usable().
void check_host_memory(const HostMemoryNeed& need, const HostMemory& have);

}  // namespace ladder
