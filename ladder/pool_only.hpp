// `ladder --pool-only`: the pool phase of every stage that has one on its own
// (StageDescriptor::run_pool), timed and checked on a generated fp32 tensor of the convT output's
// shape; the convolution is skipped, so a reduction experiment at the KernelBench size takes
// seconds instead of the ~0.9 s per repetition the naive convT costs stages 01-04.
//
// The tensor. t[plane, j] = m[plane] + (uniform01(seed, kPoolTensorStream, plane*P + j) - 0.5)
// with m[plane] = 4*uniform01(seed, kPoolPlaneMeanStream, plane) - 2 (P = Hout*Wout, seed =
// Problem::seed): every plane has its own mean in [-2, 2), so a stage that writes one plane's
// mean to another's slot fails, and real fractions, so every fp32 rounding shows. It is drawn on
// the host (OpenMP, counter-based: the same values for any thread count) together with its fp64
// reference, then uploaded.
//
// The check. A stage forms each pooled value as an fp32 sum of the P values of its plane, in
// some order, then one fp32 division by float(P). The probabilistic bound of Higham & Mary that
// common/model/tolerance.hpp uses for the whole pipeline, applied to this one sum of P terms:
//   |pooled - mean| <= lambda*sqrt(P)*u*mean|t| + k*u*|mean|,  lambda = 8, u = 2^-24,
// mean|t| = sum|terms| / P (from the fp64 pass), k = 1 when float(P) is exact (P <= 2^24), else
// 2 (float(P) rounds too). At P = 264196 the first term is 2.5e-4 * mean|t|, and it fails with
// probability below 2P*exp(-lambda^2/2) = 6.7e-9 per value for a correct stage. A NaN (an
// element the stage never wrote: pooled is poisoned before every repetition) always fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host_memory.hpp"
#include "runner.hpp"

namespace ladder {

/// uniform01 streams of the pool-only tensor (common/model/inputs.cpp uses 1-6 for the inputs).
constexpr uint64_t kPoolTensorStream = 80;
constexpr uint64_t kPoolPlaneMeanStream = 81;

/// fp64 statistics of each (n, co) plane of a (batch, out_channels, Hout, Wout) fp32 tensor.
struct PoolReference {
  std::vector<double> mean;      ///< the exact mean of the plane's fp32 values (fp64 sums)
  std::vector<double> abs_mean;  ///< mean of |values|: the scale of an fp32 sum's rounding error
};

/// Fills t[0 .. p.out_elems()) with the pool-only tensor for p's convT output shape and
/// p.seed (see above) and returns its reference, in one parallel pass (each block of a plane is
/// summed while it is in cache). t must hold p.out_elems() floats; the caller need not
/// initialize it (the pass touches every page, from the threads that then read them).
PoolReference generate_pool_tensor(const Problem& p, float* t);

/// The reference of a given tensor (batch, out_channels, Hout, Wout) fp32 (tests: a stage's own
/// convT output). OpenMP; the result does not depend on the thread count.
PoolReference pool_reference(const Problem& p, const float* t);

/// Per plane: lambda*sqrt(P)*u*abs_mean + k*u*|mean| (see above).
std::vector<double> pool_tolerance(const Problem& p, const PoolReference& ref);

/// pooled (batch*out_channels) against ref.mean at `tolerance` (Agreement of tolerance.hpp, y
/// empty): a NaN on one side fails.
Agreement check_pooled(const std::vector<double>& pooled, const PoolReference& ref,
                       const std::vector<double>& tolerance);

/// What the pool-only mode holds in host memory at its peak (the tensor dominates).
HostMemoryNeed pool_only_host_memory_need(const Problem& p, int stages);

struct PoolStageReport {
  std::string id, name, idea;
  bool ran = false;
  bool failed = false;  ///< an error stopped it (the note says which); fails the run
  std::string note;     ///< why it did not run, or the error that stopped it
  Spread pool_ms;       ///< min, median, max of the pool phase over the timed repetitions
  Agreement check;      ///< pooled against the fp64 plane means
  std::vector<double> pooled;
};

struct PoolOnlyReport {
  Problem problem;
  RunRecord run;
  std::string device;  ///< empty without a GPU
  std::string gpu_skip_reason;
  std::string cuda_context_lost;  ///< as LadderReport::cuda_context_lost
  double dram_peak_gbps = 0;
  std::string dram_peak_formula;
  double tensor_bytes = 0;  ///< 4 * out_elems
  int host_threads = 0;     ///< OpenMP threads that generated the tensor
  double generate_s = 0;    ///< wall time: tensor and fp64 reference (one pass)
  double upload_s = 0;      ///< wall time: host to device copy
  Spread floor_ms;          ///< streaming read of the tensor (harness/streaming_read.cuh)
  bool cub_ran = false;
  Spread cub_ms;            ///< cub::DeviceSegmentedReduce::Sum over the tensor; all 0 if not run
  std::string cub_note;     ///< why the CUB baseline did not run
  Agreement cub_check;      ///< its sums / P against the plane means
  std::vector<PoolStageReport> stages;
  /// Every stage that ran (and the CUB baseline) passed, none failed, the context survived.
  bool all_passed() const;
};

/// Runs the pool-only mode for opt.rung_ids (empty: every stage with run_pool; a selected
/// stage without one is listed as not run). Uses opt.warmup, reps, flush_l2, progress,
/// cub_baseline and json_path. Throws std::invalid_argument if no selected stage has a pool
/// phase, InvalidProblem, HostMemoryError (checked before the tensor is allocated),
/// DeviceMemoryError or CudaError before the stages run; a stage that fails is reported.
PoolOnlyReport run_pool_only(const Problem& p, const LadderOptions& opt);

/// The results table: per stage pool ms, min-max, GB/s, x floor, speedup, error, check.
std::string format_pool_only_table(const PoolOnlyReport& r);

/// Writes `r` as JSON ("mode": "pool_only"; schema in ladder/report.cpp); throws
/// std::runtime_error if the file cannot be written.
void write_pool_only_json(const PoolOnlyReport& r, const std::string& path);

}  // namespace ladder
