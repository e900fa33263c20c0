// The problem-74 track's ladder (runner.hpp): one rung run once, and the whole track timed and
// checked. Helpers (device buffers, timing, checks) are in runner_support.cu; the table and the
// JSON in runner_report.cpp.
#include "runner.hpp"

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>

#include "cuda_check.hpp"
#include "cuda_context.hpp"
#include "device.hpp"
#include "event_marks.hpp"
#include "run_loop.hpp"
#include "runner_support.hpp"
#include "streaming_read.cuh"

namespace ladder::p74 {

using detail::DeviceBackwardIo;
using detail::DeviceForwardOut;
using detail::DeviceInputsCopy;

ForwardResult run_forward_once(const Rung& rung, const Problem74& p, const Inputs& in) {
  if (!rung.has_forward()) throw std::invalid_argument("rung " + rung.label() + " has no forward pass");
  require_supported(rung, p);
  if (rung.cpu_forward) return rung.cpu_forward(p, in);
  const DeviceInputsCopy dev(in);
  const DeviceForwardOut out(size_t(p.out_elems()));
  const DeviceBuffer<unsigned char> ws = workspace(rung.forward_workspace(p), rung);
  cudaStream_t stream = nullptr;
  out.poison(stream);
  rung.forward({p, dev.view(), out.out.get(), out.argmax.get(), out.y.get(), ws.get(), stream});
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return out.fetch();
}

GradResult run_backward_once(const Rung& rung, const Problem74& p, const Inputs& in, const Saved& saved,
                             const std::vector<float>& grad_out) {
  if (!rung.has_backward()) throw std::invalid_argument("rung " + rung.label() + " has no backward pass");
  require_supported(rung, p);
  if (rung.cpu_backward) return rung.cpu_backward(p, in, saved, grad_out);
  const DeviceInputsCopy dev(in);
  const DeviceBackwardIo io(p, saved, grad_out);
  const DeviceBuffer<unsigned char> ws = workspace(rung.backward_workspace(p), rung);
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

void say(const TrackOptions& opt, const std::string& s) {
  if (opt.progress) std::cerr << "[p74] " << s << std::endl;
}

std::string samples_text(const std::vector<int64_t>& s, int64_t batch) {
  if (int64_t(s.size()) == batch) return "every element";
  std::string t = "samples";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : " ") + std::to_string(s[i]);
  return t + " of " + std::to_string(batch) + ", every element of each";
}

/// Times a GPU pass (outputs poisoned and L2 flushed before each repetition, outside the timed
/// region), then runs it once more, untimed, to see whether it repeats bit for bit. Returns the
/// timed outputs.
template <class Args, class Io>
auto time_and_repeat(void (*pass)(const Args&), const Args& args, const Io& io, GpuState& g, const TrackOptions& opt,
                     RungResult& r) {
  cudaStream_t stream = g.stream.s;
  r.ms = time_pass<PhaseMarks>(pass, args, [&] { io.poison(stream); }, opt.warmup, opt.reps, g.flush.get(), stream,
                               &r.phase_ms);
  auto got = io.fetch();
  io.poison(stream);  // once more, untimed: does it repeat bit for bit?
  pass(args);         // args.marks is null
  CUDA_CHECK(cudaStreamSynchronize(stream));
  r.repeatable = bitwise_equal(got, io.fetch()) ? 1 : 0;
  return got;
}

/// What the forward and backward models for the harness's run loop share (run_loop.hpp says what
/// each hook does).
struct PassModel {
  using Rung = p74::Rung;
  using Result = RungResult;
  const Problem74& p;
  const TrackOptions& opt;
  const Inputs& in;
  GpuState* g;  // null without a CUDA device
  TrackReport& report;

