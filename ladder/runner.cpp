#include "runner.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cuda_context.hpp"
#include "device.hpp"
#include "gpu_session.hpp"
#include "host_memory.hpp"
#include "npy.hpp"
#include "oracle.hpp"
#include "pool_only.hpp"

namespace ladder {

namespace {

void note(const LadderOptions& o, const std::string& msg) {
  if (o.progress) std::cerr << msg << std::endl;
}

std::vector<const StageDescriptor*> selected_stages(const LadderOptions& opt) {
  const auto& all = registered_stages();
  if (opt.stage_ids.empty()) return all;
  std::vector<const StageDescriptor*> out;
  for (const std::string& id : opt.stage_ids) {
    const StageDescriptor* found = nullptr;
    for (const StageDescriptor* s : all)
      if (s->id == id || s->name == id || s->label() == id) found = s;
    if (!found) {
      std::string known;
      for (const StageDescriptor* s : all) known += " " + s->id;
      throw std::invalid_argument("unknown stage '" + id + "'; this program has:" + known);
    }
    out.push_back(found);
  }
  return out;
}

HostInputs load_inputs(const Problem& p, const std::string& dir) {
  namespace fs = std::filesystem;
  auto load = [&](const char* name, std::vector<int64_t> shape) {
    return npy::load_f32_shaped((fs::path(dir) / (std::string(name) + ".npy")).string(), shape, name)
        .data;
  };
  HostInputs in;
  in.x = load("x", {p.batch, p.in_channels, p.in_h, p.in_w});
  in.weight = load("weight", {p.in_channels, p.out_per_group(), p.kernel_size.h, p.kernel_size.w});
  in.conv_bias = load("conv_bias", {p.out_channels});
  in.bias = load("bias", {p.out_channels, 1, 1});
  return in;
}

void dump_inputs(const Problem& p, const HostInputs& in, const Reference& ref, const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  auto path = [&](const std::string& name) { return (fs::path(dir) / (name + ".npy")).string(); };
  npy::save_f32(path("x"), {p.batch, p.in_channels, p.in_h, p.in_w}, in.x.data());
  npy::save_f32(path("weight"), {p.in_channels, p.out_per_group(), p.kernel_size.h, p.kernel_size.w},
                in.weight.data());
  npy::save_f32(path("conv_bias"), {p.out_channels}, in.conv_bias.data());
  npy::save_f32(path("bias"), {p.out_channels, 1, 1}, in.bias.data());
  npy::save_f64(path("pooled_oracle"), {p.batch, p.out_channels}, ref.pooled.data());
  npy::save_f64(path("y_oracle"), {p.batch, 1}, ref.y.data());
}

void dump_stage(const Problem& p, const StageReport& s, const std::string& dir) {
  namespace fs = std::filesystem;
  // fp32 stages wrote fp32 values; storing them as f32 keeps the files bit-exact.
  std::vector<float> pooled(s.pooled.begin(), s.pooled.end()), y(s.y.begin(), s.y.end());
  npy::save_f32((fs::path(dir) / ("pooled_" + s.id + ".npy")).string(), {p.batch, p.out_channels},
                pooled.data());
  npy::save_f32((fs::path(dir) / ("y_" + s.id + ".npy")).string(), {p.batch, 1}, y.data());
}

// A progress callback that rewrites one stderr line when stderr is a terminal.
Progress progress_printer(const LadderOptions& opt, const std::string& label) {
  if (!opt.progress) return {};
  const bool tty = isatty(STDERR_FILENO);
  return [tty, label](int done, int total) {
    if (tty) {
      std::fprintf(stderr, "\r  %s: repetition %d/%d", label.c_str(), done, total);
      if (done == total) std::fprintf(stderr, "\n");
    } else if (done == total || done % 10 == 0) {
      std::fprintf(stderr, "  %s: repetition %d/%d\n", label.c_str(), done, total);
    }
  };
}

// Whether stage 00 (the literal pipeline, which holds the fp64 convT output) will run.
bool literal_cpu_stage_runs(const Problem& p, const LadderOptions& opt,
                            const std::vector<const StageDescriptor*>& stages) {
  for (const StageDescriptor* s : stages)
    if (!s->is_gpu() && (opt.force_cpu || p.conv_macs() <= opt.cpu_max_macs)) return true;
  return false;
}

// After `e` stopped a GPU stage (or the CUB baseline): the sticky error the CUDA context is
// left in, or cudaSuccess if it still works.
cudaError_t sticky_error_after(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const CudaError*>(&e); ce && is_sticky_cuda_error(ce->code()))
    return ce->code();
  return sticky_cuda_error();
}

std::string context_lost_message(const std::string& culprit, cudaError_t code) {
  return culprit + " caused a sticky CUDA error, " + cuda_error_text(code) +
         ": the CUDA context is unusable, so the remaining GPU stages were not run";
}

Spread single_run(double ms) { return {ms, ms, ms}; }

}  // namespace

