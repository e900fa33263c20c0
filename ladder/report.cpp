// Formatting of a LadderReport (and of a PoolOnlyReport): the terminal table and the JSON file.
//
// JSON schema (write_json; tooling/results/ladder_results.py reads it). Times in ms, bytes in B.
//   problem      {batch, in_channels, out_channels, in_h, in_w, kernel_size [h, w], stride,
//                 padding, output_padding, dilation, groups, scale, bias_scale, distribution,
//                 seed, out_h, out_w}
//   cost         {conv, pool, epilogue, fused: {bytes, flops}}   (common/model/problem.hpp, cost_of)
//   provenance   {git_commit, git_dirty ("yes"/"no"/"unknown"), nvcc_version,
//                 cuda_runtime_version, driver_cuda_version, driver_release, host_cpu, date_utc}
//   timing       {warmup, reps, flush_l2, statistic: "median"}
//   tolerance    "exact" or "fp32": what the fp32 stages' oracle check used (tolerance.hpp)
//   device, fp32_peak_tflops, fp32_peak_formula, dram_peak_gbps, dram_peak_formula
//   floor_ms, floor_gbps, and floor_ms_min, floor_ms_max where the spread is known
//   cub_pool_ms (0 if not run), cub_pool_ms_min, cub_pool_ms_max (if run), cub_note (if not)
//   cuda_context_lost  (only after a sticky CUDA error: which stage, which error)
//   stages []    {id, name, idea, gpu, ran, failed, note, computes_conv, tensor_cores, and if ran:
//                 phases [{phase, ms, ms_min, ms_max}] (ms: median; a CPU stage's one run),
//                 total_ms, total_ms_min, total_ms_max,
//                 vs_oracle {pass, max_abs_pooled, max_abs_y, worst_ratio_to_tolerance, nan_count},
//                 vs_previous {checked, pass (only if checked), max_abs_pooled, max_abs_y,
//                              worst_ratio_to_tolerance, nan_count}, previous_id,
//                 multiple_of_floor (GPU stages with a floor)}
//
// Pool-only JSON (write_pool_only_json, `ladder --pool-only --json FILE`): problem, provenance
// and timing as above, and
//   mode         "pool_only"
//   tensor       {shape [N, Cout, Hout, Wout], bytes, values, generator, seed, streams,
//                 generate_s, upload_s, host_threads}   (ladder/pool_only.hpp)
//   tolerance    {kind, formula, lambda, u, P}
//   device, gpu_skip_reason (without a GPU), dram_peak_gbps, dram_peak_formula
//   floor_ms, floor_ms_min, floor_ms_max, floor_gbps   (streaming read of the tensor)
//   cub_pool_ms, cub_pool_ms_min, cub_pool_ms_max (0 if not run), cub_check (if run), cub_note
//   cuda_context_lost, all_passed
//   stages []    {id, name, idea, ran, failed, note, and if ran: pool_ms, pool_ms_min,
//                 pool_ms_max, gbps, multiple_of_floor, speedup_vs_previous (not for the first),
//                 check {pass, max_abs_pooled, worst_ratio_to_tolerance, nan_count}}
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "device.hpp"
#include "pool_only.hpp"
#include "provenance_report.hpp"
#include "runner.hpp"

