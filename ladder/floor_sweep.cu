// floor_sweep: tunes the streaming read of streaming_read.cuh (the ladder's floor). Times every
// launch configuration (loads in flight x block size x blocks per SM x load kind) over x at the
// KernelBench size with CUDA events, L2 flushed before each repetition, configurations
// interleaved within each repetition so that clock drift spreads evenly, and prints the median,
// min and max of each, then the best. Plain argument parsing: it builds with nvcc alone.
//
//   floor_sweep [--elems N] [--reps R] [--warmup W] [--flush memset|read|none]
//               [--only LOADS,BLOCK,BLOCKS_PER_SM[,cs]]
//
// BLOCKS_PER_SM: 0 = the resident maximum, -1 = a grid that covers x; cs = evict-first loads.
// results/floor_sweep_h200.txt holds its output; profiles/data/floor_streaming_read.txt the ncu
// metrics of one configuration (`ncu ... floor_sweep --only 2,1024,-1 --flush none`; the command
// is in that file). Builds with nvcc alone too:
//   nvcc -O3 -std=c++17 -arch=sm_90 -Icommon/toolkit -Iladder -o floor_sweep
//        ladder/floor_sweep.cu common/toolkit/device.cpp common/toolkit/cuda_check.cpp   (one command line)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device.hpp"
#include "streaming_read.cuh"

namespace {

using ladder::StreamingReadConfig;
using ladder::StreamingReadLaunch;

/// Fills data[0..n) with values in [0, 1) from a hash of the index: real bits, never zeros.
__global__ void fill_hash(float* data, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32);
    h ^= h >> 15;
    h *= 2246822519u;
    data[i] = float(h >> 8) * (1.0f / 16777216.0f);
  }
}

struct Row {
  StreamingReadConfig cfg;
  StreamingReadLaunch launch;
  std::vector<double> ms;
  double median = 0, lo = 0, hi = 0;
};

std::string blocks_label(const StreamingReadConfig& c, const StreamingReadLaunch& l) {
  if (c.blocks_per_sm == 0) return "resident (" + std::to_string(l.resident_blocks_per_sm) + ")";
  if (c.blocks_per_sm == -1) return "cover";
  return std::to_string(c.blocks_per_sm);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "floor_sweep: %s\nusage: floor_sweep [--elems N] [--reps R] [--warmup W] [--flush memset|read|none] "
               "[--only LOADS,BLOCK,BLOCKS_PER_SM[,cs]]\n",
               why);
  std::exit(2);
}

