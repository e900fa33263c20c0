#include "runner.hpp"


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
#include "host_memory_need.hpp"
#include "npy.hpp"
#include "oracle.hpp"
#include "run_support.hpp"
#include "tf32.hpp"

namespace ladder {

namespace {

/// "; still a stub: ..." for a stage that holds the handout's stubs, else "": without a GPU its
/// skip would otherwise look like a pass.
std::string stub_note(const StageDescriptor& s) {
  if (s.stubs <= 0) return "";
  return "; still a stub: " + std::to_string(s.stubs) + " ladder_todo call(s) left in stage " + s.id +
         "'s sources, so it would fail on a GPU";
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

// Whether stage 00 (the literal pipeline, which holds the fp64 convT output) will run.
bool literal_cpu_stage_runs(const Problem& p, const LadderOptions& opt,
                            const std::vector<const StageDescriptor*>& stages) {
  for (const StageDescriptor* s : stages)
    if (!s->is_gpu() && (opt.force_cpu || p.conv_macs() <= opt.cpu_max_macs)) return true;
  return false;
}

Spread single_run(double ms) { return {ms, ms, ms}; }

/// x and weight moved 3/4 of the way from their TF32 truncation to the next TF32 value away
/// from zero: rounding to nearest then goes up a TF32 step and truncation does not, in every
/// operand, so a stage that truncates is off by a coherent 2^-10 relative error.
void place_between_tf32(HostInputs& in) {
  for (std::vector<float>* v : {&in.x, &in.weight})
    for (float& e : *v) {
      if (!std::isfinite(e)) continue;
      uint32_t bits;
      std::memcpy(&bits, &e, sizeof bits);
      bits = (bits & 0xFFFFE000u) | 0x1800u;
      std::memcpy(&e, &bits, sizeof bits);
    }
}

/// The inputs with x and weight rounded to TF32 (nearest, ties away): a TF32 stage's operands.
HostInputs tf32_operands(HostInputs in) {
  for (std::vector<float>* v : {&in.x, &in.weight})
    for (float& e : *v) e = round_to_tf32(e);
  return in;
}

/// --refill-check's second inputs: another seed's values, with their oracles.
struct Refill {
  HostInputs in;
  Reference oracle;
  std::optional<Reference> oracle_rounded;
};

Refill refilled_inputs(Problem p, const LadderOptions& opt) {
  p.seed = p.seed * 6364136223846793005ULL + 1442695040888963407ULL;  // any other seed: an LCG step
  HostInputs in = make_inputs(p);
  if (opt.tf32_midpoints) place_between_tf32(in);
  Reference oracle = linearity_pipeline(p, in);
  std::optional<Reference> rounded;
  if (opt.tf32_midpoints) rounded = linearity_pipeline(p, tf32_operands(in));
  return {std::move(in), std::move(oracle), std::move(rounded)};
}

/// A stage's report before it runs: what the stage is (id, name, idea, kind), no result yet.
StageReport stage_report_of(const StageDescriptor& s) {
  StageReport r;
  r.id = s.id;
  r.name = s.name;
  r.idea = s.idea;
  r.gpu = s.is_gpu();
  r.computes_conv = s.computes_conv;
  r.tensor_cores = s.tensor_cores;
  r.changes = s.changes;
  return r;
}

std::string no_gpu_note(const LadderReport& report, const StageDescriptor& s) {
  return "skipped: no CUDA device (" + report.gpu_skip_reason + ")" + stub_note(s);
}

/// The ladder's problem model for the harness's run loop (run_loop.hpp says what each hook does).
/// A stage keeps its outputs in its report; Output is only the refilled run's.
struct StageModel {
  using Rung = StageDescriptor;
  using Result = StageReport;
  using Output = GpuTiming;
  const Problem& p;
  const LadderOptions& opt;
  LadderReport& report;
  const HostInputs& in;
  const Reference& oracle;
  const std::optional<Reference>& oracle_rounded;  // --tf32-midpoints
  const Tolerance tol_stage, tol64;                // see run_ladder
  GpuSession* gpu;                                 // null without a CUDA device
  std::optional<Refill> refilled = {};             // --refill-check: the second inputs, made once

  StageReport start(const StageDescriptor& s) const { return stage_report_of(s); }
  std::string skip_note(Skip why, const StageDescriptor& s) const {
    if (why == Skip::Lost) return s.is_gpu() ? "not run: " + report.cuda_context_lost : "";
    if (why == Skip::NoDevice) return no_gpu_note(report, s);
    if (why != Skip::CpuCost) return "";
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "skipped: literal cost %.3g multiply-adds exceeds --cpu-max-macs %.3g; "
                  "pass --force-cpu to run it anyway (the oracle is the linearity identity)",
                  p.conv_macs(), opt.cpu_max_macs);
    return buf;
  }
  double cpu_macs(const StageDescriptor&) const { return p.conv_macs(); }
  void skipped(const StageDescriptor& s, const StageReport& r, const std::string& label) const {
    // The no-GPU reason was said once, before the loop: each skipped GPU stage only names the skip.
    note(opt, label + ": " + (s.is_gpu() && !gpu ? "skipped: no CUDA device" + stub_note(s) : r.note));
  }
  GpuTiming run(const StageDescriptor& s, StageReport& r, const std::string& label) const {
    if (!s.is_gpu()) {
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
      return {};
    }
    note(opt, label + ": " + std::to_string(opt.warmup) + " warm-up + " + std::to_string(opt.reps) +
                  " timed repetitions");
    GpuTiming t = gpu->time_stage(s, opt.warmup, opt.reps, opt.flush_l2, progress_printer(opt, label));
    r.phase_ms = t.phase_ms;
    r.phase_spread = t.phase_spread;
    r.total_ms = t.total_ms;
    r.total_spread = t.total_spread;
    r.pooled = std::move(t.pooled);
    r.y = std::move(t.y);
    if (s.device_note) {
      r.note = s.device_note();
      if (!r.note.empty()) note(opt, label + ": note: " + r.note);
    }
    return {};
  }
  /// The oracle is exact to fp64: an fp32 stage gets 1x its bound; an fp64 stage and the oracle
  /// each carry an fp64 rounding error, so 2x the fp64 bound. A TF32 stage (tensor cores) gets the
  /// wider TF32 bound on inputs that are not exact (judge_gpu).
  void check(const StageDescriptor& s, StageReport& r, const GpuTiming&) const {
    r.vs_oracle = s.is_gpu() ? judge_gpu(s, r.pooled, r.y, oracle, oracle_rounded)
                             : ladder::compare(r.pooled, r.y, oracle.pooled, oracle.y, tol64, 2.0);
  }
  /// A TF32 stage on --tf32-midpoints inputs is held to the FP32 tolerance against its rounded
  /// operands' oracle (its products are then exact, only the sums round); any other GPU stage to
  /// stage_tolerance of its precision against the oracle, or, under the grader's rules
  /// (--check-precision), to any_order_tolerance: the mean may be formed in any correctly rounded order.
  Agreement judge_gpu(const StageDescriptor& s, const std::vector<double>& pooled, const std::vector<double>& y,
                      const Reference& o, const std::optional<Reference>& rounded) const {
    const Precision precision = opt.check_precision.value_or(s.precision);
    if (precision == Precision::Tf32 && rounded)
      return ladder::compare(pooled, y, rounded->pooled, rounded->y, stage_tolerance(p, *rounded, Precision::Fp32));
    const bool any_order = opt.check_precision.has_value();
    return ladder::compare(pooled, y, o.pooled, o.y,
                           any_order ? any_order_tolerance(p, o, precision) : stage_tolerance(p, o, precision));
  }
  bool passed(const StageReport& r) const { return r.vs_oracle.pass(); }
  void refill(bool other) {
    if (!refilled) refilled = refilled_inputs(p, opt);
    gpu->refill(other ? refilled->in : in);
  }
  // A first run on a fresh workspace: no earlier run's leftovers help.
  GpuTiming run_once(const StageDescriptor& s) const { return gpu->run_first(s); }
  void check_refilled(const StageDescriptor& s, StageReport& r, const GpuTiming& t) const {
    const Agreement b = judge_gpu(s, t.pooled, t.y, refilled->oracle, refilled->oracle_rounded);
    if (!b.pass()) r.vs_oracle = b, r.note = kRefilledDisagrees;
  }
  /// Exact inputs: both sides round the same exact means, so they differ by at most one exact
  /// tolerance (the triangle bound of the two oracle checks would be 2x). Otherwise the two oracle
  /// checks bound the difference and it is reported, not judged.
  void compare(StageReport& r, const GpuTiming&, const StageReport& prev, const GpuTiming&) const {
    r.vs_previous = ladder::compare(r.pooled, r.y, prev.pooled, prev.y, tol_stage, 1.0);
    r.vs_previous_checked = p.distribution == Distribution::Exact;
    r.previous_id = prev.id;
  }
  void done(const StageDescriptor&, const StageReport& r, const GpuTiming&, const std::string&) const {
    if (!opt.dump_dir.empty()) dump_stage(p, r, opt.dump_dir);
  }
  void failed(const StageDescriptor& s, StageReport& r, const std::string& label, const std::exception& e,
              cudaError_t lost) {
    r.note = std::string("error: ") + e.what();
    note(opt, label + ": " + r.note);
    if (lost == cudaSuccess) return;
    report.cuda_context_lost = context_lost_message("stage " + s.label(), lost);
    note(opt, label + ": " + report.cuda_context_lost);
  }
};

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
  check_timing_options(opt);
  const std::vector<const StageDescriptor*> stages = selected_stages(opt);
  LadderReport report;
  report.problem = p;
  report.run = record_run(opt);
  const bool exact = p.distribution == Distribution::Exact;
  report.tolerance = exact ? "exact" : "fp32";