namespace ladder {

namespace {

double phase_time(const StageReport& s, Phase ph) {
  double t = 0;
  bool any = false;
  for (const auto& [p, ms] : s.phase_ms)
    if (p == ph) {
      t += ms;
      any = true;
    }
  return any ? t : NAN;
}

// The time of the phases a stage changes (StageDescriptor::changes) in stage s: their sum where
// s has any of them, else NaN; with no phases named, s's total.
double changed_time(const StageReport& s, const std::vector<Phase>& changes) {
  if (changes.empty()) return s.total_ms;
  double t = 0;
  bool any = false;
  for (Phase ph : changes) {
    const double ms = phase_time(s, ph);
    if (std::isfinite(ms)) t += ms, any = true;
  }
  return any ? t : NAN;
}

// "pool", "conv+pool+fused" or "total": what the speedup of a stage compares.
std::string changes_label(const std::vector<Phase>& changes);

// The previous stage's time over this one's, on the phases this stage changes; NaN for the first.
double speedup_vs_previous(const StageReport* prev, const StageReport& s) {
  if (prev == nullptr) return NAN;
  return changed_time(*prev, s.changes) / changed_time(s, s.changes);
}

std::string changes_label(const std::vector<Phase>& changes) {
  if (changes.empty()) return "total";
  std::string out;
  for (Phase ph : changes) out += (out.empty() ? "" : "+") + std::string(to_string(ph));
  return out;
}

std::string cell(const char* fmt, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// "0.249-0.253": the fastest and slowest repetition; "-" where unknown.
std::string range(const Spread& s) {
  if (!(s.max > 0)) return "-";
  return cell("%.3f", s.min) + "-" + cell("%.3f", s.max);
}


}  // namespace

std::string format_table(const LadderReport& r) {
  const ProblemCost cost = cost_of(r.problem);
  std::ostringstream out;
  const Provenance& pv = r.run.provenance;
  out << "problem: " << r.problem.describe() << "\n";
  out << "device:  " << (r.device.empty() ? "none (" + r.gpu_skip_reason + ")" : r.device) << "\n";
  out << describe_provenance(pv);
  out << "timing:  GPU: median, min and max of " << r.run.reps << " repetitions after " << r.run.warmup
      << " warm-up, L2 " << (r.run.flush_l2 ? "flushed before each" : "not flushed (warm cache)")
      << "; CPU: one run\n";
  out << "floors:  conv " << cell("%.3g", cost.conv.flops) << " flop; pool reads "
      << cell("%.3g", cost.pool.bytes) << " B; fused minimum reads " << cell("%.3g", cost.fused.bytes)
      << " B\n";
  if (r.fp32_peak_tflops > 0) out << "peak:    FP32 FMA " << r.fp32_peak_formula << "\n";
  if (r.dram_peak_gbps > 0) out << "peak:    DRAM " << r.dram_peak_formula << "\n";
  out << "oracle:  linearity identity in fp64; fp32 stages held to the "
      << (r.tolerance == "exact" ? "exact-input tolerance (only the mean's rounding)" : "fp32 rounding tolerance")
      << " derived in common/model/tolerance.hpp\n";
  if (!r.cuda_context_lost.empty()) out << "CUDA:    " << r.cuda_context_lost << "\n";
  out << "\n";

  char line[512];
  const char* head = "%-22s %10s %12s %10s %9s %9s %10s %19s %9s %8s %-15s %10s %10s  %s\n";
  std::snprintf(line, sizeof line, head, "stage", "conv ms", "TFLOP/s", "pool ms", "GB/s", "epi ms",
                "total ms", "min-max", "x floor", "speedup", "on", "err pooled", "err y", "check");
  out << line;
  if (r.floor_ms > 0) {
    std::snprintf(line, sizeof line, head, "floor: stream-read x", "-", "-", "-",
                  cell("%.0f", 4.0 * double(r.problem.x_elems()) / r.floor_ms / 1e6).c_str(), "-",
                  cell("%.3f", r.floor_ms).c_str(), range(r.floor_spread).c_str(), "1.00", "-", "-", "-", "-", "");
    out << line;
  }
  if (r.cub_pool_ms > 0) {
    std::snprintf(line, sizeof line, head, "baseline: CUB seg. sum", "-", "-",
                  cell("%.3f", r.cub_pool_ms).c_str(), cell("%.0f", cost.pool.bytes / r.cub_pool_ms / 1e6).c_str(),
                  "-", "-", range(r.cub_spread).c_str(), "-", "-", "-", "-", "-", "(pool phase only)");
    out << line;
  }
  // A stage's pool phase reads the convT output, or x in a stage that pools before convolving.
  const auto pool_bytes = [&](const StageReport& s) {
    return s.computes_conv ? cost.pool.bytes : 4.0 * double(r.problem.x_elems());
  };
  const StageReport* prev = nullptr;
  for (const StageReport& s : r.stages) {
    const std::string label = s.id + " " + s.name;
    if (!s.ran) {
      out << "  " << label << ": " << s.note << "\n";
      continue;
    }
    const double conv = phase_time(s, Phase::Conv), pool = phase_time(s, Phase::Pool);
    // Throughput of the convolution's arithmetic: its own phase, or the whole fused launch.
    const double conv_like = std::isfinite(conv) ? conv : phase_time(s, Phase::Fused);
    std::string tflops = s.computes_conv ? cell("%.2f", cost.conv.flops / conv_like / 1e9) : "-";
    if (s.computes_conv && s.tensor_cores)  // the FP32 FMA peak is not its ceiling
      tflops += " (TC)";
    else if (s.computes_conv && s.gpu && r.fp32_peak_tflops > 0 && std::isfinite(conv_like))
      tflops += cell(" (%.0f%%)", 100.0 * cost.conv.flops / conv_like / 1e9 / r.fp32_peak_tflops);
    std::string check = "oracle " + std::string(s.vs_oracle.pass() ? "PASS" : "FAIL");
    if (s.vs_previous && s.vs_previous_checked)
      check += ", vs " + s.previous_id + " " + (s.vs_previous->pass() ? "PASS" : "FAIL");
    else if (s.vs_previous)  // information: the oracle checks already bound it
      check += "; vs " + s.previous_id + " |d| " + cell("%.1e", s.vs_previous->max_abs_pooled) + ", " +
               cell("%.1e", s.vs_previous->max_abs_y);
    std::snprintf(line, sizeof line, head, label.c_str(), cell("%.3f", conv_like).c_str(),
                  tflops.c_str(), cell("%.3f", pool).c_str(),
                  cell("%.0f", pool_bytes(s) / pool / 1e6).c_str(),
                  cell("%.3f", phase_time(s, Phase::Epilogue)).c_str(), cell("%.3f", s.total_ms).c_str(),
                  range(s.total_spread).c_str(),
                  cell("%.1f", r.floor_ms > 0 && s.gpu ? s.total_ms / r.floor_ms : NAN).c_str(),
                  cell("%.2f", speedup_vs_previous(prev, s)).c_str(),
                  prev ? changes_label(s.changes).c_str() : "-",
                  cell("%.2e", s.vs_oracle.max_abs_pooled).c_str(),
                  cell("%.2e", s.vs_oracle.max_abs_y).c_str(), check.c_str());
    out << line;
    if (!s.vs_oracle.pass()) out << "    vs oracle: " << s.vs_oracle.summary() << "\n";
    if (s.vs_previous && s.vs_previous_checked && !s.vs_previous->pass())
      out << "    vs " << s.previous_id << ": " << s.vs_previous->summary() << "\n";
    prev = &s;
  }
  out << "\ntimes: median of repetitions (CUDA events); min-max: fastest and slowest repetition of the total; "
         "fused stages show their whole launch under conv ms;\nTFLOP/s = convT flops / that time (% of the FP32 "
         "FMA peak; TC: on tensor cores, whose peak is not the FMA peak); x floor = total / streaming read of x;\nspeedup = the previous stage's time / this stage's "
         "time, both over the phases this stage changes (column \"on\"; total: the whole run);\n"
         "check: PASS/FAIL against the oracle"
      << (r.tolerance == "exact" ? " and, at the same exact tolerance, against the previous stage\n"
                                 : "; |d| = largest difference from the previous stage (pooled, y), for "
                                   "information: the two oracle checks already bound it\n");
  return out.str();
}

namespace {

using nlohmann::json;

json problem_json(const Problem& p) {
  auto pair = [](const Pair& v) { return json::array({v.h, v.w}); };
  return {{"batch", p.batch}, {"in_channels", p.in_channels}, {"out_channels", p.out_channels},
          {"in_h", p.in_h}, {"in_w", p.in_w}, {"kernel_size", pair(p.kernel_size)},
          {"stride", pair(p.stride)}, {"padding", pair(p.padding)},
          {"output_padding", pair(p.output_padding)}, {"dilation", pair(p.dilation)},
          {"groups", p.groups}, {"scale", p.scale}, {"bias_scale", p.bias_scale},
          {"distribution", to_string(p.distribution)},
          {"seed", p.seed}, {"out_h", p.out_h()}, {"out_w", p.out_w()}};
}


json timing_json(const RunRecord& run) {
  return {{"warmup", run.warmup}, {"reps", run.reps}, {"flush_l2", run.flush_l2}, {"statistic", "median"}};
}

json agreement_json(const Agreement& a) {
  return json{{"pass", a.pass()}, {"max_abs_pooled", a.max_abs_pooled}, {"max_abs_y", a.max_abs_y},
              {"worst_ratio_to_tolerance", a.worst_ratio}, {"nan_count", a.nan_count}};
}

}  // namespace

void write_json(const LadderReport& r, const std::string& path) {
  const Problem& p = r.problem;
  const ProblemCost c = cost_of(p);
  auto phase_cost = [](const PhaseCost& pc) { return json{{"bytes", pc.bytes}, {"flops", pc.flops}}; };
  const auto& agreement = agreement_json;
  json j;
  j["problem"] = problem_json(p);
  j["cost"] = {{"conv", phase_cost(c.conv)}, {"pool", phase_cost(c.pool)},
               {"epilogue", phase_cost(c.epilogue)}, {"fused", phase_cost(c.fused)}};
  j["provenance"] = provenance_to_json(r.run.provenance);
  j["timing"] = timing_json(r.run);
  j["tolerance"] = r.tolerance;
  j["device"] = r.device;
  j["floor_ms"] = r.floor_ms;
  if (r.floor_spread.max > 0) j["floor_ms_min"] = r.floor_spread.min, j["floor_ms_max"] = r.floor_spread.max;
  j["fp32_peak_tflops"] = r.fp32_peak_tflops;
  j["fp32_peak_formula"] = r.fp32_peak_formula;
  j["dram_peak_gbps"] = r.dram_peak_gbps;
  j["dram_peak_formula"] = r.dram_peak_formula;
  j["floor_gbps"] = r.floor_ms > 0 ? 4.0 * double(p.x_elems()) / r.floor_ms / 1e6 : 0.0;
  j["cub_pool_ms"] = r.cub_pool_ms;
  if (r.cub_pool_ms > 0) j["cub_pool_ms_min"] = r.cub_spread.min, j["cub_pool_ms_max"] = r.cub_spread.max;
  if (!r.cub_note.empty()) j["cub_note"] = r.cub_note;
  if (!r.cuda_context_lost.empty()) j["cuda_context_lost"] = r.cuda_context_lost;
  j["stages"] = json::array();
  const StageReport* prev = nullptr;  // the last stage that ran
  for (const StageReport& s : r.stages) {
    json js{{"id", s.id},     {"name", s.name}, {"idea", s.idea},         {"gpu", s.gpu},
            {"ran", s.ran},   {"failed", s.failed}, {"note", s.note}, {"computes_conv", s.computes_conv},
            {"tensor_cores", s.tensor_cores}};
    js["changes"] = json::array();
    for (Phase ph : s.changes) js["changes"].push_back(to_string(ph));
    if (s.ran) {
      json phases = json::array();
      for (size_t i = 0; i < s.phase_ms.size(); ++i) {
        json ph{{"phase", to_string(s.phase_ms[i].first)}, {"ms", s.phase_ms[i].second}};
        if (i < s.phase_spread.size()) ph["ms_min"] = s.phase_spread[i].min, ph["ms_max"] = s.phase_spread[i].max;
        phases.push_back(ph);
      }
      js["phases"] = phases;
      js["total_ms"] = s.total_ms;
      js["total_ms_min"] = s.total_spread.min;
      js["total_ms_max"] = s.total_spread.max;
      js["vs_oracle"] = agreement(s.vs_oracle);
      if (s.vs_previous) {
        json vp = agreement(*s.vs_previous);
        vp["checked"] = s.vs_previous_checked;
        if (!s.vs_previous_checked) vp.erase("pass");  // information only: no verdict to read
        js["vs_previous"] = vp;
        js["previous_id"] = s.previous_id;
      }
      if (r.floor_ms > 0 && s.gpu) js["multiple_of_floor"] = s.total_ms / r.floor_ms;
      if (prev) {
        const double speedup = speedup_vs_previous(prev, s);
        if (std::isfinite(speedup)) js["speedup_vs_previous"] = speedup;
      }
      prev = &s;
    }
    j["stages"].push_back(js);
  }
  write_json_file(j, path);
}

// ---- ladder --pool-only (pool_only.hpp) ------------------------------------------------------

std::string format_pool_only_table(const PoolOnlyReport& r) {
  const Problem& p = r.problem;
  const double P = double(p.out_h()) * double(p.out_w());
  std::ostringstream out;
  out << "problem: " << p.describe() << "\n";
  out << "mode:    pool only: each stage's pool phase on a generated (" << p.batch << ", " << p.out_channels << ", "
      << p.out_h() << ", " << p.out_w() << ") fp32 tensor, " << format_bytes(r.tensor_bytes)
      << " (the convT output's shape); the convolution is skipped\n";
  out << "tensor:  t[plane, j] = m[plane] + U[-0.5, 0.5), m[plane] ~ U[-2, 2): uniform01, seed " << p.seed
      << ", streams " << kPoolTensorStream << " and " << kPoolPlaneMeanStream;
  if (r.generate_s > 0)
    out << "; generated with its fp64 plane means in " << cell("%.2f", r.generate_s) << " s (" << r.host_threads
        << " OpenMP threads), uploaded in " << cell("%.2f", r.upload_s) << " s";
  out << "\n";
  out << "device:  " << (r.device.empty() ? "none (" + r.gpu_skip_reason + ")" : r.device) << "\n";
  out << describe_provenance(r.run.provenance);
  out << "timing:  median, min and max of " << r.run.reps << " repetitions after " << r.run.warmup
      << " warm-up, L2 " << (r.run.flush_l2 ? "flushed" : "not flushed (warm cache)") << " and pooled poisoned with NaN before each\n";
  if (r.dram_peak_gbps > 0) out << "peak:    DRAM " << r.dram_peak_formula << "\n";
  out << "check:   pooled against the fp64 plane means, per plane lambda*sqrt(P)*u*mean|t| + u*|mean| with P = "
      << cell("%.0f", P) << ", lambda = " << cell("%.0f", kProbabilisticLambda) << ", u = 2^-24 ("
      << cell("%.3g", kProbabilisticLambda * std::sqrt(P) * kFp32UnitRoundoff) << " x mean|t|; ladder/pool_only.hpp)\n";
  if (!r.cuda_context_lost.empty()) out << "CUDA:    " << r.cuda_context_lost << "\n";
  out << "\n";

  char line[512];
  const char* head = "%-26s %9s %19s %8s %8s %8s %11s %10s  %s\n";
  std::snprintf(line, sizeof line, head, "stage", "pool ms", "min-max", "GB/s", "x floor", "speedup", "err pooled",
                "worst/tol", "check");
  out << line;
  const double floor = r.floor_ms.median;
  auto ms_cell = [](double ms) { return cell("%.4g", ms); };
  auto ms_range = [&](const Spread& s) { return s.max > 0 ? ms_cell(s.min) + "-" + ms_cell(s.max) : std::string("-"); };
  auto gbps = [&](double ms) {
    const double v = r.tensor_bytes / ms / 1e6;
    return cell(v >= 100 ? "%.0f" : "%.3g", v);
  };
  auto multiple = [&](double ms) { return cell("%.2f", floor > 0 ? ms / floor : NAN); };
  auto verdict = [](const Agreement& a) {
    return std::string(a.pass() ? "PASS" : "FAIL") + (a.nan_count ? " (" + std::to_string(a.nan_count) + " NaN)" : "");
  };
  if (floor > 0) {
    std::snprintf(line, sizeof line, head, "floor: stream-read tensor", ms_cell(floor).c_str(),
                  ms_range(r.floor_ms).c_str(), gbps(floor).c_str(), "1.00", "-", "-", "-", "");
    out << line;
  }
  if (r.cub_ran) {
    std::snprintf(line, sizeof line, head, "baseline: CUB seg. sum", ms_cell(r.cub_ms.median).c_str(),
                  ms_range(r.cub_ms).c_str(), gbps(r.cub_ms.median).c_str(), multiple(r.cub_ms.median).c_str(), "-",
                  cell("%.2e", r.cub_check.max_abs_pooled).c_str(), cell("%.3f", r.cub_check.worst_ratio).c_str(),
                  verdict(r.cub_check).c_str());
    out << line;
  } else if (!r.cub_note.empty()) {
    out << "  baseline: CUB seg. sum: not run: " << r.cub_note << "\n";
  }
  double prev = NAN;
  for (const PoolStageReport& s : r.stages) {
    const std::string label = s.id + " " + s.name;
    if (!s.ran) {
      out << "  " << label << ": " << s.note << "\n";
      continue;
    }
    const double ms = s.pool_ms.median;
    std::snprintf(line, sizeof line, head, label.c_str(), ms_cell(ms).c_str(), ms_range(s.pool_ms).c_str(),
                  gbps(ms).c_str(), multiple(ms).c_str(), cell("%.2f", prev / ms).c_str(),
                  cell("%.2e", s.check.max_abs_pooled).c_str(), cell("%.3f", s.check.worst_ratio).c_str(),
                  verdict(s.check).c_str());
    out << line;
    if (!s.check.pass())
      out << "    vs the plane means: worst " << cell("%.3g", s.check.worst_ratio) << "x tolerance at plane "
          << s.check.worst_index << "; " << s.check.nan_count << " NaN (planes never written)\n";
    prev = ms;
  }
  out << "\npool ms: the pool phase alone (from the stage's Pool mark to the end of its work, the zeroing of its "
         "sums included), median; min-max: fastest and slowest repetition;\nGB/s = the tensor's bytes / pool ms; "
         "x floor = pool ms / the streaming read of the same tensor; speedup = the previous stage's pool ms / this "
         "one;\nerr pooled: largest |pooled - mean|; worst/tol: largest |pooled - mean| / tolerance (<= 1 passes)\n";
  return out.str();
}

void write_pool_only_json(const PoolOnlyReport& r, const std::string& path) {
  const Problem& p = r.problem;
  auto spread = [](json& j, const std::string& key, const Spread& s) {
    j[key] = s.median;
    j[key + "_min"] = s.min;
    j[key + "_max"] = s.max;
  };
  auto check = [](const Agreement& a) {
    return json{{"pass", a.pass()}, {"max_abs_pooled", a.max_abs_pooled},
                {"worst_ratio_to_tolerance", a.worst_ratio}, {"nan_count", a.nan_count}};
  };
  json j;
  j["mode"] = "pool_only";
  j["problem"] = problem_json(p);
  j["provenance"] = provenance_to_json(r.run.provenance);
  j["timing"] = timing_json(r.run);
  j["tensor"] = {{"shape", json::array({p.batch, p.out_channels, p.out_h(), p.out_w()})},
                 {"bytes", r.tensor_bytes},
                 {"values", "m[plane] + U[-0.5, 0.5), m[plane] ~ U[-2, 2)"},
                 {"generator", "uniform01"},
                 {"seed", p.seed},
                 {"streams", json::array({kPoolTensorStream, kPoolPlaneMeanStream})},
                 {"generate_s", r.generate_s},
                 {"upload_s", r.upload_s},
                 {"host_threads", r.host_threads}};
  j["tolerance"] = {{"kind", "fp32 plane sum, probabilistic (Higham & Mary)"},
                    {"formula", "lambda*sqrt(P)*u*mean|t| + u*|mean|"},
                    {"lambda", kProbabilisticLambda},
                    {"u", kFp32UnitRoundoff},
                    {"P", p.out_h() * p.out_w()}};
  j["device"] = r.device;
  if (!r.gpu_skip_reason.empty()) j["gpu_skip_reason"] = r.gpu_skip_reason;
  j["dram_peak_gbps"] = r.dram_peak_gbps;
  j["dram_peak_formula"] = r.dram_peak_formula;
  spread(j, "floor_ms", r.floor_ms);
  j["floor_gbps"] = r.floor_ms.median > 0 ? r.tensor_bytes / r.floor_ms.median / 1e6 : 0.0;
  spread(j, "cub_pool_ms", r.cub_ms);
  if (r.cub_ran) j["cub_check"] = check(r.cub_check);
  if (!r.cub_note.empty()) j["cub_note"] = r.cub_note;
  if (!r.cuda_context_lost.empty()) j["cuda_context_lost"] = r.cuda_context_lost;
  j["all_passed"] = r.all_passed();
  j["stages"] = json::array();
  double prev = 0;
  for (const PoolStageReport& s : r.stages) {
    json js{{"id", s.id}, {"name", s.name}, {"idea", s.idea}, {"ran", s.ran}, {"failed", s.failed}, {"note", s.note}};
    if (s.ran) {
      spread(js, "pool_ms", s.pool_ms);
      js["gbps"] = r.tensor_bytes / s.pool_ms.median / 1e6;
      if (r.floor_ms.median > 0) js["multiple_of_floor"] = s.pool_ms.median / r.floor_ms.median;
      if (prev > 0) js["speedup_vs_previous"] = prev / s.pool_ms.median;
      js["check"] = check(s.check);
      prev = s.pool_ms.median;
    }
    j["stages"].push_back(js);
  }
  write_json_file(j, path);
}

}  // namespace ladder
