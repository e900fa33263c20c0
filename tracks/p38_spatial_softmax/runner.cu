#include "runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "cuda_check.hpp"
#include "cuda_context.hpp"
#include "device.hpp"
#include "event_marks.hpp"
#include "provenance_report.hpp"
#include "run_loop.hpp"
#include "rows.hpp"
#include "streaming_read.cuh"

namespace ladder::p38 {

namespace {

/// The inputs on the device.
struct DeviceCopy {
  DeviceBuffer<float> x, weight, bias, scale;
  DeviceCopy(const Inputs& in)
      : x(in.x.size(), "x"), weight(in.weight.size(), "weight"), bias(in.bias.size(), "bias"),
        scale(in.scale.size(), "scale") {
    refill(in);
  }
  /// Copies `in` (same shapes) into the buffers: at construction, and --refill-check's second inputs.
  void refill(const Inputs& in) {
    CUDA_CHECK(cudaMemcpy(x.get(), in.x.data(), x.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(weight.get(), in.weight.data(), weight.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(bias.get(), in.bias.data(), bias.bytes(), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(scale.get(), in.scale.data(), scale.bytes(), cudaMemcpyHostToDevice));
  }
  DeviceInputs view() const { return {x.get(), weight.get(), bias.get(), scale.get()}; }
  double bytes() const { return double(x.bytes() + weight.bytes() + bias.bytes() + scale.bytes()); }
};

/// One untimed run of a GPU rung on a fresh workspace, its output poisoned first; returns the output.
std::vector<float> run_once_on(const Rung& rung, const Problem38& p, const DeviceInputs& in,
                               const DeviceBuffer<float>& out, cudaStream_t stream) {
  const DeviceBuffer<unsigned char> ws = workspace(rung.workspace_bytes(p), rung);
  poison(out, stream);
  rung.run_gpu({p, in, out.get(), ws.get(), stream});
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> host(out.size());
  CUDA_CHECK(cudaMemcpy(host.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
  return host;
}

double max_rel_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    mag = std::max(mag, double(std::fabs(b[i])));
  }
  return mag > 0 ? diff / mag : diff;
}

}  // namespace

Agreement check_rows(const Problem38& p, const Inputs& in, const std::vector<float>& out,
                     const std::vector<int64_t>& rows, Precision precision) {
  const int64_t S = p.spatial();
  if (int64_t(out.size()) != p.out_elems())
    throw std::invalid_argument("check_rows: the output has " + std::to_string(out.size()) + " elements, " +
                                p.describe() + " has " + std::to_string(p.out_elems()));
  Agreement total;
  const bool every_row = int64_t(rows.size()) == p.batch * p.out_channels;
  if (every_row) {  // one oracle over the whole problem pools each sample once
    const Reference ref = reference(p, in);
    return compare(out, ref.out, output_tolerance(p, ref, precision));
  }
  for (int64_t row : rows) {
    const RowCase rc = row_case(p, in, row / p.out_channels, row % p.out_channels);
    const Reference ref = reference(rc.problem, rc.inputs);
    const std::vector<float> mine(out.begin() + row * S, out.begin() + (row + 1) * S);
    total.merge(compare(mine, ref.out, output_tolerance(rc.problem, ref, precision)), row * S);
  }
  return total;
}

std::vector<float> run_rung_once(const Rung& rung, const Problem38& p, const Inputs& in) {
  if (!rung.is_gpu()) return rung.run_cpu(p, in);
  require_supported(rung, p);
  const DeviceCopy dev(in);
  const DeviceBuffer<float> out(size_t(p.out_elems()), "output");
  return run_once_on(rung, p, dev.view(), out, nullptr);
}

double TrackReport::compute_floor_ms() const {
  return fp32_peak_tflops > 0 ? 2.0 * problem.conv_macs() / (fp32_peak_tflops * 1e12) * 1e3 : 0.0;
}

bool TrackReport::all_passed() const {
  for (const RungResult& r : rungs)
    if (r.failed || (r.ran && !r.vs_oracle.pass())) return false;
  return true;
}

namespace {

void say(const TrackOptions& opt, const std::string& s) {
  if (opt.progress) std::cerr << "[p38] " << s << std::endl;
}

/// Problem 38's model for the harness's run loop (run_loop.hpp says what each hook does): one
/// output tensor, checked against the oracle on `rows`.
struct RungModel {
  using Rung = p38::Rung;
  using Result = RungResult;
  using Output = std::vector<float>;
  const Problem38& p;
  const TrackOptions& opt;
  const Inputs& in;
  const std::vector<int64_t>& rows;
  DeviceCopy* dev;                  // null without a CUDA device, as the three below
  const DeviceBuffer<float>* out;
  const L2Flush* flush;
  cudaStream_t stream;
  std::optional<std::pair<Problem38, Inputs>> again = {};  // --refill-check: another seed's inputs

  RungResult start(const Rung& g) const {
    RungResult r;
    r.id = g.id, r.name = g.name, r.idea = g.idea, r.gpu = g.is_gpu();
    r.deterministic = g.deterministic, r.conv_passes = g.conv_passes;
    return r;
  }
  std::string skip_note(Skip why, const Rung& g) const {
    return track_skip_note(why, why == Skip::Unsupported ? g.why_unsupported(p) : "", p.conv_macs(), opt.cpu_max_macs);
  }
  double cpu_macs(const Rung&) const { return p.conv_macs(); }
  void skipped(const Rung&, const RungResult&, const std::string&) const {}
  std::vector<float> run(const Rung& g, RungResult& r, const std::string&) const {
    say(opt, "rung " + g.label() + "...");
    if (!r.gpu) return wall_clock(r.ms, [&] { return g.run_cpu(p, in); });
    const DeviceBuffer<unsigned char> ws = workspace(g.workspace_bytes(p), g);
    r.device_bytes = dev->bytes() + double(out->bytes()) + double(ws.bytes());
    // Output poisoned and L2 flushed before each repetition, outside the timed region.
    const RungArgs args{p, dev->view(), out->get(), ws.get(), stream};
    r.ms = time_pass<PhaseMarks>(g.run_gpu, args, [&] { poison(*out, stream); }, opt.warmup, opt.reps, flush, stream,
                                 &r.phase_ms);
    std::vector<float> host(out->size());
    CUDA_CHECK(cudaMemcpy(host.data(), out->get(), out->bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  void check(const Rung& g, RungResult& r, const std::vector<float>& host) const {
    r.rows_checked = int64_t(rows.size());
    r.vs_oracle = check_rows(p, in, host, rows, g.precision);
  }
  bool passed(const RungResult& r) const { return r.vs_oracle.pass(); }
  void refill(bool other) {
    if (!again) {
      Problem38 q = p;
      q.seed = p.seed ^ 0x5eed5eedULL;
      again.emplace(q, make_inputs(q));
    }
    dev->refill(other ? again->second : in);
  }
  std::vector<float> run_once(const Rung& g) const { return run_once_on(g, p, dev->view(), *out, stream); }
  void check_refilled(const Rung& g, RungResult& r, const std::vector<float>& second) const {
    const Agreement b = check_rows(again->first, again->second, second, rows, g.precision);
    if (!b.pass()) r.vs_oracle = b, r.note = kRefilledDisagrees;
  }
  void compare(RungResult& r, const std::vector<float>& host, const RungResult& prev,
               const std::vector<float>& prev_host) const {
    r.previous_id = prev.id;
    r.max_rel_vs_previous = max_rel_difference(host, prev_host);
  }
  void done(const Rung&, const RungResult& r, const std::vector<float>&, const std::string&) const {
    say(opt, "  " + r.vs_oracle.summary());
  }
  void failed(const Rung&, RungResult& r, const std::string&, const std::exception& e, cudaError_t) const {
    r.note = e.what();
    say(opt, "  failed: " + r.note);
  }
};

}  // namespace

TrackReport run_track(const Problem38& p, const TrackOptions& opt) {
  p.validate();
  std::vector<const Rung*> chosen;
  if (opt.rung_ids.empty()) chosen = rungs();
  for (const std::string& id : opt.rung_ids) chosen.push_back(&find_rung(id));
  TrackReport report;
  report.problem = p;
  report.provenance = collect_provenance(nvcc_version());
  report.warmup = opt.warmup;
  report.reps = opt.reps;
  report.flush_l2 = opt.flush_l2;
  say(opt, "inputs for " + p.describe());
  const Inputs in = make_inputs(p);
  const std::vector<int64_t> rows = rows_to_check(p, opt.full_check_elems, opt.sample_rows);

  const bool gpu = cuda_device_available(&report.gpu_skip_reason);
  std::unique_ptr<DeviceCopy> dev;
  std::unique_ptr<DeviceBuffer<float>> out;
  std::unique_ptr<L2Flush> flush;
  cudaStream_t stream = nullptr;
  if (gpu) {
    report.device = device_description();
    report.fp32_peak_tflops = fp32_peak_tflops();
    dev = std::make_unique<DeviceCopy>(in);
    out = std::make_unique<DeviceBuffer<float>>(size_t(p.out_elems()), "output");
    if (opt.flush_l2) flush = std::make_unique<L2Flush>();
    CUDA_CHECK(cudaStreamCreate(&stream));
    DeviceBuffer<float> sink(1, "sink");
    const StreamingReadLaunch read = plan_streaming_read(p.x_elems());
    report.read_x_ms = time_median([&] { read(dev->x.get(), p.x_elems(), sink.get(), stream); }, opt.warmup,
                                   opt.reps, flush.get(), stream);
    report.write_out_ms = time_median([&] { CUDA_CHECK(cudaMemsetAsync(out->get(), 0, out->bytes(), stream)); },
                                      opt.warmup, opt.reps, flush.get(), stream);
    say(opt, "floors: read x " + std::to_string(report.read_x_ms) + " ms, write the output " +
        std::to_string(report.write_out_ms) + " ms");
  }

  RungModel model{p, opt, in, rows, dev.get(), out.get(), flush.get(), stream};
  LoopState state;
  run_loop(model, chosen, {gpu, opt.cpu_max_macs, opt.force_cpu, opt.refill_check, true}, state, report.rungs);
  if (stream) cudaStreamDestroy(stream);
  if (!opt.json_path.empty()) write_json(report, opt.json_path);
  return report;
}

std::string format_table(const TrackReport& r) {
  std::ostringstream o;
  const Problem38& p = r.problem;
  const double bytes = double(p.x_elems() + p.out_elems()) * 4.0;
  o << "problem 38 (AvgPool3d -> ConvTranspose3d -> clamp -> spatial softmax -> x scale)\n"
    << "problem: " << p.describe() << "\n"
    << "output:  " << p.out_elems() << " elements (" << format_bytes(double(p.out_elems()) * 4)
    << "), softmax rows of S = "
    << p.spatial() << "; convolution " << p.conv_macs() << " multiply-adds\n";
  if (!r.device.empty()) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "device:  %s\nfloors:  memory %.3f ms (read x %.3f + write the output %.3f, %s, measured); "
                  "compute %.3f ms (the convolution at the FP32 FMA peak, %.1f TFLOP/s)\n",
                  r.device.c_str(), r.memory_floor_ms(), r.read_x_ms, r.write_out_ms, format_bytes(bytes).c_str(),
                  r.compute_floor_ms(), r.fp32_peak_tflops);
    o << buf;
  } else {
    o << "device:  none (" << r.gpu_skip_reason << ")\n";
  }
  o << describe_provenance(r.provenance);
  o << "timing:  median of " << r.reps << " after " << r.warmup << " warm-up" << (r.flush_l2 ? ", L2 flushed" : "")
    << "; check: fp64 oracle, elementwise, derived tolerance\n\n";
  char line[300];
  std::snprintf(line, sizeof line, "%-22s %10s %13s %11s %8s %9s %10s %6s %s\n", "rung", "ms", "min-max", "softmax ms",
                "x floor", "TFLOP/s", "GB device", "rows", "oracle (worst/tol)");
  o << line;
  const double floor = std::max(r.memory_floor_ms(), r.compute_floor_ms());
  for (const RungResult& g : r.rungs) {
    if (!g.ran) {
      std::snprintf(line, sizeof line, "%-22s %s\n", (g.id + " " + g.name).c_str(), g.note.c_str());
      o << line;
      continue;
    }
    char range[40];
    std::snprintf(range, sizeof range, "%.3f-%.3f", g.ms.min, g.ms.max);
    const double tflops = 2.0 * p.conv_macs() * g.conv_passes / (g.ms.median * 1e-3) / 1e12;
    char ratio[24] = "-", bytes_gb[24] = "-";
    if (g.gpu && floor > 0) std::snprintf(ratio, sizeof ratio, "%.2f", g.ms.median / floor);
    if (g.gpu) std::snprintf(bytes_gb, sizeof bytes_gb, "%.2f", g.device_bytes / 1e9);
    char softmax[24] = "-";
    for (const auto& [name, ms] : g.phase_ms)
      if (name == "softmax") std::snprintf(softmax, sizeof softmax, "%.3f", ms);
    std::snprintf(line, sizeof line, "%-22s %10.3f %13s %11s %8s %9.1f %10s %6lld %s %.3g\n",
                  (g.id + " " + g.name).c_str(), g.ms.median, g.gpu ? range : "-", softmax, ratio, tflops, bytes_gb,
                  (long long)g.rows_checked, g.vs_oracle.pass() ? "PASS" : "FAIL", g.vs_oracle.worst_ratio);
    o << line;
  }
  o << "\nsoftmax ms: rungs 01-04 time the softmax apart from the pool and convolution before it (CUDA events"
       " between phases); fused rungs have no separate softmax.\nx floor: time over the larger of the memory and"
       " compute floors. TFLOP/s: the convolution's flops "
       "(x2 for a rung that computes it twice) over the whole time. GB device: inputs, output and workspace.\n";
  return o.str();
}

void write_json(const TrackReport& r, const std::string& path) {
  using nlohmann::json;
  const Problem38& p = r.problem;
  auto triple = [](const Triple& t) { return json::array({t.d, t.h, t.w}); };
  json j;
  j["schema"] = "p38_ladder/1";
  j["problem"] = {{"batch", p.batch},
                  {"in_channels", p.in_channels},
                  {"out_channels", p.out_channels},
                  {"input_size", triple(p.in_size)},
                  {"pool_kernel_size", triple(p.pool.kernel_size)},
                  {"pool_stride", triple(p.pool.effective_stride())},
                  {"pool_padding", triple(p.pool.padding)},
                  {"ceil_mode", p.pool.ceil_mode},
                  {"count_include_pad", p.pool.count_include_pad},
                  {"kernel_size", triple(p.conv.kernel_size)},
                  {"stride", triple(p.conv.stride)},
                  {"padding", triple(p.conv.padding)},
                  {"output_padding", triple(p.conv.output_padding)},
                  {"dilation", triple(p.conv.dilation)},
                  {"groups", p.conv.groups},
                  {"clamp_min", p.clamp_min},
                  {"clamp_max", p.clamp_max},
                  {"distribution", to_string(p.distribution)},
                  {"seed", p.seed},
                  {"output_size", triple(p.out_size())},
                  {"conv_macs", p.conv_macs()},
                  {"describe", p.describe()}};
  j["provenance"] = provenance_to_json(r.provenance);
  j["timing"] = {{"warmup", r.warmup}, {"reps", r.reps}, {"flush_l2", r.flush_l2}, {"statistic", "median"}};
  j["device"] = r.device;
  j["floors"] = {{"read_x_ms", r.read_x_ms},
                 {"write_out_ms", r.write_out_ms},
                 {"memory_floor_ms", r.memory_floor_ms()},
                 {"memory_bytes", double(p.x_elems() + p.out_elems()) * 4.0},
                 {"fp32_peak_tflops", r.fp32_peak_tflops},
                 {"compute_floor_ms", r.compute_floor_ms()}};
  json rungs = json::array();
  for (const RungResult& g : r.rungs) {
    json e = {{"id", g.id},         {"name", g.name},       {"idea", g.idea},
              {"gpu", g.gpu},       {"ran", g.ran},         {"failed", g.failed},
              {"note", g.note},     {"deterministic", g.deterministic},
              {"conv_passes", g.conv_passes}};
    if (g.ran) {
      e["ms"] = g.ms.median;
      e["ms_min"] = g.ms.min;
      e["ms_max"] = g.ms.max;
      e["device_bytes"] = g.device_bytes;
      json phases = json::object();
      for (const auto& [name, ms] : g.phase_ms) phases[name] = ms;
      e["phase_ms"] = phases;
      e["rows_checked"] = g.rows_checked;
      e["vs_oracle"] = {{"pass", g.vs_oracle.pass()},        {"worst_ratio", g.vs_oracle.worst_ratio},
                        {"max_abs", g.vs_oracle.max_abs},    {"failures", g.vs_oracle.failures},
                        {"nan_count", g.vs_oracle.nan_count}, {"count", g.vs_oracle.count}};
      if (!g.previous_id.empty()) e["vs_previous"] = {{"id", g.previous_id}, {"max_rel", g.max_rel_vs_previous}};
    }
    rungs.push_back(e);
  }
  j["rungs"] = rungs;
  j["all_passed"] = r.all_passed();
  write_json_file(j, path);
}

}  // namespace ladder::p38