  note(opt, "problem: " + p.describe());
  bool wants_gpu = false, any_cpu = false;
  for (const StageDescriptor* s : stages) (s->is_gpu() ? wants_gpu : any_cpu) = true;
  const bool gpu_here = wants_gpu && cuda_device_available(&report.gpu_skip_reason);
  if (!wants_gpu) report.gpu_skip_reason = "not used: no GPU stage selected";
  // Nothing here could use the inputs (every stage needs the GPU this machine lacks, no file
  // was asked for, none given to check): say so now, not after generating gigabytes of inputs
  // and their oracle.
  if (wants_gpu && !gpu_here && !any_cpu && opt.dump_dir.empty() && opt.json_path.empty() &&
      opt.inputs_dir.empty()) {
    note(opt, "no CUDA device (" + report.gpu_skip_reason + "): GPU stages are skipped, no inputs generated");
    for (const StageDescriptor* s : stages) {
      StageReport r = stage_report_of(*s);
      r.note = no_gpu_note(report, *s);
      report.stages.push_back(std::move(r));
    }
    return report;
  }
  // Before anything large is allocated: a run too big for this machine stops here, with the
  // numbers, instead of being killed by the OOM killer halfway.
  check_host_memory(ladder_host_memory_need(p, int(stages.size()), literal_cpu_stage_runs(p, opt, stages)),
                    probe_host_memory());
  auto t0 = std::chrono::steady_clock::now();
  HostInputs in = opt.inputs_dir.empty() ? make_inputs(p) : load_inputs(p, opt.inputs_dir);
  if (opt.tf32_midpoints) place_between_tf32(in);
  // Loaded inputs checked at the exact tolerance must be exact inputs.
  if (!opt.inputs_dir.empty() && p.distribution == Distribution::Exact) check_exact_inputs(p, in);
  note(opt, std::string(opt.inputs_dir.empty() ? "generated" : "loaded") + " inputs (" +
                format_bytes(4.0 * double(in.x.size())) + " of x)");