bool LadderReport::all_passed() const {
  for (const StageReport& s : stages) {
    if (s.failed) return false;
    if (s.ran && (!s.vs_oracle.pass() || (s.vs_previous && s.vs_previous_checked && !s.vs_previous->pass())))
      return false;
  }
  return cuda_context_lost.empty();
}

LadderReport run_ladder(const Problem& p, const LadderOptions& opt) {
  p.validate();
  if (opt.reps < 1 || opt.warmup < 0)
    throw std::invalid_argument("--reps must be >= 1 and --warmup >= 0, got " +
                                std::to_string(opt.reps) + " and " + std::to_string(opt.warmup));
  const std::vector<const StageDescriptor*> stages = selected_stages(opt);
  // Before anything large is allocated: a run too big for this machine stops here, with the
  // numbers, instead of being killed by the OOM killer halfway.
  check_host_memory(ladder_host_memory_need(p, int(stages.size()), literal_cpu_stage_runs(p, opt, stages)),
                    probe_host_memory());
  LadderReport report;
  report.problem = p;
  report.provenance = collect_provenance(nvcc_version());
  report.warmup = opt.warmup;
  report.reps = opt.reps;
  report.flush_l2 = opt.flush_l2;
  const bool exact = p.distribution == Distribution::Exact;
  report.tolerance = exact ? "exact" : "fp32";

  note(opt, "problem: " + p.describe());
  auto t0 = std::chrono::steady_clock::now();
  const HostInputs in = opt.inputs_dir.empty() ? make_inputs(p) : load_inputs(p, opt.inputs_dir);
  // Loaded inputs checked at the exact tolerance must be exact inputs.
  if (!opt.inputs_dir.empty() && p.distribution == Distribution::Exact) check_exact_inputs(p, in);
  note(opt, std::string(opt.inputs_dir.empty() ? "generated" : "loaded") + " inputs (" +
                format_bytes(4.0 * double(in.x.size())) + " of x)");

  const Reference oracle = linearity_pipeline(p, in);
  // fp32 stages: exact_tolerance on exact inputs (only the mean's rounding), fp32_tolerance
  // otherwise; the fp64 CPU stage: the fp64 rounding bound.
  const Tolerance tol_stage = stage_tolerance(p, oracle);
  const Tolerance tol64 = rounding_tolerance(p, oracle, kFp64UnitRoundoff);
  note(opt, "oracle: linearity identity in fp64 (" +
                std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) +
                " s with input generation)");
  if (!opt.dump_dir.empty()) dump_inputs(p, in, oracle, opt.dump_dir);

  std::unique_ptr<GpuSession> gpu;
  bool wants_gpu = false;
  for (const StageDescriptor* s : stages) wants_gpu |= s->is_gpu();
  if (wants_gpu) {
    if (cuda_device_available(&report.gpu_skip_reason)) {
      report.device = device_description();
      report.fp32_peak_tflops = fp32_peak_tflops(&report.fp32_peak_formula);
      report.dram_peak_gbps = dram_peak_gbps(&report.dram_peak_formula);
      note(opt, "device: " + report.device);
      gpu = std::make_unique<GpuSession>(p, in);
      report.floor_ms = gpu->time_streaming_read(opt.warmup, opt.reps, opt.flush_l2);
      // The spread is known when the floor is the median of the session's last timing loop.
      if (gpu->last_launch_spread().median == report.floor_ms) report.floor_spread = gpu->last_launch_spread();
      if (opt.cub_baseline) {
        try {
          note(opt, "baseline: cub::DeviceSegmentedReduce::Sum over a convT-sized tensor");
          report.cub_pool_ms = gpu->time_cub_segmented_sum(opt.warmup, opt.reps, opt.flush_l2);
          report.cub_spread = gpu->last_launch_spread();
        } catch (const std::exception& e) {
          report.cub_pool_ms = 0;
          report.cub_note = e.what();
          note(opt, std::string("CUB baseline skipped: ") + e.what());
          if (dynamic_cast<const DeviceMemoryError*>(&e) == nullptr) {
            if (const cudaError_t code = sticky_error_after(e); code != cudaSuccess)
              report.cuda_context_lost = context_lost_message("the CUB baseline", code);
          }
        }
      }
    } else {
      note(opt, "no CUDA device (" + report.gpu_skip_reason + "): GPU stages are skipped");
    }
  } else {
    report.gpu_skip_reason = "not used: no GPU stage selected";
  }

  std::optional<size_t> previous;  // index into report.stages of the last stage that ran
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageDescriptor& s = *stages[i];
    StageReport r;
    r.id = s.id;
    r.name = s.name;
    r.idea = s.idea;
    r.gpu = s.is_gpu();
    r.computes_conv = s.computes_conv;
    const std::string label = "[" + std::to_string(i + 1) + "/" + std::to_string(stages.size()) +
                              "] " + s.label();
    const bool fp64 = !s.is_gpu();
    try {
      if (s.is_gpu() && !gpu) {
        r.note = "skipped: no CUDA device (" + report.gpu_skip_reason + ")";
      } else if (s.is_gpu() && !report.cuda_context_lost.empty()) {
        r.note = "not run: " + report.cuda_context_lost;
      } else if (!s.is_gpu() && p.conv_macs() > opt.cpu_max_macs && !opt.force_cpu) {
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "skipped: literal cost %.3g multiply-adds exceeds --cpu-max-macs %.3g; "
                      "pass --force-cpu to run it anyway (the oracle is the linearity identity)",
                      p.conv_macs(), opt.cpu_max_macs);
        r.note = buf;
      } else if (!s.is_gpu()) {
        note(opt, label + ": running on the CPU");
        CpuStageResult c = s.run_cpu(p, in);
        r.phase_ms = c.phase_ms;
        for (auto& ph : c.phase_ms) {
          r.total_ms += ph.second;
          r.phase_spread.push_back(single_run(ph.second));
        }
        r.total_spread = single_run(r.total_ms);
        r.pooled = std::move(c.pooled);
        r.y = std::move(c.y);
        r.ran = true;
      } else {
        note(opt, label + ": " + std::to_string(opt.warmup) + " warm-up + " +
                      std::to_string(opt.reps) + " timed repetitions");
        GpuTiming t = gpu->time_stage(s, opt.warmup, opt.reps, opt.flush_l2, progress_printer(opt, label));
        r.phase_ms = t.phase_ms;
        r.phase_spread = t.phase_spread;
        r.total_ms = t.total_ms;
        r.total_spread = t.total_spread;
        r.pooled = std::move(t.pooled);
        r.y = std::move(t.y);
        r.ran = true;
      }
    } catch (const std::exception& e) {
      r.failed = true;
      r.note = std::string("error: ") + e.what();
      note(opt, label + ": " + r.note);
      if (s.is_gpu() && gpu) {
        if (const cudaError_t code = sticky_error_after(e); code != cudaSuccess) {
          report.cuda_context_lost = context_lost_message("stage " + s.label(), code);
          note(opt, label + ": " + report.cuda_context_lost);
        }
      }
    }
    if (r.ran) {
      // The oracle is exact to fp64: an fp32 stage gets 1x its bound; an fp64 stage and the
      // oracle each carry an fp64 rounding error, so 2x the fp64 bound.
      r.vs_oracle = compare(r.pooled, r.y, oracle.pooled, oracle.y, fp64 ? tol64 : tol_stage, fp64 ? 2.0 : 1.0);
      if (previous) {
        const StageReport& prev = report.stages[*previous];
        // Exact inputs: both sides round the same exact means, so they differ by at most one
        // exact tolerance (the triangle bound of the two oracle checks would be 2x). Otherwise
        // the two oracle checks bound the difference and it is reported, not judged.
        r.vs_previous = compare(r.pooled, r.y, prev.pooled, prev.y, tol_stage, 1.0);
        r.vs_previous_checked = exact;
        r.previous_id = prev.id;
      }
      if (!opt.dump_dir.empty()) dump_stage(p, r, opt.dump_dir);
    }
    if (!r.ran && !r.failed) note(opt, label + ": " + r.note);
    report.stages.push_back(std::move(r));
    if (report.stages.back().ran) previous = report.stages.size() - 1;
  }
  if (!opt.json_path.empty()) write_json(report, opt.json_path);
  return report;
}

// ---- ladder --pool-only (pool_only.hpp) ------------------------------------------------------

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
  if (opt.reps < 1 || opt.warmup < 0)
    throw std::invalid_argument("--reps must be >= 1 and --warmup >= 0, got " +
                                std::to_string(opt.reps) + " and " + std::to_string(opt.warmup));
  std::vector<const StageDescriptor*> stages;
  for (const StageDescriptor* s : selected_stages(opt))
    if (s->run_pool || !opt.stage_ids.empty()) stages.push_back(s);  // named stages are listed
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
  r.provenance = collect_provenance(nvcc_version());
  r.warmup = opt.warmup;
  r.reps = opt.reps;
  r.flush_l2 = opt.flush_l2;
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
