// `ladder --pool-only` (pool_only.hpp): the reduction stages' pool phase alone on a generated
// tensor of the convT output's shape.
#include "pool_only.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "cuda_context.hpp"
#include "device.hpp"
#include "gpu_session.hpp"
#include "host_memory.hpp"
#include "inputs.hpp"
#include "run_support.hpp"

namespace ladder {

namespace {

constexpr int64_t kPoolHostBlock = 65536;  // floats per work item of the host pass (256 kB)

// One parallel pass over the work items (plane, block of kPoolHostBlock floats): generates the
// block into `out` (if set) or reads it from `in`, and sums it and its |values| in fp64. The
// blocks of a plane are combined in order afterwards, so the result does not depend on the
// number of threads.
PoolReference plane_statistics(const Problem& p, const float* in, float* out) {
  const int64_t planes = p.pooled_elems(), P = p.out_h() * p.out_w();
  const int64_t blocks = (P + kPoolHostBlock - 1) / kPoolHostBlock, items = planes * blocks;
  std::vector<double> sum(static_cast<size_t>(items)), abs_sum(static_cast<size_t>(items));
#pragma omp parallel for schedule(static)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t plane = item / blocks, begin = (item % blocks) * kPoolHostBlock;
    const int64_t end = std::min(P, begin + kPoolHostBlock);
    double s = 0, a = 0;
    if (out) {
      const float mean = 4.0f * uniform01(p.seed, kPoolPlaneMeanStream, uint64_t(plane)) - 2.0f;
      float* dst = out + plane * P;
      for (int64_t j = begin; j < end; ++j) {
        const float v = mean + (uniform01(p.seed, kPoolTensorStream, uint64_t(plane * P + j)) - 0.5f);
        dst[j] = v;
        s += double(v);
        a += std::fabs(double(v));
      }
    } else {
      const float* src = in + plane * P;
      for (int64_t j = begin; j < end; ++j) {
        s += double(src[j]);
        a += std::fabs(double(src[j]));
      }
    }
    sum[size_t(item)] = s;
    abs_sum[size_t(item)] = a;
  }
  PoolReference ref;
  ref.mean.resize(size_t(planes));
  ref.abs_mean.resize(size_t(planes));
  for (int64_t plane = 0; plane < planes; ++plane) {
    double s = 0, a = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      s += sum[size_t(plane * blocks + b)];
      a += abs_sum[size_t(plane * blocks + b)];
    }
    ref.mean[size_t(plane)] = s / double(P);
    ref.abs_mean[size_t(plane)] = a / double(P);
  }
  return ref;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace

PoolReference generate_pool_tensor(const Problem& p, float* t) { return plane_statistics(p, nullptr, t); }

PoolReference pool_reference(const Problem& p, const float* t) { return plane_statistics(p, t, nullptr); }

std::vector<double> pool_tolerance(const Problem& p, const PoolReference& ref) {
  const double P = double(p.out_h()) * double(p.out_w()), u = kFp32UnitRoundoff;
  const double rel = kProbabilisticLambda * std::sqrt(P) * u;
  const double k = P <= 16777216.0 ? 1.0 : 2.0;  // float(P) is exact up to 2^24
  std::vector<double> tol(ref.mean.size());
  for (size_t i = 0; i < tol.size(); ++i) tol[i] = rel * ref.abs_mean[i] + k * u * std::fabs(ref.mean[i]);
  return tol;
}

Agreement check_pooled(const std::vector<double>& pooled, const PoolReference& ref,
                       const std::vector<double>& tolerance) {
  if (pooled.size() != ref.mean.size() || tolerance.size() != ref.mean.size())
    throw std::logic_error("check_pooled: " + std::to_string(pooled.size()) + " pooled values, " +
                           std::to_string(ref.mean.size()) + " reference means and " +
                           std::to_string(tolerance.size()) + " tolerances");
  Tolerance tol;
  tol.pooled = tolerance;
  return compare(pooled, {}, ref.mean, {}, tol);
}

HostMemoryNeed pool_only_host_memory_need(const Problem& p, int stages) {
  const double planes = double(p.pooled_elems()), P = double(p.out_h()) * double(p.out_w());
  const double blocks = std::ceil(P / double(kPoolHostBlock));
  HostMemoryNeed n;
  n.items.push_back({"the convT-sized tensor", 4.0 * planes * P});
  // mean, abs_mean, tolerance per plane; two partial sums per host work item.
  n.items.push_back({"the fp64 reference", 8.0 * planes * (3.0 + 2.0 * blocks)});
  // pooled as double plus its fp32 read-back, per stage and for the CUB baseline.
  n.items.push_back({"stage outputs", double(stages + 1) * 12.0 * planes});
  return n;
}

bool PoolOnlyReport::all_passed() const {
  for (const PoolStageReport& s : stages)
    if (s.failed || (s.ran && !s.check.pass())) return false;
  if (cub_ran && !cub_check.pass()) return false;
  return cuda_context_lost.empty();
}

PoolOnlyReport run_pool_only(const Problem& p, const LadderOptions& opt) {
  p.validate();
  check_timing_options(opt);
  std::vector<const StageDescriptor*> stages;
  for (const StageDescriptor* s : selected_stages(opt))
    if (s->run_pool || !opt.rung_ids.empty()) stages.push_back(s);  // named stages are listed
  if (std::none_of(stages.begin(), stages.end(), [](const StageDescriptor* s) { return s->run_pool != nullptr; })) {
    std::string with;
    for (const StageDescriptor* s : registered_stages())
      if (s->run_pool) with += " " + s->id;
    throw std::invalid_argument("--pool-only: none of the selected stages has a pool phase of its own "
                                "(StageDescriptor::run_pool); in this program:" +
                                (with.empty() ? std::string(" none") : with));
  }
  // Before the tensor is allocated: a shape too large for this machine stops here.
  check_host_memory(pool_only_host_memory_need(p, int(stages.size())), probe_host_memory());

  PoolOnlyReport r;
  r.problem = p;
  r.run = record_run(opt);
  r.tensor_bytes = 4.0 * double(p.out_elems());
  const std::string shape = "(" + std::to_string(p.batch) + ", " + std::to_string(p.out_channels) + ", " +
                            std::to_string(p.out_h()) + ", " + std::to_string(p.out_w()) + ")";
  note(opt, "problem: " + p.describe());
  note(opt, "pool only: each stage's pool phase on a generated " + shape + " fp32 tensor (" +
                format_bytes(r.tensor_bytes) + ", the convT output's shape); the convolution is skipped");

  auto stage_report = [](const StageDescriptor& s) {
    PoolStageReport sr;
    sr.id = s.id;
    sr.name = s.name;
    sr.idea = s.idea;
    return sr;
  };
  if (!cuda_device_available(&r.gpu_skip_reason)) {
    note(opt, "no CUDA device (" + r.gpu_skip_reason + "): nothing to run");
    for (const StageDescriptor* s : stages) {
      PoolStageReport sr = stage_report(*s);
      sr.note = "skipped: no CUDA device (" + r.gpu_skip_reason + ")";
      r.stages.push_back(std::move(sr));
    }
    if (!opt.json_path.empty()) write_pool_only_json(r, opt.json_path);
    return r;
  }
  r.device = device_description();
  r.dram_peak_gbps = dram_peak_gbps(&r.dram_peak_formula);
  note(opt, "device: " + r.device);

  // Device memory first (DeviceBuffer says what did not fit), then the tensor and its reference
  // on the host in one parallel pass, then one copy. new[] leaves the pages untouched: the
  // threads of the pass fault them in, in parallel.
  GpuSession gpu(p);
  DeviceBuffer<float> tensor(size_t(p.out_elems()), "the pool-only tensor " + shape + ", " + format_bytes(r.tensor_bytes));
  const auto t_gen = std::chrono::steady_clock::now();
  std::unique_ptr<float[]> host(new float[size_t(p.out_elems())]);
  const PoolReference ref = generate_pool_tensor(p, host.get());
  const std::vector<double> tol = pool_tolerance(p, ref);
  r.generate_s = seconds_since(t_gen);
  r.host_threads = omp_get_max_threads();
  note(opt, "generated the tensor and its fp64 plane means in " + seconds(r.generate_s) + " (" +
                std::to_string(r.host_threads) + " OpenMP threads)");
  const auto t_up = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaMemcpy(tensor.get(), host.get(), tensor.bytes(), cudaMemcpyHostToDevice));
  r.upload_s = seconds_since(t_up);
  host.reset();
  note(opt, "uploaded it in " + seconds(r.upload_s));