  const Reference oracle = linearity_pipeline(p, in);
  // --tf32-midpoints: what a TF32 stage must match, its operands rounded to nearest.
  std::optional<Reference> oracle_rounded;
  if (opt.tf32_midpoints) oracle_rounded = linearity_pipeline(p, tf32_operands(in));
  // Each GPU stage is held to stage_tolerance for its precision (below); two stages are compared
  // with each other at the fp32 one, judged on exact inputs only, where every precision shares
  // exact_tolerance. The fp64 CPU stage: the fp64 rounding bound.
  const Tolerance tol_stage = stage_tolerance(p, oracle);
  const Tolerance tol64 = rounding_tolerance(p, oracle, kFp64UnitRoundoff);
  note(opt, "oracle: linearity identity in fp64 (" +
                std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) +
                " s with input generation)");
  if (!opt.dump_dir.empty()) dump_inputs(p, in, oracle, opt.dump_dir);

  std::unique_ptr<GpuSession> gpu;
  LoopState state;  // a sticky error of the CUB baseline stops the GPU stages too
  if (wants_gpu) {
    if (gpu_here) {
      report.device = device_description();
      report.fp32_peak_tflops = fp32_peak_tflops(&report.fp32_peak_formula);
      report.dram_peak_gbps = dram_peak_gbps(&report.dram_peak_formula);
      note(opt, "device: " + report.device);
      int dev = 0, optin = 0;
      CUDA_CHECK(cudaGetDevice(&dev));
      CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
      const size_t smem = shared_memory_per_block_limit();
      note(opt, "shared memory per block: " + std::to_string(smem / 1024) + " KiB opt-in" +
                    (smem < size_t(optin) ? std::string(" (lowered by ") + kSharedMemoryLimitVariable + " from " +
                                                std::to_string(optin / 1024) + " KiB)"
                                          : ""));
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
              report.cuda_context_lost = context_lost_message("the CUB baseline", code), state.lost = code;
          }
        }
      }
    } else {
      note(opt, "no CUDA device (" + report.gpu_skip_reason + "): GPU stages are skipped");
    }
  }

  StageModel model{p, opt, report, in, oracle, oracle_rounded, tol_stage, tol64, gpu.get()};
  const LoopOptions loop{bool(gpu), opt.cpu_max_macs, opt.force_cpu, opt.refill_check};
  run_loop(model, stages, loop, state, report.stages);
  if (!opt.json_path.empty()) write_json(report, opt.json_path);
  return report;
}

}  // namespace ladder
