// grade_timing_NN: the autograder's timing of one rung (scripts/assignment.py grade). In one
// process, interleaved repetition by repetition, it times the student's stage NN, the reference
// solution of the same rung (when this program was built with one) and the streaming-read floor.
// Every repetition refills the input with fresh values, and every timed launch starts with L2
// flushed and its outputs poisoned; the contenders take turns at going first after the refill.
// After each timed repetition the student's outputs are checked against the reference's on that
// repetition's input, so an output cached from an earlier run, or computed lazily, fails.
// Each launch is also timed on the host, from its first enqueue to cudaDeviceSynchronize: work
// the CUDA events miss (done on the host, or on another stream, before the first mark or after
// the last) shows up as wall time the events do not cover, and fails the timing.
// CMake (grader/CMakeLists.txt) links the two stages and names their descriptors:
// GRADE_STUDENT_SYMBOL and, optionally, GRADE_REFERENCE_SYMBOL.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <iostream>
#include <nlohmann/json.hpp>

#include "device.hpp"
#include "fresh_inputs.cuh"
#include "gpu_session.hpp"
#include "host_memory_need.hpp"
#include "oracle.hpp"
#include "pool_only.hpp"
#include "problem_options.hpp"
#include "streaming_read.cuh"
#include "tolerance.hpp"

#ifndef GRADE_STUDENT_SYMBOL
#error "GRADE_STUDENT_SYMBOL is not defined: grade_timing.cu is built by grader/CMakeLists.txt"
#endif

namespace ladder {
const StageDescriptor& GRADE_STUDENT_SYMBOL();
#ifdef GRADE_REFERENCE_SYMBOL
const StageDescriptor& GRADE_REFERENCE_SYMBOL();
#endif
}  // namespace ladder

namespace {

using namespace ladder;

/// An error raised by a contender's own code (prepare, run, its kernels): exit status 1.
struct ContenderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs f, rethrowing any error as a ContenderError that names `who`.
template <class F>
void blame(const std::string& who, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw ContenderError(who + ": " + e.what());
  }
}

/// The PhaseMarks a contender gets: records `start` at its first mark only, so its time runs
/// from its first enqueue to the end, without the host-side setup before that mark.
class StartMark : public PhaseMarks {
 public:
  StartMark(cudaEvent_t start, cudaStream_t stream) : start_(start), stream_(stream) {}
  void begin(Phase) override {
    if (!marked) CUDA_CHECK(cudaEventRecord(start_, stream_));
    marked = true;
  }
  bool marked = false;

 private:
  cudaEvent_t start_;
  cudaStream_t stream_;
};

/// One of the timed programs: the student, the reference or the floor. Each stage has its own
/// outputs and workspace; `enqueue` runs it once on the stream (no synchronization).
struct Contender {
  std::string name;
  const StageDescriptor* stage = nullptr;  ///< null for the floor
  DeviceBuffer<float> pooled, y;           ///< y is empty in pool mode, both for the floor
  DeviceBuffer<unsigned char> workspace;
  std::function<void(PhaseMarks&)> enqueue;
  std::vector<double> ms;       ///< CUDA-event time, one per timed repetition
  std::vector<double> wall_ms;  ///< host wall time of the same launches
};

/// Host wall time a launch may take beyond its CUDA-event time (launch latency, host-side
/// planning): 0.1 ms, plus twice what the reference solution takes beyond its own events (the
/// machine's launch and synchronization cost), plus 2% of the student's event time. Work hidden
/// from the events can gain at most that much.
/// The wall time a stage's prepare() may take (host-side setup such as cudaFuncSetAttribute).
constexpr double kPrepareMs = 1000.0;

double uncovered_allowance_ms(double event_ms, double reference_uncovered_ms) {
  return 0.1 + 2.0 * reference_uncovered_ms + 0.02 * event_ms;
}

