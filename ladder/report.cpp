// Formatting of a LadderReport: the terminal table and the JSON file.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

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

std::string cell(const char* fmt, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

}  // namespace

std::string format_table(const LadderReport& r) {
  const ProblemCost cost = cost_of(r.problem);
  std::ostringstream out;
  out << "problem: " << r.problem.describe() << "\n";
  out << "device:  " << (r.device.empty() ? "none (" + r.gpu_skip_reason + ")" : r.device) << "\n";
  out << "floors:  conv " << cell("%.3g", cost.conv.flops) << " flop; pool reads "
      << cell("%.3g", cost.pool.bytes) << " B; fused minimum reads " << cell("%.3g", cost.fused.bytes)
      << " B\n";
  if (r.fp32_peak_tflops > 0) out << "peak:    FP32 FMA " << r.fp32_peak_formula << "\n";
  out << "oracle:  linearity identity in fp64; tolerances derived in common/tolerance.hpp\n\n";

  char line[512];
  const char* head = "%-22s %10s %12s %10s %9s %9s %10s %9s %8s %10s %10s  %s\n";
  std::snprintf(line, sizeof line, head, "stage", "conv ms", "TFLOP/s", "pool ms", "GB/s", "epi ms",
                "total ms", "x floor", "speedup", "err pooled", "err y", "check");
  out << line;
  if (r.floor_ms > 0) {
    std::snprintf(line, sizeof line, head, "floor: stream-read x", "-", "-", "-",
                  cell("%.0f", 4.0 * double(r.problem.x_elems()) / r.floor_ms / 1e6).c_str(), "-",
                  cell("%.3f", r.floor_ms).c_str(), "1.00", "-", "-", "-", "");
    out << line;
  }
  if (r.cub_pool_ms > 0) {
    std::snprintf(line, sizeof line, head, "baseline: CUB seg. sum", "-", "-",
                  cell("%.3f", r.cub_pool_ms).c_str(), cell("%.0f", cost.pool.bytes / r.cub_pool_ms / 1e6).c_str(),
                  "-", "-", "-", "-", "-", "-", "(pool phase only)");
    out << line;
  }
  double prev_total = NAN;
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
    if (s.computes_conv && s.gpu && r.fp32_peak_tflops > 0 && std::isfinite(conv_like))
      tflops += cell(" (%.0f%%)", 100.0 * cost.conv.flops / conv_like / 1e9 / r.fp32_peak_tflops);
    std::string check = "oracle " + std::string(s.vs_oracle.pass() ? "PASS" : "FAIL");
    if (s.vs_previous) check += ", vs " + s.previous_id + " " + (s.vs_previous->pass() ? "PASS" : "FAIL");
    std::snprintf(line, sizeof line, head, label.c_str(), cell("%.3f", conv_like).c_str(),
                  tflops.c_str(), cell("%.3f", pool).c_str(),
                  cell("%.0f", cost.pool.bytes / pool / 1e6).c_str(),
                  cell("%.3f", phase_time(s, Phase::Epilogue)).c_str(), cell("%.3f", s.total_ms).c_str(),
                  cell("%.1f", r.floor_ms > 0 && s.gpu ? s.total_ms / r.floor_ms : NAN).c_str(),
                  cell("%.2f", prev_total / s.total_ms).c_str(),
                  cell("%.2e", s.vs_oracle.max_abs_pooled).c_str(),
                  cell("%.2e", s.vs_oracle.max_abs_y).c_str(), check.c_str());
    out << line;
    if (!s.vs_oracle.pass()) out << "    vs oracle: " << s.vs_oracle.summary() << "\n";
    if (s.vs_previous && !s.vs_previous->pass())
      out << "    vs " << s.previous_id << ": " << s.vs_previous->summary() << "\n";
    prev_total = s.total_ms;
  }
  out << "\ntimes: median of repetitions (CUDA events, L2 flushed before each); fused stages show their "
         "whole launch under conv ms; TFLOP/s = convT flops / that time (% of the FP32 FMA peak);\n"
         "x floor = total / streaming read of x; speedup = previous stage's total / this total\n";
  return out.str();
}

void write_json(const LadderReport& r, const std::string& path) {
  using nlohmann::json;
  const Problem& p = r.problem;
  const ProblemCost c = cost_of(p);
  auto pair = [](const Pair& v) { return json::array({v.h, v.w}); };
  auto phase_cost = [](const PhaseCost& pc) { return json{{"bytes", pc.bytes}, {"flops", pc.flops}}; };
  auto agreement = [](const Agreement& a) {
    return json{{"pass", a.pass()}, {"max_abs_pooled", a.max_abs_pooled}, {"max_abs_y", a.max_abs_y},
                {"worst_ratio_to_tolerance", a.worst_ratio}, {"nan_count", a.nan_count}};
  };
  json j;
  j["problem"] = {{"batch", p.batch}, {"in_channels", p.in_channels}, {"out_channels", p.out_channels},
                  {"in_h", p.in_h}, {"in_w", p.in_w}, {"kernel_size", pair(p.kernel_size)},
                  {"stride", pair(p.stride)}, {"padding", pair(p.padding)},
                  {"output_padding", pair(p.output_padding)}, {"dilation", pair(p.dilation)},
                  {"groups", p.groups}, {"scale", p.scale}, {"distribution", to_string(p.distribution)},
                  {"seed", p.seed}, {"out_h", p.out_h()}, {"out_w", p.out_w()}};
  j["cost"] = {{"conv", phase_cost(c.conv)}, {"pool", phase_cost(c.pool)},
               {"epilogue", phase_cost(c.epilogue)}, {"fused", phase_cost(c.fused)}};
  j["device"] = r.device;
  j["floor_ms"] = r.floor_ms;
  j["fp32_peak_tflops"] = r.fp32_peak_tflops;
  j["fp32_peak_formula"] = r.fp32_peak_formula;
  j["floor_gbps"] = r.floor_ms > 0 ? 4.0 * double(p.x_elems()) / r.floor_ms / 1e6 : 0.0;
  j["cub_pool_ms"] = r.cub_pool_ms;
  if (!r.cub_note.empty()) j["cub_note"] = r.cub_note;
  j["stages"] = json::array();
  for (const StageReport& s : r.stages) {
    json js{{"id", s.id},   {"name", s.name}, {"idea", s.idea},
            {"gpu", s.gpu}, {"ran", s.ran},   {"note", s.note}, {"computes_conv", s.computes_conv}};
    if (s.ran) {
      json phases = json::array();
      for (const auto& [ph, ms] : s.phase_ms) phases.push_back({{"phase", to_string(ph)}, {"ms", ms}});
      js["phases"] = phases;
      js["total_ms"] = s.total_ms;
      js["vs_oracle"] = agreement(s.vs_oracle);
      if (s.vs_previous) js["vs_previous"] = agreement(*s.vs_previous), js["previous_id"] = s.previous_id;
      if (r.floor_ms > 0 && s.gpu) js["multiple_of_floor"] = s.total_ms / r.floor_ms;
    }
    j["stages"].push_back(js);
  }
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write JSON results to '" + path + "'");
  f << j.dump(2) << "\n";
  if (!f) throw std::runtime_error("error while writing JSON results to '" + path + "'");
}

}  // namespace ladder
