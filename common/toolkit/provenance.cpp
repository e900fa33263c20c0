#include "provenance.hpp"

#if defined(__has_include)
#if __has_include("ladder_git_stamp.hpp")
#include "ladder_git_stamp.hpp"  // build/generated, cmake/GitStamp.cmake
#define LADDER_HAVE_GIT_STAMP 1
#endif
#endif

#include <cuda_runtime_api.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace ladder {

namespace {

// stdout of `command` (stderr discarded), trailing whitespace removed; nullopt if it fails.
std::optional<std::string> run_command(const std::string& command) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return std::nullopt;
  std::string out;
  std::array<char, 256> buf{};
  while (std::fgets(buf.data(), int(buf.size()), pipe)) out += buf.data();
  if (pclose(pipe) != 0) return std::nullopt;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string first_line_field(const char* path, const std::string& key) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return {};
}

/// The commit the binary was built from, in this order: LADDER_GIT_COMMIT / LADDER_GIT_DIRTY in
/// the environment (for a copy of the tree without .git, such as a remote GPU machine); the
/// build-time stamp (cmake/GitStamp.cmake, rewritten at every build); the source tree's git
/// at run time (builds without the stamp, such as the PyTorch extension); else "unknown".
void git_state(Provenance& p) {
  if (const char* env = std::getenv("LADDER_GIT_COMMIT"); env && *env) {
    p.git_commit = env;
    if (const char* dirty = std::getenv("LADDER_GIT_DIRTY"); dirty && *dirty) p.git_dirty = dirty;
    return;
  }
#if defined(LADDER_HAVE_GIT_STAMP)
  if (std::string(LADDER_BUILD_GIT_COMMIT) != "unknown") {
    p.git_commit = LADDER_BUILD_GIT_COMMIT;
    p.git_dirty = LADDER_BUILD_GIT_DIRTY;
    return;
  }
#endif
  // This file is common/toolkit/provenance.cpp; its compile-time path names the source tree.
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::path(__FILE__).parent_path().parent_path();
  if (!std::filesystem::exists(root / ".git", ec)) return;  // a tarball, or a copy elsewhere
  const std::string git = "git -C " + shell_quote(root.string());
  const std::optional<std::string> head = run_command(git + " rev-parse HEAD");
  if (!head || head->size() != 40) return;
  p.git_commit = *head;
  // Tracked files only: untracked scratch files do not change what was built.
  if (const auto status = run_command(git + " status --porcelain --untracked-files=no"))
    p.git_dirty = status->empty() ? "no" : "yes";
}

}  // namespace

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string nvidia_driver_release(const std::string& text) {
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul 27 ..." (or "Open
  // Kernel Module for x86_64"): the first token of digits and dots with at least one dot.
  std::istringstream first(text.substr(0, text.find('\n')));
  for (std::string tok; first >> tok;) {
    if (tok.find('.') == std::string::npos) continue;
    if (tok.find_first_not_of("0123456789.") == std::string::npos && std::isdigit((unsigned char)tok[0]))
      return tok;
  }
  return {};
}

Provenance collect_provenance(const std::string& nvcc_version) {
  Provenance p;
  git_state(p);
  p.nvcc_version = nvcc_version.empty() ? "unknown" : nvcc_version;
  int v = 0;
  p.cuda_runtime_version = cudaRuntimeGetVersion(&v) == cudaSuccess ? cuda_version_string(v) : "unknown";
  v = 0;
  p.driver_cuda_version = cudaDriverGetVersion(&v) == cudaSuccess ? cuda_version_string(v) : "unknown";
  std::ifstream f("/proc/driver/nvidia/version");
  std::stringstream text;
  text << f.rdbuf();
  p.driver_release = nvidia_driver_release(text.str());
  if (p.driver_release.empty()) p.driver_release = "unknown";
  p.host_cpu = first_line_field("/proc/cpuinfo", "model name");
  if (p.host_cpu.empty()) p.host_cpu = "unknown";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  char buf[32] = "unknown";
  if (gmtime_r(&now, &utc)) std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  p.date_utc = buf;
  return p;
}

}  // namespace ladder