  note(opt, "floor: streaming read of the tensor");
  gpu.time_streaming_read(tensor.get(), p.out_elems(), opt.warmup, opt.reps, opt.flush_l2);
  r.floor_ms = gpu.last_launch_spread();
  if (opt.cub_baseline) {
    try {
      note(opt, "baseline: cub::DeviceSegmentedReduce::Sum over the tensor");
      std::vector<double> sums;
      gpu.time_cub_segmented_sum(tensor.get(), opt.warmup, opt.reps, opt.flush_l2, &sums);
      r.cub_ms = gpu.last_launch_spread();
      const double P = double(p.out_h()) * double(p.out_w());
      for (double& v : sums) v /= P;
      r.cub_check = check_pooled(sums, ref, tol);
      r.cub_ran = true;
    } catch (const std::exception& e) {
      r.cub_ms = {};
      r.cub_note = e.what();
      note(opt, std::string("CUB baseline skipped: ") + e.what());
      if (dynamic_cast<const DeviceMemoryError*>(&e) == nullptr) {
        if (const cudaError_t code = sticky_error_after(e); code != cudaSuccess)
          r.cuda_context_lost = context_lost_message("the CUB baseline", code);
      }
    }
  }

  for (size_t i = 0; i < stages.size(); ++i) {
    const StageDescriptor& s = *stages[i];
    PoolStageReport sr = stage_report(s);
    const std::string label = "[" + std::to_string(i + 1) + "/" + std::to_string(stages.size()) + "] " + s.label();
    try {
      if (!s.run_pool) {
        sr.note = "not run: no pool phase of its own (StageDescriptor::run_pool)";
      } else if (!r.cuda_context_lost.empty()) {
        sr.note = "not run: " + r.cuda_context_lost;
      } else {
        note(opt, label + ": pool phase, " + std::to_string(opt.warmup) + " warm-up + " +
                      std::to_string(opt.reps) + " timed repetitions");
        GpuTiming t = gpu.time_pool(s, tensor.get(), opt.warmup, opt.reps, opt.flush_l2, progress_printer(opt, label));
        sr.pool_ms = t.total_spread;
        sr.pooled = std::move(t.pooled);
        sr.check = check_pooled(sr.pooled, ref, tol);
        sr.ran = true;
      }
    } catch (const std::exception& e) {
      sr.failed = true;
      sr.note = std::string("error: ") + e.what();
      note(opt, label + ": " + sr.note);
      if (const cudaError_t code = sticky_error_after(e); code != cudaSuccess) {
        r.cuda_context_lost = context_lost_message("stage " + s.label(), code);
        note(opt, label + ": " + r.cuda_context_lost);
      }
    }
    if (!sr.ran && !sr.failed) note(opt, label + ": " + sr.note);
    r.stages.push_back(std::move(sr));
  }
  if (!opt.json_path.empty()) write_pool_only_json(r, opt.json_path);
  return r;
}

}  // namespace ladder
