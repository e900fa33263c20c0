// The problem-74 track's ladder (runner.hpp): one rung run once, and the whole track timed and
// checked. Helpers (device buffers, timing, checks) are in runner_support.cu; the table and the
// JSON in runner_report.cpp.
#include "runner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "cuda_check.hpp"
#include "cuda_context.hpp"
#include "device.hpp"
#include "event_marks.hpp"
#include "runner_support.hpp"
#include "streaming_read.cuh"

namespace ladder::p74 {

using detail::DeviceBackwardIo;
using detail::DeviceForwardOut;
using detail::DeviceInputsCopy;

ForwardResult run_forward_once(const Rung& rung, const Problem74& p, const Inputs& in) {
  if (!rung.has_forward()) throw std::invalid_argument("rung " + rung.label() + " has no forward pass");
  detail::require_supported(rung, p);
  if (rung.cpu_forward) return rung.cpu_forward(p, in);
  const DeviceInputsCopy dev(in);
  const DeviceForwardOut out(size_t(p.out_elems()));
  const DeviceBuffer<unsigned char> ws = detail::workspace(rung.forward_workspace(p), rung);
  cudaStream_t stream = nullptr;
  out.poison(stream);
  rung.forward({p, dev.view(), out.out.get(), out.argmax.get(), out.y.get(), ws.get(), stream});
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return out.fetch();
}

GradResult run_backward_once(const Rung& rung, const Problem74& p, const Inputs& in, const Saved& saved,
                             const std::vector<float>& grad_out) {
  if (!rung.has_backward()) throw std::invalid_argument("rung " + rung.label() + " has no backward pass");
  detail::require_supported(rung, p);
  if (rung.cpu_backward) return rung.cpu_backward(p, in, saved, grad_out);
  const DeviceInputsCopy dev(in);
  const DeviceBackwardIo io(p, saved, grad_out);
  const DeviceBuffer<unsigned char> ws = detail::workspace(rung.backward_workspace(p), rung);
  cudaStream_t stream = nullptr;
  io.poison(stream);
  rung.backward({p, dev.view(), io.grad_out.get(), io.argmax.get(), io.y_saved.get(), io.grad_x.get(),
                 io.grad_weight.get(), io.grad_bias.get(), io.grad_multiplier.get(), ws.get(), stream});
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return io.fetch();
}

namespace {

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDA_CHECK(cudaStreamCreate(&s)); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

/// What the GPU half of run_track holds: inputs and forward outputs on the device, the L2 flush.
struct GpuState {
  DeviceInputsCopy dev;
  DeviceForwardOut fwd;
  std::unique_ptr<L2Flush> flush;
  Stream stream;
  GpuState(const Problem74& p, const Inputs& in, bool flush_l2)
      : dev(in), fwd(size_t(p.out_elems())), flush(flush_l2 ? std::make_unique<L2Flush>() : nullptr) {}
};

/// The four floors: streaming reads and memsets of buffers of each pass's size (runner.hpp).
void measure_floors(TrackReport& r, GpuState& g, const TrackOptions& opt) {
  const Problem74& p = r.problem;
  const int64_t pool = p.out_elems(), xw = p.x_elems() + p.weight_elems();
  const int64_t bwd_read = 3 * pool + xw;  // grad_out, argmax, y_saved, x, weight
  DeviceBuffer<float> scratch(size_t(std::max({bwd_read, 3 * pool, xw})), "the floor measurements' buffer");
  DeviceBuffer<float> sink(1, "sink");
  cudaStream_t s = g.stream.s;
  auto read = [&](const float* data, int64_t n) {
    const StreamingReadLaunch launch = plan_streaming_read(n);
    return time_median([&] { launch(data, n, sink.get(), s); }, opt.warmup, opt.reps, g.flush.get(), s);
  };
  auto write = [&](int64_t n) {
    return time_median([&] { CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0, size_t(n) * 4, s)); }, opt.warmup,
                               opt.reps, g.flush.get(), s);
  };
  r.fwd_read_ms = read(g.dev.x.get(), p.x_elems());
  r.fwd_write_ms = write(3 * pool);
  r.bwd_read_ms = read(scratch.get(), bwd_read);
  r.bwd_write_ms = write(xw);
}

