// The problem-74 ladder's table and JSON (runner.hpp).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "device.hpp"  // format_bytes
#include "provenance_report.hpp"
#include "runner.hpp"

namespace ladder::p74 {

namespace {

std::string check_cell(const RungResult& g) {
  if (!g.checked) return "unchecked";
  char buf[80];
  std::snprintf(buf, sizeof buf, "%s %.3g", g.check_passed() ? "PASS" : "FAIL", g.worst_ratio());
  std::string s = buf;
  if (g.forward_check && g.forward_check->argmax_failures > 0)
    s += ", " + std::to_string(g.forward_check->argmax_failures) + " bad argmax";
  if (g.forward_check && g.forward_check->argmax_differs > 0)
    s += ", " + std::to_string(g.forward_check->argmax_differs) + " near-ties";
  return s;
}

std::string phase_cell(const RungResult& g) {
  std::string s;
  char buf[64];
  for (const auto& [name, ms] : g.phase_ms) {
    std::snprintf(buf, sizeof buf, "%s%s %.3f", s.empty() ? "" : ", ", name.c_str(), ms);
    s += buf;
  }
  return s.empty() ? "-" : s;
}

nlohmann::json agreement_json(const Agreement& a) {
  return {{"pass", a.pass()},           {"worst_ratio", a.worst_ratio}, {"max_abs", a.max_abs},
          {"failures", a.failures},     {"nan_count", a.nan_count},     {"count", a.count},
          {"worst_index", a.worst_index}};
}

}  // namespace

std::string format_table(const TrackReport& r) {
  std::ostringstream o;
  const Problem74& p = r.problem;
  char buf[600];
  o << "problem 74 (ConvTranspose3d -> LeakyReLU -> x multiplier -> LeakyReLU -> MaxPool3d), forward and backward\n"
    << "problem: " << p.describe() << "\n";
  std::snprintf(buf, sizeof buf,
                "sizes:   conv output %lld elements, pooled %lld; forward %.4g multiply-adds (taps inside the output); "
                "backward %.4g (only the positions that are some window's argmax, grad_x and grad_weight; saved state "
                "from rung %s)\n",
                (long long)p.conv_elems(), (long long)p.out_elems(), p.conv_macs(), r.backward_macs,
                r.saved_from.empty() ? "-" : r.saved_from.c_str());
  o << buf;
  if (!r.device.empty()) {
    std::snprintf(buf, sizeof buf,
                  "device:  %s\nfloors:  forward: memory %.3f ms (read x %.3f + write out, argmax, y_saved %.3f, "
                  "measured), compute %.3f ms (2 flops per multiply-add at the FP32 FMA peak, %.1f TFLOP/s)\n"
                  "         backward: memory %.3f ms (read grad_out, argmax, y_saved, x, weight %.3f + write grad_x, "
                  "grad_weight %.3f, measured), compute %.3f ms\n",
                  r.device.c_str(), r.fwd_memory_floor_ms(), r.fwd_read_ms, r.fwd_write_ms, r.fwd_compute_floor_ms(),
                  r.fp32_peak_tflops, r.bwd_memory_floor_ms(), r.bwd_read_ms, r.bwd_write_ms, r.bwd_compute_floor_ms());
    o << buf;
  } else {
    o << "device:  none (" << r.gpu_skip_reason << ")\n";
  }
  o << describe_provenance(r.provenance);
  o << "timing:  median of " << r.reps << " after " << r.warmup << " warm-up" << (r.flush_l2 ? ", L2 flushed" : "")
    << "; check: fp64 oracles, elementwise, derived tolerance (oracle limit " << r.oracle_max_macs
    << " multiply-adds)\n\n";
  std::snprintf(buf, sizeof buf, "%-20s %-8s %10s %15s %7s %10s %6s  %-28s %s\n", "rung", "pass", "ms", "min-max",
                "x floor", "fwd+bwd ms", "repeat", "check (worst/tol)", "phases (ms)");
  o << buf;
  const double fwd_floor = std::max(r.fwd_memory_floor_ms(), r.fwd_compute_floor_ms());
  const double bwd_floor = std::max(r.bwd_memory_floor_ms(), r.bwd_compute_floor_ms());
  for (const RungResult& g : r.rungs) {
    const std::string label = g.id + " " + g.name;
    if (!g.ran) {
      std::snprintf(buf, sizeof buf, "%-20s %-8s %s\n", label.c_str(), g.pass.c_str(), g.note.c_str());
      o << buf;
      continue;
    }
    const bool fwd = g.pass == "forward";
    const double floor = fwd ? fwd_floor : bwd_floor;
    char range[40] = "-", ratio[24] = "-", total[24] = "-";
    if (g.gpu) std::snprintf(range, sizeof range, "%.3f-%.3f", g.ms.min, g.ms.max);
    if (g.gpu && floor > 0) std::snprintf(ratio, sizeof ratio, "%.2f", g.ms.median / floor);
    if (g.gpu && !fwd && r.fastest_forward_ms > 0)
      std::snprintf(total, sizeof total, "%.3f", r.fastest_forward_ms + g.ms.median);
    const char* repeat = g.repeatable < 0 ? "-" : g.repeatable ? "yes" : "NO";
    std::snprintf(buf, sizeof buf, "%-20s %-8s %10.3f %15s %7s %10s %6s  %-28s %s\n", label.c_str(), g.pass.c_str(),
                  g.ms.median, range, ratio, total, repeat, check_cell(g).c_str(), phase_cell(g).c_str());
    o << buf;
  }
  o << "\nx floor: time over the larger of the pass's memory and compute floors. fwd+bwd ms: the fastest forward GPU "
       "rung that passed plus this backward rung. repeat: a second run gave the same bits (NO is expected only of "
       "rungs that are not deterministic: float atomics). near-ties: windows where the rung picked another position "
       "whose value the rung's precision cannot tell from the maximum (fp32; tf32 for a tensor-core rung, held to the "
       "TF32 bound).\n";
  for (const RungResult& g : r.rungs)
    if (g.ran && !g.checked_on.empty() && g.checked_on != "every element")
      o << "check of " << g.id << " " << g.pass << ": " << g.checked_on << "\n";
  return o.str();
}

void write_json(const TrackReport& r, const std::string& path) {
  using nlohmann::json;
  const Problem74& p = r.problem;
  auto triple = [](const Triple& t) { return json::array({t.d, t.h, t.w}); };
  json j;
  j["schema"] = "p74_ladder/1";
  j["problem"] = {{"batch", p.batch},
                  {"in_channels", p.in_channels},
                  {"out_channels", p.out_channels},
                  {"input_size", triple(p.in_size)},
                  {"kernel_size", triple(p.conv.kernel_size)},
                  {"stride", triple(p.conv.stride)},
                  {"padding", triple(p.conv.padding)},
                  {"output_padding", triple(p.conv.output_padding)},
                  {"dilation", triple(p.conv.dilation)},
                  {"groups", p.conv.groups},
                  {"negative_slope", p.negative_slope},
                  {"pool_kernel_size", triple(p.pool.kernel_size)},
                  {"pool_stride", triple(p.pool.effective_stride())},
                  {"pool_padding", triple(p.pool.padding)},
                  {"pool_dilation", triple(p.pool.dilation)},
                  {"ceil_mode", p.pool.ceil_mode},
                  {"distribution", to_string(p.distribution)},
                  {"seed", p.seed},
                  {"conv_size", triple(p.conv_size())},
                  {"output_size", triple(p.out_size())},
                  {"conv_macs", p.conv_macs()},
                  {"backward_macs", r.backward_macs},
                  {"describe", p.describe()}};
  j["provenance"] = provenance_to_json(r.provenance);
  j["timing"] = {{"warmup", r.warmup}, {"reps", r.reps}, {"flush_l2", r.flush_l2}, {"statistic", "median"}};
  j["device"] = r.device;
  j["oracle_max_macs"] = r.oracle_max_macs;
  j["saved_from"] = r.saved_from;
  j["fastest_forward_ms"] = r.fastest_forward_ms;
  j["floors"] = {{"fp32_peak_tflops", r.fp32_peak_tflops},
                 {"forward",
                  {{"read_ms", r.fwd_read_ms},
                   {"write_ms", r.fwd_write_ms},
                   {"memory_floor_ms", r.fwd_memory_floor_ms()},
                   {"memory_bytes", double(p.x_elems() + 3 * p.out_elems()) * 4.0},
                   {"compute_floor_ms", r.fwd_compute_floor_ms()}}},
                 {"backward",
                  {{"read_ms", r.bwd_read_ms},
                   {"write_ms", r.bwd_write_ms},
                   {"memory_floor_ms", r.bwd_memory_floor_ms()},
                   {"memory_bytes", double(3 * p.out_elems() + 2 * (p.x_elems() + p.weight_elems())) * 4.0},
                   {"compute_floor_ms", r.bwd_compute_floor_ms()}}}};
  json rungs = json::array();
  for (const RungResult& g : r.rungs) {
    json e = {{"id", g.id},     {"name", g.name},     {"idea", g.idea},
              {"direction", g.pass}, {"gpu", g.gpu},       {"ran", g.ran},
              {"failed", g.failed}, {"note", g.note}, {"deterministic", g.deterministic},
              {"precision", precision_name(g.precision)}};
    if (g.ran) {
      e["ms"] = g.ms.median;
      e["ms_min"] = g.ms.min;
      e["ms_max"] = g.ms.max;
      e["device_bytes"] = g.device_bytes;
      e["repeatable"] = g.repeatable < 0 ? json(nullptr) : json(g.repeatable == 1);
      json phases = json::object();
      for (const auto& [name, ms] : g.phase_ms) phases[name] = ms;
      e["phase_ms"] = phases;
      json c = {{"checked", g.checked}, {"on", g.checked_on}, {"pass", g.checked ? json(g.check_passed()) : json(nullptr)}, {"worst_ratio", g.worst_ratio()}};
      if (g.forward_check) {
        const ForwardCheck& f = *g.forward_check;
        c["out"] = agreement_json(f.out);
        c["y_saved"] = agreement_json(f.y);
        c["argmax_failures"] = f.argmax_failures;
        c["argmax_differs"] = f.argmax_differs;
        c["first_bad_argmax"] = f.first_bad_argmax;
      }
      if (g.grad_check) {
        c["grad_x"] = agreement_json(g.grad_check->x);
        c["grad_weight"] = agreement_json(g.grad_check->weight);
        c["grad_bias"] = agreement_json(g.grad_check->bias);
        c["grad_multiplier"] = agreement_json(g.grad_check->multiplier);
      }
      e["check"] = c;
      if (g.pass == "backward" && g.gpu && r.fastest_forward_ms > 0) e["fwd_plus_bwd_ms"] = r.fastest_forward_ms + g.ms.median;
    }
    rungs.push_back(e);
  }
  j["rungs"] = rungs;
  j["all_passed"] = r.all_passed();
  write_json_file(j, path);
}

}  // namespace ladder::p74