std::vector<double> to_host(const DeviceBuffer<float>& d) {
  std::vector<float> h(d.size());
  if (d.size()) CUDA_CHECK(cudaMemcpy(h.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  return {h.begin(), h.end()};
}

DeviceBuffer<float> upload(const std::vector<float>& h, const std::string& what) {
  DeviceBuffer<float> d(h.size(), what);
  CUDA_CHECK(cudaMemcpy(d.get(), h.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

int64_t non_finite(const std::vector<double>& v) {
  return std::count_if(v.begin(), v.end(), [](double e) { return !std::isfinite(e); });
}

nlohmann::json spread_json(const std::vector<double>& ms) {
  const Spread s = spread_of(ms);
  return {{"median_ms", s.median}, {"min_ms", s.min}, {"max_ms", s.max}};
}

struct Options {
  Problem problem;
  bool pool_mode = false;
  int reps = 20, warmup = 2;
  bool quiet = false;
};

/// What needs no GPU: throws InvalidProblem or std::invalid_argument (exit status 2).
void check_request(const Options& o, const StageDescriptor& student, const StageDescriptor* reference) {
  o.problem.validate();
  if (!student.is_gpu()) throw std::invalid_argument("stage " + student.label() + " is not a GPU stage");
  for (const StageDescriptor* s : {&student, reference})
    if (s && o.pool_mode && !s->run_pool)
      throw std::invalid_argument("--mode pool: stage " + s->label() + " has no pool phase of its own (run_pool)");
}

/// Sets up the contenders, runs the interleaved repetitions and fills `out`. Returns the exit
/// status (0, or 1 on a mismatch); throws ContenderError (status 1) or anything else (status 2).
int grade(const Options& o, const StageDescriptor& student, const StageDescriptor* reference, nlohmann::json& out) {
  const Problem& p = o.problem;
  check_host_memory(o.pool_mode ? pool_only_host_memory_need(p, 2) : ladder_host_memory_need(p, 2, false),
                    probe_host_memory());
  out["device"] = device_description();
  auto note = [&](const std::string& m) { if (!o.quiet) std::cerr << m << std::endl; };
  note("grade_timing: " + student.label() + (o.pool_mode ? ", pool phase, " : ", ") + p.describe());

  // The input every repetition refills, its first version, and the tolerance from that version.
  DeviceBuffer<float> fresh, weight, conv_bias, bias;
  Tolerance tol;
  if (!o.pool_mode) {
    const HostInputs in = make_inputs(p);  // p.distribution is Uniform: the refills' distribution
    // The student against the reference, at the reference's precision: the instructor's rule,
    // never the student's descriptor (without a reference the check is NaN and Inf only).
    const Precision precision = reference ? reference->precision : Precision::Fp32;
    tol = stage_tolerance(p, linearity_pipeline(p, in), precision);
    fresh = upload(in.x, "x " + format_bytes(4.0 * double(in.x.size())));
    weight = upload(in.weight, "weight"), conv_bias = upload(in.conv_bias, "conv_bias"), bias = upload(in.bias, "bias");
  } else {
    fresh = DeviceBuffer<float>(size_t(p.out_elems()), "the convT-shaped pool input " + format_bytes(4.0 * double(p.out_elems())));
  }
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> stream_owner(stream, cudaStreamDestroy);
  const int64_t n = int64_t(fresh.size());
  uint64_t fresh_seed = 0;  // drawn from the OS after every prepare(): nothing can precompute the refills
  auto refill = [&](uint64_t rep) { refill_fresh(fresh.get(), n, fresh_seed, rep, stream); };

  std::vector<std::unique_ptr<Contender>> cs;
  const DeviceInputs din{fresh.get(), weight.get(), conv_bias.get(), bias.get()};
  for (const StageDescriptor* s : {&student, reference}) {
    if (!s) continue;
    auto c = std::make_unique<Contender>();
    c->name = cs.empty() ? "student" : "reference";
    c->stage = s;
    c->pooled = DeviceBuffer<float>(size_t(p.pooled_elems()), c->name + " pooled");
    if (!o.pool_mode) c->y = DeviceBuffer<float>(size_t(p.batch), c->name + " y");
    size_t ws = 0;
    blame(c->name + " " + s->label(), [&] {
      ws = o.pool_mode ? (s->pool_workspace_bytes ? s->pool_workspace_bytes(p) : 0)
                       : (s->workspace_bytes ? s->workspace_bytes(p) : 0);
    });
    c->workspace = DeviceBuffer<unsigned char>(ws, c->name + " workspace");
    // As GpuSession: a self-resetting workspace is zeroed once; prepare runs once, untimed.
    if (s->self_resetting_workspace && ws) CUDA_CHECK(cudaMemsetAsync(c->workspace.get(), 0, ws, stream));
    // prepare() is host-side setup: it sees only the problem's shape and may take kPrepareMs.
    const auto t0 = std::chrono::steady_clock::now();
    blame(c->name + " " + s->label(), [&] { if (s->prepare) s->prepare(p); });
    CUDA_CHECK(cudaDeviceSynchronize());
    const double prep_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (c->name == "student" && prep_ms > kPrepareMs)
      throw ContenderError("student " + s->label() + ": prepare() took " + std::to_string(prep_ms) + " ms, more than the " +
                           std::to_string(kPrepareMs) + " ms allowed for host-side setup");
    Contender* cp = c.get();
    if (o.pool_mode)
      c->enqueue = [cp, &p, &fresh, stream](PhaseMarks& m) {
        cp->stage->run_pool({p, fresh.get(), cp->pooled.get(), cp->workspace.get(), stream, m});
      };
    else
      c->enqueue = [cp, &p, din, stream](PhaseMarks& m) {
        cp->stage->run_gpu({p, din, cp->pooled.get(), cp->y.get(), cp->workspace.get(), stream, m});
      };
    cs.push_back(std::move(c));
  }
  std::random_device entropy;
  fresh_seed = (uint64_t(entropy()) << 32) ^ uint64_t(entropy());
  out["fresh_seed_source"] = "std::random_device, drawn after prepare()";
  if (o.pool_mode) {  // the first tensor is the refill kernel's (rep 0); its fp64 reference on the host
    refill(0);
    std::unique_ptr<float[]> host(new float[size_t(n)]);
    CUDA_CHECK(cudaMemcpy(host.get(), fresh.get(), fresh.bytes(), cudaMemcpyDeviceToHost));
    tol.pooled = pool_tolerance(p, pool_reference(p, host.get()));
  }
  auto floor = std::make_unique<Contender>();
  floor->name = "floor";
  DeviceBuffer<float> sink(1, "streaming-read sink");
  const StreamingReadLaunch read = plan_streaming_read(n);  // the ladder's tuned launch
  floor->enqueue = [&](PhaseMarks& m) { m.begin(Phase::Pool); read(fresh.get(), n, sink.get(), stream); };
  cs.push_back(std::move(floor));

  L2Flush flush_l2;
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)> start_owner(start, cudaEventDestroy);
  CUDA_CHECK(cudaEventCreate(&stop));
  std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)> stop_owner(stop, cudaEventDestroy);
  int64_t mismatches = 0, checked = 0;
  std::string first_mismatch;
  for (int r = 0; r < o.warmup + o.reps; ++r) {
    const bool timed = r >= o.warmup;
    refill(uint64_t(r) + 1);
    for (size_t k = 0; k < cs.size(); ++k) {
      Contender& c = *cs[(size_t(r) + k) % cs.size()];  // each repetition another goes first
      blame(c.name + (c.stage ? " " + c.stage->label() : std::string(" (streaming read)")), [&] {
        // Poison the outputs (all bits set is a NaN): an element the stage forgets stays NaN.
        for (const DeviceBuffer<float>* b : {&c.pooled, &c.y})
          if (b->size()) CUDA_CHECK(cudaMemsetAsync(b->get(), 0xFF, b->bytes(), stream));
        flush_l2(stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));  // the wall clock starts on an idle device
        StartMark marks(start, stream);
        const auto t0 = std::chrono::steady_clock::now();
        c.enqueue(marks);
        if (!marks.marked) throw std::logic_error("marked no phase (call marks.begin before the first enqueue)");
        CUDA_CHECK(cudaEventRecord(stop, stream));
        CUDA_CHECK(cudaDeviceSynchronize());  // every stream: work launched elsewhere is waited for
        const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (timed) c.ms.push_back(ms), c.wall_ms.push_back(wall);
      });
    }
    if (!timed) continue;
    // The check, on this repetition's fresh input.
    const std::vector<double> pooled = to_host(cs[0]->pooled), y = to_host(cs[0]->y);
    std::string why;
    if (const int64_t bad = non_finite(pooled) + non_finite(y))
      why = std::to_string(bad) + " non-finite student outputs (a NaN may be an element never written)";
    else if (reference) {
      const Agreement a = compare(pooled, y, to_host(cs[1]->pooled), to_host(cs[1]->y), tol, 2.0);
      if (!a.pass()) why = "student against reference: " + a.summary();
    }
    ++checked;
    if (!why.empty() && mismatches++ == 0) first_mismatch = "repetition " + std::to_string(r - o.warmup + 1) + ": " + why;
    note("repetition " + std::to_string(r - o.warmup + 1) + " of " + std::to_string(o.reps) +
         (why.empty() ? "" : ": MISMATCH, " + why));
  }

  const Contender& stu = *cs.front();
  const Contender& flo = *cs.back();
  out["student"] = spread_json(stu.ms);
  out["floor"] = spread_json(flo.ms);
  out["ratio_to_floor"] = median(stu.ms) / median(flo.ms);
  if (reference) {
    out["reference"] = spread_json(cs[1]->ms);
    out["ratio_to_reference"] = median(stu.ms) / median(cs[1]->ms);
  }
  // The events must cover the launch: the host wall time beyond them stays within an allowance.
  const double uncovered = median(stu.wall_ms) - median(stu.ms);
  const double ref_uncovered = reference ? std::max(0.0, median(cs[1]->wall_ms) - median(cs[1]->ms)) : 0.0;
  const double allowance = uncovered_allowance_ms(median(stu.ms), ref_uncovered);
  out["student_wall"] = spread_json(stu.wall_ms);
  out["reference_uncovered_ms"] = ref_uncovered;
  out["uncovered_ms"] = uncovered;
  out["uncovered_allowance_ms"] = allowance;
  if (uncovered > allowance) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "the host wall time of a launch (median %.3f ms) exceeds its CUDA-event time (%.3f ms) by "
                  "%.3f ms, more than the %.3f ms allowed: the stage does work the events do not time (on the "
                  "host, or on another stream, outside its marks)",
                  median(stu.wall_ms), median(stu.ms), uncovered, allowance);
    out["error"] = std::string(buf);
  }
  out["mismatches"] = mismatches;
  out["checked_reps"] = checked;
  if (!first_mismatch.empty()) out["first_mismatch"] = first_mismatch;
  out["note"] = std::string(o.pool_mode ? "the convT-shaped pool input" : "x") +
                " (the floor reads it) refilled with fresh U[0,1) values before every repetition; L2 flushed and "
                "outputs poisoned before every launch; contenders in rotating order. " +
                (reference ? "Student checked against the reference at twice the fp32 tolerance of the first input."
                           : "No reference solution linked: the student's outputs checked for NaN and Inf only.");
  return mismatches || out.contains("error") ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  ProblemOptions po;
  Options o;
  std::string mode = "stage", json_path;
  CLI::App app{"The autograder's timing of one rung: the student's stage, the reference solution of it (when built\n"
               "with one) and a streaming read of the input, interleaved, on fresh inputs every repetition, L2\n"
               "flushed before every launch; the student's outputs checked against the reference's each time.\n"
               "x (or the pool input) is always U[0,1), also with --kernelbench-v1."};
  app.footer("Exit status: 0 timed (and no mismatch); 1 a mismatch, or a stage raised an error; 2 invalid options or\n"
             "an error before timing (invalid problem, too little host or GPU memory); 77 no CUDA device.");
  add_problem_options(app, po, /*epilogue_and_distribution=*/false);
  app.add_option("--mode", mode, "stage: the whole stage (run_gpu); pool: its pool phase alone (run_pool) on a "
                                 "convT-shaped tensor")
      ->check(CLI::IsMember({"stage", "pool"}))
      ->capture_default_str();
  app.add_option("--reps", o.reps, "timed repetitions (median, min and max reported)")->check(at_least(1))->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed repetitions before them")->check(at_least(0))->capture_default_str();
  app.add_option("--json", json_path, "write the results as JSON to FILE (default: standard output)")->type_name("FILE");
  app.add_flag("-q,--quiet", o.quiet, "no progress output on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.problem = problem_from_options(app, po);
  o.problem.distribution = Distribution::Uniform;  // x ~ U[0,1) like every refill, also with --kernelbench-v1
  o.pool_mode = mode == "pool";

  const StageDescriptor& student = GRADE_STUDENT_SYMBOL();
#ifdef GRADE_REFERENCE_SYMBOL
  const StageDescriptor* reference = &GRADE_REFERENCE_SYMBOL();
#else
  const StageDescriptor* reference = nullptr;
#endif
  nlohmann::json out = {{"mode", mode}, {"stage", student.label()}, {"problem", o.problem.describe()},
                        {"device", nullptr}, {"reps", o.reps}, {"warmup", o.warmup}, {"student", nullptr},
                        {"reference", nullptr}, {"floor", nullptr}, {"ratio_to_reference", nullptr},
                        {"ratio_to_floor", nullptr}, {"mismatches", 0}, {"checked_reps", 0},
                        {"first_mismatch", nullptr}, {"note", ""}};
  int status = 0;
  try {
    check_request(o, student, reference);
    if (std::string why; !cuda_device_available(&why)) {
      out["error"] = "no CUDA device (" + why + "): grade_timing needs a GPU";
      status = 77;
    } else {
      status = grade(o, student, reference, out);
    }
  } catch (const ContenderError& e) {
    out["error"] = e.what();
    status = 1;
  } catch (const std::exception& e) {
    out["error"] = e.what();
    status = 2;
  }
  if (out.contains("error")) std::cerr << "error: " << out["error"].get<std::string>() << "\n";
  if (json_path.empty()) {
    std::cout << out.dump(2) << "\n";
  } else if (std::ofstream f(json_path); !(f << out.dump(2) << "\n")) {
    std::cerr << "error: cannot write " << json_path << "\n";
    return status ? status : 2;
  }
  return status;
}