  RungResult start(const Rung& rung, const char* pass) const {
    RungResult r;
    r.id = rung.id, r.name = rung.name, r.idea = rung.idea, r.pass = pass;
    r.gpu = !rung.is_cpu(), r.deterministic = rung.deterministic, r.precision = rung.precision;
    return r;
  }
  std::string skip_note(Skip why, const Rung& rung, double macs) const {
    return track_skip_note(why, why == Skip::Unsupported ? rung.why_unsupported(p) : "", macs, opt.cpu_max_macs);
  }
  void skipped(const Rung&, const RungResult&, const std::string&) const {}
  bool passed(const RungResult& r) const { return r.check_passed(); }
  template <class Output>
  void compare(RungResult&, const Output&, const RungResult&, const Output&) const {}
  void failed(const Rung&, RungResult& r, const std::string&, const std::exception& e, cudaError_t) const {
    r.note = e.what();
    say(opt, "  failed: " + r.note);
  }
};

/// The forward rungs. The saved state for the backward: the named rung's, else the fastest GPU
/// rung's that passed, else rung 00's (run_track). No refill check: refill and run_once never run.
struct ForwardModel : PassModel {
  using Output = ForwardResult;
  const Rung* named;
  std::vector<int64_t> samples;
  std::vector<ForwardOracle> oracles = {};  // filled by the first check, reused by the others
  std::unique_ptr<Saved> saved = {};
  double saved_ms = 0;

  RungResult start(const Rung& rung) const { return PassModel::start(rung, "forward"); }
  std::string skip_note(Skip why, const Rung& rung) const { return PassModel::skip_note(why, rung, p.conv_macs()); }
  double cpu_macs(const Rung&) const { return p.conv_macs(); }
  ForwardResult run(const Rung& rung, RungResult& r, const std::string&) const {
    say(opt, "rung " + rung.label() + " (forward)...");
    if (!r.gpu) return wall_clock(r.ms, [&] { return rung.cpu_forward(p, in); });
    const DeviceBuffer<unsigned char> ws = workspace(rung.forward_workspace(p), rung);
    const ForwardArgs args{p, g->dev.view(), g->fwd.out.get(), g->fwd.argmax.get(), g->fwd.y.get(), ws.get(),
                           g->stream.s};
    ForwardResult got = time_and_repeat(rung.forward, args, g->fwd, *g, opt, r);
    r.device_bytes = g->dev.bytes() + g->fwd.bytes() + double(ws.bytes());
    return got;
  }
  void check(const Rung& rung, RungResult& r, const ForwardResult& got) {
    r.checked = !samples.empty();
    r.checked_on =
        r.checked ? samples_text(samples, p.batch) : "unchecked: one sample's oracle exceeds --oracle-max-macs";
    if (r.checked) r.forward_check = check_forward_samples(p, in, got, samples, &oracles, rung.precision);
  }
  void refill(bool) const { throw std::logic_error("the forward has no refill check"); }
  ForwardResult run_once(const Rung&) const { throw std::logic_error("the forward has no refill check"); }
  void check_refilled(const Rung&, RungResult&, const ForwardResult&) const {}
  void done(const Rung&, const RungResult& r, const ForwardResult& got, const std::string&) {
    say(opt, "  " + std::to_string(r.ms.median) + " ms; " + (r.checked ? r.forward_check->summary() : r.checked_on));
    const bool good = r.check_passed();
    if (r.gpu && good && (report.fastest_forward_ms == 0 || r.ms.median < report.fastest_forward_ms))
      report.fastest_forward_ms = r.ms.median;
    const bool take = named ? named->id == r.id
                            : good && (!saved || (r.gpu && (report.saved_from == "00" || r.ms.median < saved_ms)));
    if (!take) return;
    saved = std::make_unique<Saved>(got.saved());
    saved_ms = r.ms.median;
    report.saved_from = r.id;
    if (!good) {  // only a named rung is taken without a passing check: say so everywhere
      report.saved_from += r.checked ? " (which failed its check)" : " (unchecked)";
      say(opt, "  warning: the backward takes its saved state from rung " + report.saved_from);
    }
  }
};

/// The backward rungs, all from the same saved state and grad_out.
struct BackwardModel : PassModel {
  using Output = GradResult;
  const std::vector<float>& grad_out;
  const Saved* saved = nullptr;  // null: every rung is Blocked, by no_saved
  std::string no_saved = {};
  std::unique_ptr<DeviceBackwardIo> io = {};
  std::unique_ptr<Grads> ref = {};
  std::map<Precision, GradTolerance> tols = {};  // each precision's bound, made when a rung of it is checked
  std::vector<float> grad_again = {};  // --refill-check: another seed's grad_out

