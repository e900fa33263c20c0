// The harness the tensor-core ceiling programs share (mma_peak, wgmma_peak): their two options
// and the median time of a launch. Header-only, beside the programs, with CLI11 from the system
// include path, so each program still builds with nvcc alone.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "device.hpp"

namespace ladder {

struct PeakOptions {
  int reps = 7;    ///< timed launches per configuration; the median is reported
  int iters = 0;   ///< loop iterations per thread in a launch
};

/// --reps and --iters, each a positive integer (CLI11). --help prints the usage and exits 0; an
/// invalid option prints CLI11's message and exits 2.
inline PeakOptions parse_peak_options(int argc, char** argv, const std::string& description, int default_iters) {
  PeakOptions o;
  o.iters = default_iters;
  CLI::App app{description};
  app.add_option("--reps", o.reps, "timed launches per configuration; the median is reported")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  app.add_option("--iters", o.iters, "loop iterations per thread in a launch")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  return o;
}

/// False, after one line saying why on stdout, where this machine has no usable CUDA device (no
/// GPU, no driver, a driver too old): the program then has nothing to measure, which is no
/// error (exit 0, as the stage programs do), rather than a CUDA error from its first call.
inline bool peak_gpu_present(const char* program) {
  std::string why;
  if (cuda_device_available(&why)) return true;
  std::printf("%s: no CUDA device (%s): nothing to measure\n", program, why.c_str());
  return false;
}

/// The median, in ms, of `reps` calls of launch() on the default stream, each between two CUDA
/// events. Throws CudaError on a CUDA failure (launch() checks its own launches).
template <typename Launch>
float median_launch_ms(int reps, Launch&& launch) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms(static_cast<size_t>(reps));
  for (float& m : ms) {
    CUDA_CHECK(cudaEventRecord(e0));
    launch();
    CUDA_CHECK(cudaEventRecord(e1));
    CUDA_CHECK(cudaEventSynchronize(e1));
    CUDA_CHECK(cudaEventElapsedTime(&m, e0, e1));
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace ladder