RungResult start(const Rung& rung, const char* pass) {
  RungResult r;
  r.id = rung.id, r.name = rung.name, r.idea = rung.idea, r.pass = pass;
  r.gpu = !rung.is_cpu(), r.deterministic = rung.deterministic;
  return r;
}

/// Why a pass of `rung` does not run here, or "" when it does.
std::string skip_reason(const Rung& rung, const Problem74& p, double macs, bool gpu, const TrackOptions& opt) {
  const std::string why = rung.why_unsupported(p);
  if (!why.empty()) return "skipped: " + why;
  if (rung.is_cpu() && macs > opt.cpu_max_macs && !opt.force_cpu) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "skipped: %.3g multiply-adds exceed --cpu-max-macs %.3g (--force-cpu runs it)", macs,
                  opt.cpu_max_macs);
    return buf;
  }
  if (!rung.is_cpu() && !gpu) return "not run: no CUDA device";
  return "";
}

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string samples_text(const std::vector<int64_t>& s, int64_t batch) {
  if (int64_t(s.size()) == batch) return "every element";
  std::string t = "samples";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : " ") + std::to_string(s[i]);
  return t + " of " + std::to_string(batch) + ", every element of each";
}

}  // namespace

TrackReport run_track(const Problem74& p, const TrackOptions& opt) {
  p.validate();
  std::vector<const Rung*> chosen;
  if (opt.rung_ids.empty()) chosen = rungs();
  for (const std::string& id : opt.rung_ids) chosen.push_back(&find_rung(id));
  const Rung* named_forward = opt.forward_for_backward.empty() ? nullptr : &find_rung(opt.forward_for_backward);
  if (named_forward && !named_forward->has_forward())
    throw std::invalid_argument("--forward-for-backward: rung " + named_forward->label() + " has no forward pass");
  TrackReport report;
  report.problem = p;
  report.provenance = collect_provenance(nvcc_version());
  report.warmup = opt.warmup, report.reps = opt.reps, report.flush_l2 = opt.flush_l2;
  report.oracle_max_macs = opt.oracle_max_macs;
  auto say = [&](const std::string& s) {
    if (opt.progress) std::cerr << "[p74] " << s << std::endl;
  };
  say("inputs for " + p.describe());
  const Inputs in = make_inputs(p);
  const std::vector<float> grad_out = make_grad_out(p);

  const bool gpu = cuda_device_available(&report.gpu_skip_reason);
  std::unique_ptr<GpuState> g;
  if (gpu) {
    report.device = device_description();
    report.fp32_peak_tflops = fp32_peak_tflops();
    g = std::make_unique<GpuState>(p, in, opt.flush_l2);
    measure_floors(report, *g, opt);
    say("floors: forward read " + std::to_string(report.fwd_read_ms) + " + write " +
        std::to_string(report.fwd_write_ms) + " ms; backward read " + std::to_string(report.bwd_read_ms) +
        " + write " + std::to_string(report.bwd_write_ms) + " ms");
  }
  cudaStream_t stream = g ? g->stream.s : nullptr;
  bool lost = false;  // a sticky CUDA error: nothing more can run on the GPU
  auto fail = [&](RungResult& r, const std::exception& e) {
    r.failed = true;
    r.note = e.what();
    say("  failed: " + r.note);
    if (gpu && r.gpu && sticky_cuda_error() != cudaSuccess) lost = true;
  };
  // After a sticky CUDA error the remaining rungs are listed, each saying why it did not run.
  auto lost_note = [&] {
    return "not run: an earlier rung left the CUDA context unusable (" + cuda_error_text(sticky_cuda_error()) + ")";
  };

  // Forward rungs. The saved state for the backward: the named rung's, else the fastest GPU
  // rung's that passed, else rung 00's.
  const std::vector<int64_t> samples = samples_to_check(p, opt.oracle_max_macs, opt.max_samples);
  std::vector<ForwardOracle> oracles;  // filled by the first check, reused by the others
  std::unique_ptr<Saved> saved;
  double saved_ms = 0;
  for (const Rung* rung : chosen) {
    if (!rung->has_forward()) continue;
    RungResult r = start(*rung, "forward");
    r.note = lost ? lost_note() : skip_reason(*rung, p, p.conv_macs(), gpu, opt);
    if (r.note.empty()) {
      say("rung " + rung->label() + " (forward)...");
      try {
        ForwardResult got;
        if (!r.gpu) {
          const auto t0 = std::chrono::steady_clock::now();
          got = rung->cpu_forward(p, in);
          const double ms = elapsed_ms(t0);
          r.ms = {ms, ms, ms};
        } else {
          const DeviceBuffer<unsigned char> ws = detail::workspace(rung->forward_workspace(p), *rung);
          const ForwardArgs args{p, g->dev.view(), g->fwd.out.get(), g->fwd.argmax.get(),
                                 g->fwd.y.get(), ws.get(), stream};
          auto run = [&](PhaseMarks* m) {
            ForwardArgs a = args;
            a.marks = m;
            rung->forward(a);
          };
          r.ms = time_phases<PhaseMarks>(run, [&] { g->fwd.poison(stream); }, opt.warmup, opt.reps, g->flush.get(),
                                         stream, &r.phase_ms);
          got = g->fwd.fetch();
          g->fwd.poison(stream);  // once more, untimed: does it repeat bit for bit?
          run(nullptr);
          CUDA_CHECK(cudaStreamSynchronize(stream));
          r.repeatable = bitwise_equal(got, g->fwd.fetch()) ? 1 : 0;
          r.device_bytes = g->dev.bytes() + g->fwd.bytes() + double(ws.bytes());
        }
        r.ran = true;
        r.checked = !samples.empty();
        r.checked_on = r.checked ? samples_text(samples, p.batch)
                                 : "unchecked: one sample's oracle exceeds --oracle-max-macs";
        if (r.checked) r.forward_check = check_forward_samples(p, in, got, samples, &oracles);
        say("  " + std::to_string(r.ms.median) + " ms; " + (r.checked ? r.forward_check->summary() : r.checked_on));
        const bool good = r.check_passed();
        if (r.gpu && good && (report.fastest_forward_ms == 0 || r.ms.median < report.fastest_forward_ms))
          report.fastest_forward_ms = r.ms.median;
        const bool take =
            named_forward ? named_forward->id == r.id
                          : good && (!saved || (r.gpu && (report.saved_from == "00" || r.ms.median < saved_ms)));
        if (take) {
          saved = std::make_unique<Saved>(got.saved());
          saved_ms = r.ms.median;
          report.saved_from = r.id;
          if (!good) {  // only a named rung is taken without a passing check: say so everywhere
            report.saved_from += r.checked ? " (which failed its check)" : " (unchecked)";
            say("  warning: the backward takes its saved state from rung " + report.saved_from);
          }
        }
      } catch (const std::exception& e) {
        fail(r, e);
      }
    }
    report.rungs.push_back(r);
  }

  std::vector<ForwardOracle>().swap(oracles);  // their memory, before the backward oracle's

  // Backward rungs, all from the same saved state and grad_out.
  const bool any_backward =
      std::any_of(chosen.begin(), chosen.end(), [](const Rung* r) { return r->has_backward(); });
  std::string no_saved;
  if (any_backward && !saved && !lost) {
    const std::string fallback = gpu ? "03" : "00";
    const Rung& f = named_forward ? *named_forward : find_rung(fallback);
    const std::string why = skip_reason(f, p, p.conv_macs(), gpu, opt);
    say("saved state for the backward from rung " + f.label() + " (run once, untimed)");
    try {
      if (!why.empty()) throw std::runtime_error("rung " + f.label() + " " + why);
      saved = std::make_unique<Saved>(run_forward_once(f, p, in).saved());
      report.saved_from = f.id;
    } catch (const std::exception& e) {
      no_saved = std::string("not run: no saved state for the backward (") + e.what() + ")";
    }
  }
  if (saved) report.backward_macs = backward_macs(p, *saved);
  std::unique_ptr<DeviceBackwardIo> io;
  std::unique_ptr<Grads> ref;
  std::unique_ptr<GradTolerance> tol;
  for (const Rung* rung : chosen) {
    if (!rung->has_backward()) continue;
    RungResult r = start(*rung, "backward");
    // Without a saved state, a rung that could not run anyway says why (no CUDA device, an
    // unsupported problem) rather than blaming the missing state. (The CPU rung's cost is known
    // only from the state: 0 here passes the --cpu-max-macs test.)
    r.note = lost ? lost_note() : skip_reason(*rung, p, saved ? report.backward_macs : 0, gpu, opt);
    if (!lost && !saved && r.note.empty()) r.note = no_saved;
    if (r.note.empty()) {
      say("rung " + rung->label() + " (backward, saved state from rung " + report.saved_from + ")...");
      try {
        GradResult got;
        if (!r.gpu) {
          const auto t0 = std::chrono::steady_clock::now();
          got = rung->cpu_backward(p, in, *saved, grad_out);
          const double ms = elapsed_ms(t0);
          r.ms = {ms, ms, ms};
        } else {
          if (!io) io = std::make_unique<DeviceBackwardIo>(p, *saved, grad_out);
          const DeviceBuffer<unsigned char> ws = detail::workspace(rung->backward_workspace(p), *rung);
          const BackwardArgs args{p,
                                  g->dev.view(),
                                  io->grad_out.get(),
                                  io->argmax.get(),
                                  io->y_saved.get(),
                                  io->grad_x.get(),
                                  io->grad_weight.get(),
                                  io->grad_bias.get(),
                                  io->grad_multiplier.get(),
                                  ws.get(),
                                  stream};
          auto run = [&](PhaseMarks* m) {
            BackwardArgs a = args;
            a.marks = m;
            rung->backward(a);
          };
          r.ms = time_phases<PhaseMarks>(run, [&] { io->poison(stream); }, opt.warmup, opt.reps, g->flush.get(),
                                         stream, &r.phase_ms);
          got = io->fetch();
          io->poison(stream);
          run(nullptr);
          CUDA_CHECK(cudaStreamSynchronize(stream));
          r.repeatable = bitwise_equal(got, io->fetch()) ? 1 : 0;
          r.device_bytes = g->dev.bytes() + io->bytes() + double(ws.bytes());
        }
        r.ran = true;
        r.checked = report.backward_macs <= opt.oracle_max_macs;
        if (r.checked && !ref) {
          say("  fp64 backward oracle...");
          ref = std::make_unique<Grads>(backward(p, in, *saved, grad_out));
          tol = std::make_unique<GradTolerance>(grad_tolerance(p, *ref));
        }
        r.checked_on = r.checked ? "every element" : "unchecked: the backward exceeds --oracle-max-macs";
        if (r.checked) r.grad_check = check_grads(*ref, *tol, got);
        if (r.checked && r.gpu && opt.refill_check && r.grad_check->pass()) {
          // grad_out's buffer refilled with another seed's values, run once: a rung that keeps
          // an earlier answer (a cache keyed on the buffer's address) fails here.
          Problem74 q = p;
          q.seed = p.seed ^ 0x5eed5eedULL;
          const std::vector<float> grad_again = make_grad_out(q);
          CUDA_CHECK(cudaMemcpy(io->grad_out.get(), grad_again.data(), grad_again.size() * sizeof(float),
                                cudaMemcpyHostToDevice));
          const DeviceBuffer<unsigned char> ws = detail::workspace(rung->backward_workspace(p), *rung);
          io->poison(stream);
          rung->backward({p, g->dev.view(), io->grad_out.get(), io->argmax.get(), io->y_saved.get(), io->grad_x.get(),
                          io->grad_weight.get(), io->grad_bias.get(), io->grad_multiplier.get(), ws.get(), stream});
          CUDA_CHECK(cudaStreamSynchronize(stream));
          const GradResult second = io->fetch();
          CUDA_CHECK(cudaMemcpy(io->grad_out.get(), grad_out.data(), grad_out.size() * sizeof(float),
                                cudaMemcpyHostToDevice));  // the next rung sees the first grad_out again
          const Grads ref_again = backward(p, in, *saved, grad_again);
          const auto again = check_grads(ref_again, grad_tolerance(p, ref_again), second);
          if (!again.pass()) {
            r.grad_check = again;
            r.note = "the run on a refilled grad_out (same buffer, another seed) disagrees with its oracle";
          }
        }
        say("  " + std::to_string(r.ms.median) + " ms; " + (r.checked ? r.grad_check->summary() : r.checked_on));
      } catch (const std::exception& e) {
        fail(r, e);
      }
    }
    report.rungs.push_back(r);
  }
  if (lost) say("stopped: the CUDA context is lost (" + cuda_error_text(sticky_cuda_error()) + ")");
  if (!opt.json_path.empty()) write_json(report, opt.json_path);
  return report;
}

}  // namespace ladder::p74