  RungResult start(const Rung& rung) const { return PassModel::start(rung, "backward"); }
  // Without a saved state, a rung that could not run anyway says why (no CUDA device, an
  // unsupported problem) rather than blaming the missing state. (The CPU rung's cost is known
  // only from the state: 0 here passes the --cpu-max-macs test.)
  std::string skip_note(Skip why, const Rung& rung) const {
    return why == Skip::Blocked ? (saved ? "" : no_saved) : PassModel::skip_note(why, rung, cpu_macs(rung));
  }
  double cpu_macs(const Rung&) const { return saved ? report.backward_macs : 0; }
  BackwardArgs args(const DeviceBuffer<unsigned char>& ws) const {
    return {p, g->dev.view(), io->grad_out.get(), io->argmax.get(), io->y_saved.get(), io->grad_x.get(),
            io->grad_weight.get(), io->grad_bias.get(), io->grad_multiplier.get(), ws.get(), g->stream.s};
  }
  GradResult run(const Rung& rung, RungResult& r, const std::string&) {
    say(opt, "rung " + rung.label() + " (backward, saved state from rung " + report.saved_from + ")...");
    if (!r.gpu) return wall_clock(r.ms, [&] { return rung.cpu_backward(p, in, *saved, grad_out); });
    if (!io) io = std::make_unique<DeviceBackwardIo>(p, *saved, grad_out);
    const DeviceBuffer<unsigned char> ws = workspace(rung.backward_workspace(p), rung);
    GradResult got = time_and_repeat(rung.backward, args(ws), *io, *g, opt, r);
    r.device_bytes = g->dev.bytes() + io->bytes() + double(ws.bytes());
    return got;
  }
  void check(const Rung& rung, RungResult& r, const GradResult& got) {
    r.checked = report.backward_macs <= opt.oracle_max_macs;
    if (r.checked && !ref) {
      say(opt, "  fp64 backward oracle...");
      ref = std::make_unique<Grads>(backward(p, in, *saved, grad_out));
    }
    r.checked_on = r.checked ? "every element" : "unchecked: the backward exceeds --oracle-max-macs";
    if (!r.checked) return;
    auto tol = tols.find(rung.precision);
    if (tol == tols.end()) tol = tols.emplace(rung.precision, grad_tolerance(p, *ref, rung.precision)).first;
    r.grad_check = check_grads(*ref, tol->second, got);
  }
  /// Only grad_out's buffer is refilled: the backward's other inputs are the forward's.
  void refill(bool other) {
    if (grad_again.empty()) {
      Problem74 q = p;
      q.seed = p.seed ^ 0x5eed5eedULL;
      grad_again = make_grad_out(q);
    }
    const std::vector<float>& v = other ? grad_again : grad_out;
    CUDA_CHECK(cudaMemcpy(io->grad_out.get(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  GradResult run_once(const Rung& rung) const {
    const DeviceBuffer<unsigned char> ws = workspace(rung.backward_workspace(p), rung);
    io->poison(g->stream.s);
    rung.backward(args(ws));
    CUDA_CHECK(cudaStreamSynchronize(g->stream.s));
    return io->fetch();
  }
  void check_refilled(const Rung& rung, RungResult& r, const GradResult& second) const {
    const Grads ref_again = backward(p, in, *saved, grad_again);
    const auto again = check_grads(ref_again, grad_tolerance(p, ref_again, rung.precision), second);
    if (again.pass()) return;
    r.grad_check = again;
    r.note = "the run on a refilled grad_out (same buffer, another seed) disagrees with its oracle";
  }
  void done(const Rung&, const RungResult& r, const GradResult&, const std::string&) const {
    say(opt, "  " + std::to_string(r.ms.median) + " ms; " + (r.checked ? r.grad_check->summary() : r.checked_on));
  }
};

/// The chosen rungs that have the pass `has`.
std::vector<const Rung*> with_pass(const std::vector<const Rung*>& chosen, bool (Rung::*has)() const) {
  std::vector<const Rung*> v;
  for (const Rung* r : chosen)
    if ((r->*has)()) v.push_back(r);
  return v;
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
  say(opt, "inputs for " + p.describe());
  const Inputs in = make_inputs(p);
  const std::vector<float> grad_out = make_grad_out(p);

  const bool gpu = cuda_device_available(&report.gpu_skip_reason);
  std::unique_ptr<GpuState> g;
  if (gpu) {
    report.device = device_description();
    report.fp32_peak_tflops = fp32_peak_tflops();
    g = std::make_unique<GpuState>(p, in, opt.flush_l2);
    measure_floors(report, *g, opt);
    say(opt, "floors: forward read " + std::to_string(report.fwd_read_ms) + " + write " +
                 std::to_string(report.fwd_write_ms) + " ms; backward read " + std::to_string(report.bwd_read_ms) +
                 " + write " + std::to_string(report.bwd_write_ms) + " ms");
  }
  LoopState state;  // a sticky CUDA error in the forward: the backward's rungs are not run either
  const LoopOptions forward_loop{gpu, opt.cpu_max_macs, opt.force_cpu, false};
  ForwardModel fwd{{p, opt, in, g.get(), report}, named_forward,
                   samples_to_check(p, opt.oracle_max_macs, opt.max_samples)};
  run_loop(fwd, with_pass(chosen, &Rung::has_forward), forward_loop, state, report.rungs);
  std::vector<ForwardOracle>().swap(fwd.oracles);  // their memory, before the backward oracle's

  const std::vector<const Rung*> backward_rungs = with_pass(chosen, &Rung::has_backward);
  BackwardModel bwd{{p, opt, in, g.get(), report}, grad_out, fwd.saved.get()};
  std::unique_ptr<Saved> fallback;
  if (!backward_rungs.empty() && !bwd.saved && state.lost == cudaSuccess) {
    // The default's id as a named string: GCC 13 takes a reference returned by a call on a
    // temporary argument for a dangling one (-Wdangling-reference).
    const std::string default_forward = gpu ? "03" : "00";
    const Rung& f = named_forward ? *named_forward : find_rung(default_forward);
    const std::string why = why_skipped(fwd, f, !f.is_cpu(), forward_loop, state);
    say(opt, "saved state for the backward from rung " + f.label() + " (run once, untimed)");
    try {
      if (!why.empty()) throw std::runtime_error("rung " + f.label() + " " + why);
      fallback = std::make_unique<Saved>(run_forward_once(f, p, in).saved());
      bwd.saved = fallback.get();
      report.saved_from = f.id;
    } catch (const std::exception& e) {
      bwd.no_saved = std::string("not run: no saved state for the backward (") + e.what() + ")";
    }
  }
  if (bwd.saved) report.backward_macs = backward_macs(p, *bwd.saved);
  run_loop(bwd, backward_rungs, {gpu, opt.cpu_max_macs, opt.force_cpu, opt.refill_check}, state, report.rungs);
  if (state.lost != cudaSuccess)
    say(opt, "stopped: the CUDA context is lost (" + cuda_error_text(sticky_cuda_error()) + ")");
  if (!opt.json_path.empty()) write_json(report, opt.json_path);
  return report;
}

}  // namespace ladder::p74
