#include "host_memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "device.hpp"

namespace ladder {

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The cgroup path of this process for one hierarchy: v2's "0::/path" line (controller "") or
// the v1 line whose controller list contains "memory".
std::string cgroup_path(const std::string& proc_self_cgroup, bool v2) {
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    bool match = v2 ? controllers.empty() : false;
    if (!v2) {
      std::istringstream list(controllers);
      for (std::string c; std::getline(list, c, ',');) match |= c == "memory";
    }
    if (match) return line.substr(b + 1);
  }
  return {};
}

// Walks from the process's cgroup directory up to `root`, keeping the level with the least
// room left (limit - usage): a parent's limit binds its children too.
void tightest_cgroup(HostMemory& m, const std::filesystem::path& root, const std::string& rel,
                     const char* limit_name, const char* usage_name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  fs::path dir = root / fs::path(rel).relative_path();
  if (!fs::is_directory(dir, ec)) dir = root;  // a namespaced path that the mount does not show
  for (;;) {
    const double limit = cgroup_limit_bytes(read_text(dir / limit_name));
    if (limit >= 0) {
      const std::string usage_text = read_text(dir / usage_name);
      const double usage = usage_text.empty() ? 0.0 : std::strtod(usage_text.c_str(), nullptr);
      if (m.cgroup_limit < 0 || limit - usage < m.cgroup_limit - m.cgroup_usage) {
        m.cgroup_limit = limit;
        m.cgroup_usage = usage;
        m.cgroup_file = (dir / limit_name).string();
      }
    }
    if (dir == root || !dir.has_parent_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
}

}  // namespace

double meminfo_available_bytes(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    double value = -1;
    std::string unit;
    if (!(fields >> value) || value < 0) return -1;
    fields >> unit;
    return unit == "kB" ? value * 1024.0 : value;
  }
  return -1;
}

double cgroup_limit_bytes(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos || text.compare(first, 3, "max") == 0) return -1;
  char* end = nullptr;
  const double v = std::strtod(text.c_str() + first, &end);
  if (end == text.c_str() + first || v < 0) return -1;
  // cgroup v1 writes "no limit" as the largest page-aligned int64 (9223372036854771712).
  return v >= 4.0e18 ? -1 : v;
}

double HostMemory::usable() const {
  double u = std::numeric_limits<double>::infinity();
  if (available >= 0) u = std::min(u, available);
  if (cgroup_limit >= 0) u = std::min(u, std::max(0.0, cgroup_limit - cgroup_usage));
  return u;
}

std::string HostMemory::describe() const {
  std::string s;
  if (available >= 0) s = "MemAvailable " + format_bytes(available) + " in /proc/meminfo";
  if (cgroup_limit >= 0) {
    if (!s.empty()) s += "; ";
    s += "cgroup limit " + format_bytes(cgroup_limit) + " in " + cgroup_file + ", " +
         format_bytes(cgroup_usage) + " of it in use";
  }
  return s.empty() ? "no limit known (/proc/meminfo and the memory cgroup are unreadable)" : s;
}

HostMemory probe_host_memory() {
  HostMemory m;
  m.available = meminfo_available_bytes(read_text("/proc/meminfo"));
  const std::string self = read_text("/proc/self/cgroup");
  tightest_cgroup(m, "/sys/fs/cgroup", cgroup_path(self, true), "memory.max", "memory.current");
  tightest_cgroup(m, "/sys/fs/cgroup/memory", cgroup_path(self, false), "memory.limit_in_bytes",
                  "memory.usage_in_bytes");
  return m;
}

double HostMemoryNeed::total() const {
  double t = 0;
  for (const HostMemoryItem& i : items) t += i.bytes;
  return t;
}

std::string HostMemoryNeed::describe() const {
  const double t = total();
  std::string s;
  for (const HostMemoryItem& i : items) {
    if (i.bytes < 0.01 * t) continue;
    s += (s.empty() ? "" : ", ") + i.what + " " + format_bytes(i.bytes);
  }
  return s;
}

void check_host_memory(const HostMemoryNeed& need, const HostMemory& have) {
  const double usable = have.usable();
  if (!(need.total() > usable)) return;
  throw HostMemoryError("ladder needs " + format_bytes(need.total()) + " of host memory (" + need.describe() +
                        ") but this machine has " + format_bytes(usable) + " available (" + have.describe() +
                        "); reduce --batch or the input size");
}

}  // namespace ladder