int run(int argc, char** argv) {
  int64_t n = int64_t(16) * 64 * 512 * 512;  // x of the KernelBench problem
  int reps = 30, warmup = 5;
  std::string flush = "memset";
  std::vector<StreamingReadConfig> only;
  for (int a = 1; a < argc; ++a) {
    const std::string k = argv[a];
    if (a + 1 >= argc) usage(("missing value after " + k).c_str());
    const char* v = argv[++a];
    if (k == "--elems") n = std::atoll(v);
    else if (k == "--reps") reps = std::atoi(v);
    else if (k == "--warmup") warmup = std::atoi(v);
    else if (k == "--flush") flush = v;
    else if (k == "--only") {
      StreamingReadConfig c;
      char kind[8] = "";
      if (std::sscanf(v, "%d,%d,%d,%7s", &c.loads_in_flight, &c.block, &c.blocks_per_sm, kind) < 3)
        usage("--only takes LOADS,BLOCK,BLOCKS_PER_SM[,cs]");
      c.evict_first = std::strcmp(kind, "cs") == 0;
      only.push_back(c);
    } else usage(("unknown option " + k).c_str());
  }
  if (n < 4 || reps < 1 || warmup < 0) usage("--elems >= 4, --reps >= 1, --warmup >= 0");
  if (flush != "memset" && flush != "read" && flush != "none") usage("--flush is memset, read or none");

  int dev = 0, l2 = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  std::string peak_formula;
  const double peak = ladder::dram_peak_gbps(&peak_formula);
  const double bytes = 4.0 * double(n);

  ladder::DeviceBuffer<float> x(size_t(n), "x");
  ladder::DeviceBuffer<float> sink(1, "sink");
  // Twice the L2: "memset" writes it (as the ladder does: the L2 then holds dirty lines that are
  // written back while the next kernel runs); "read" reads it (the L2 holds clean lines).
  ladder::DeviceBuffer<float> flush_buf(size_t(2) * size_t(l2) / 4, "L2 flush buffer");
  fill_hash<<<4 * sms, 256>>>(x.get(), n);
  CUDA_CHECK_LAUNCH("fill_hash");
  fill_hash<<<4 * sms, 256>>>(flush_buf.get(), int64_t(flush_buf.size()));
  CUDA_CHECK_LAUNCH("fill_hash");
  const StreamingReadLaunch flush_read = ladder::plan_streaming_read(int64_t(flush_buf.size()));

  std::vector<Row> rows;
  if (only.empty()) {
    for (bool cs : {false, true})
      for (int loads : {1, 2, 4, 8})
        for (int block : {128, 256, 512, 1024})
          for (int bps : {1, 2, 4, 8, 16, 32, 64, 128, 0, -1}) {
            const StreamingReadConfig c{loads, block, bps, cs};
            const StreamingReadLaunch l = ladder::plan_streaming_read(n, c);
            // "resident" duplicates one of the powers of two: keep the named row only.
            if (bps > 0 && bps == l.resident_blocks_per_sm) continue;
            rows.push_back({c, l, {}});
          }
  } else {
    for (const StreamingReadConfig& c : only) rows.push_back({c, ladder::plan_streaming_read(n, c), {}});
  }

  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  for (int r = 0; r < warmup + reps; ++r)
    for (Row& row : rows) {
      if (flush == "memset") CUDA_CHECK(cudaMemsetAsync(flush_buf.get(), 0, flush_buf.bytes(), 0));
      if (flush == "read") flush_read(flush_buf.get(), int64_t(flush_buf.size()), sink.get(), 0);
      CUDA_CHECK(cudaEventRecord(start, 0));
      row.launch(x.get(), n, sink.get(), 0);
      CUDA_CHECK(cudaEventRecord(stop, 0));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      if (r >= warmup) row.ms.push_back(ms);
    }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));

  std::printf("device: %s\n", ladder::device_description().c_str());
  std::printf("dram_peak_gbps: %.1f\ndram_peak_formula: %s\n", peak, peak_formula.c_str());
  std::printf("bytes: %.0f (%lld floats)\nreps: %d\nwarmup: %d\nl2_flush: %s (2 x %d MiB)\n", bytes,
              static_cast<long long>(n), reps, warmup, flush.c_str(), l2 >> 20);
  std::printf("\n| loads | block | blocks/SM | loads kind | grid | waves | median ms | min ms | max ms | GB/s | %% of DRAM peak |\n");
  std::printf("|--:|--:|--:|:-:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (Row& row : rows) {
    std::vector<double> v = row.ms;
    std::sort(v.begin(), v.end());
    row.lo = v.front();
    row.hi = v.back();
    row.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    const double waves = double(row.launch.grid) / double(sms * row.launch.resident_blocks_per_sm);
    const double gbps = bytes / row.median / 1e6;
    std::printf("| %d | %d | %s | %s | %u | %.2f | %.4f | %.4f | %.4f | %.0f | %.1f |\n", row.cfg.loads_in_flight,
                row.cfg.block, blocks_label(row.cfg, row.launch).c_str(), row.cfg.evict_first ? "cs" : "plain",
                row.launch.grid, waves, row.median, row.lo, row.hi, gbps, peak > 0 ? 100 * gbps / peak : 0.0);
  }
  const Row& best = *std::min_element(rows.begin(), rows.end(),
                                      [](const Row& a, const Row& b) { return a.median < b.median; });
  std::printf("\nbest: %d,%d,%d%s\n", best.cfg.loads_in_flight, best.cfg.block, best.cfg.blocks_per_sm,
              best.cfg.evict_first ? ",cs" : "");
  std::printf("best_median_ms: %.5f\nbest_min_ms: %.5f\nbest_max_ms: %.5f\nbest_gbps: %.1f\n", best.median,
              best.lo, best.hi, bytes / best.median / 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "floor_sweep: %s\n", e.what());
    return 1;
  }
}
