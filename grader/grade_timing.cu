// grade_timing_NN: one process of the autograder's timing of rung NN (scripts/assignment.py grade;
// grader/runs.py, timing, runs it and judges what it writes). It times this build's stage NN and
// the streaming-read floor, interleaved repetition by repetition, on inputs the grader chooses.
//
// Two builds, two processes. The grader runs this program of the student's build (in the
// sandbox) and the same program of the reference build (the instructor's tree, built outside the
// sandbox in WORK/reference-build), in separate processes, in rounds whose first process
// alternates, while it holds the GPU alone. Nothing of the reference is linked into, or readable
// from, the student's process or build: there is no second descriptor to find, no pool to call.
//
// Seeds, one per repetition, handed over only when asked (--handshake DIR). After prepare() and
// every other setup, and then before each repetition r, the program writes DIR/ready-r and waits
// for DIR/seed-r, a 64-bit seed the grader draws from os.urandom and writes only once ready-r is
// there. So prepare() runs before any seed exists, and no run, timed or warm-up, has the seed of
// a later repetition: nothing can be computed ahead for a timed repetition. (The stage's code
// cannot write or read files itself: integrity rule 4.) Both processes of a round get the same
// seeds, so the reference's outputs are the expected ones. Repetition 0's seed also draws weight,
// conv_bias and bias. Without --handshake (a manual run) the seeds come from std::random_device.
//
// The program never judges its own outputs: --outputs FILE gets the stage's pooled and y of every
// timed repetition, and the reference's run adds --tolerance FILE, the per-element tolerance of the
// first repetition's input at its stage's precision (the instructor's rule, never the student's
// descriptor). The grader compares the two in its own process.
//
// Every repetition refills the input with fresh values, and every launch starts with L2 flushed
// and its outputs poisoned; stage and floor take turns at going first after the refill. Each
// launch is also timed on the host, from its first enqueue to cudaDeviceSynchronize: work the
// CUDA events miss (on the host, or on another stream, before the first mark) shows up as wall
// time the events do not cover, which the grader holds against the reference's own.
// CMake (grader/CMakeLists.txt) names the stage's descriptor: GRADE_STAGE_SYMBOL.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "device.hpp"
#include "fresh_inputs.cuh"
#include "host_memory_need.hpp"
#include "oracle.hpp"
#include "pool_only.hpp"
#include "problem_options.hpp"
#include "streaming_read.cuh"
#include "timing.hpp"
#include "tolerance.hpp"

#ifndef GRADE_STAGE_SYMBOL
#error "GRADE_STAGE_SYMBOL is not defined: grade_timing.cu is built by grader/CMakeLists.txt"
#endif

namespace ladder {
const StageDescriptor& GRADE_STAGE_SYMBOL();
}  // namespace ladder

namespace {

using namespace ladder;

/// An error raised by the stage's own code (prepare, run, its kernels): exit status 1.
struct StageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs f, rethrowing any error as a StageError that names `who`.
template <class F>
void blame(const std::string& who, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    throw StageError(who + ": " + e.what());
  }
}

/// The wall time a stage's prepare() may take (host-side setup such as cudaFuncSetAttribute), ms.
constexpr double kPrepareMs = 1000.0;

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

/// The seeds of the repetitions (see the top of this file).
class Seeds {
 public:
  /// dir: the handshake folder (--handshake; empty: none); timeout_s: how long to wait for a seed.
  Seeds(std::string dir, double timeout_s) : dir_(std::move(dir)), timeout_s_(timeout_s) {}

  /// Repetition r's seed; call with r = 0, 1, ... in order. With a folder: writes DIR/ready-r,
  /// then waits for DIR/seed-r (a decimal uint64 and a newline, which the grader renames into
  /// place whole). Throws std::runtime_error when it cannot write, after timeout_s without a
  /// seed, or on a malformed one. Without a folder: std::random_device.
  uint64_t operator()(int r) const {
    if (dir_.empty()) {
      std::random_device entropy;
      return (uint64_t(entropy()) << 32) ^ uint64_t(entropy());
    }
    const std::string ready = dir_ + "/ready-" + std::to_string(r), path = dir_ + "/seed-" + std::to_string(r);
    if (std::ofstream f(ready); !(f << "ready\n")) throw std::runtime_error("cannot write " + ready);
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      std::string line;
      if (std::ifstream f(path); f && std::getline(f, line)) {
        if (line.empty() || line.size() > 20 || line.find_first_not_of("0123456789") != std::string::npos)
          throw std::runtime_error(path + ": not a decimal 64-bit seed");
        try {
          return std::stoull(line);
        } catch (const std::exception&) {
          throw std::runtime_error(path + ": not a decimal 64-bit seed");
        }
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s_)
        throw std::runtime_error("no seed from the grader for repetition " + std::to_string(r) + " within " +
                                 std::to_string(int(timeout_s_)) + " s (" + path + ")");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  bool from_grader() const { return !dir_.empty(); }

 private:
  std::string dir_;
  double timeout_s_;
};

/// One timed program: the stage, or the floor (the streaming read). The stage has its own outputs
/// and workspace; `enqueue` runs it once on the stream (no synchronization).
struct Contender {
  std::string name;
  const StageDescriptor* stage = nullptr;  ///< null for the floor
  DeviceBuffer<float> pooled, y;           ///< y is empty in pool mode, both for the floor
  DeviceBuffer<unsigned char> workspace;
  std::function<void(PhaseMarks&)> enqueue;
  std::vector<double> ms;       ///< CUDA-event time of each timed repetition
  std::vector<double> wall_ms;  ///< host wall time of the same launches
};

DeviceBuffer<float> upload(const std::vector<float>& h, const std::string& what) {
  DeviceBuffer<float> d(h.size(), what);
  if (d.size()) CUDA_CHECK(cudaMemcpy(d.get(), h.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

/// Appends d (device, fp32) to the host vector `out`. Throws CudaError.
void append_from_device(const DeviceBuffer<float>& d, std::vector<float>& out) {
  const size_t at = out.size();
  out.resize(at + d.size());
  if (d.size()) CUDA_CHECK(cudaMemcpy(out.data() + at, d.get(), d.bytes(), cudaMemcpyDeviceToHost));
}

/// Writes `count` values of type T from `data` to `path` (raw, this machine's byte order).
/// Throws std::runtime_error when it cannot.
template <class T>
void write_raw(const std::string& path, const T* data, size_t count) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f.write(reinterpret_cast<const char*>(data), std::streamsize(count * sizeof(T))))
    throw std::runtime_error("cannot write " + path);
}

struct Options {
  Problem problem;
  bool pool_mode = false;
  int reps = 20, warmup = 2;
  bool quiet = false;
  std::string handshake, outputs_path, tolerance_path;
  double handshake_timeout_s = 60;
};

/// What needs no GPU: throws InvalidProblem or std::invalid_argument (exit status 2).
void check_request(const Options& o, const StageDescriptor& stage) {
  o.problem.validate();
  if (!stage.is_gpu()) throw std::invalid_argument("stage " + stage.label() + " is not a GPU stage");
  if (o.pool_mode && !stage.run_pool)
    throw std::invalid_argument("--mode pool: stage " + stage.label() + " has no pool phase of its own (run_pool)");
}

/// The tolerance of the first repetition's input (on the device in `fresh`) at the stage's
/// precision: stage mode, stage_tolerance of the fp64 oracle; pool mode, pool_tolerance (y empty).
/// Throws CudaError, std::bad_alloc.
Tolerance first_input_tolerance(const Options& o, const StageDescriptor& stage, const DeviceBuffer<float>& fresh,
                                const HostInputs& params) {
  const Problem& p = o.problem;
  std::vector<float> host(fresh.size());
  CUDA_CHECK(cudaMemcpy(host.data(), fresh.get(), fresh.bytes(), cudaMemcpyDeviceToHost));
  Tolerance tol;
  if (o.pool_mode) {
    tol.pooled = pool_tolerance(p, pool_reference(p, host.data()));
  } else {
    const HostInputs in{std::move(host), params.weight, params.conv_bias, params.bias};
    tol = stage_tolerance(p, linearity_pipeline(p, in), stage.precision);
  }
  return tol;
}

/// Sets up the stage and the floor, runs the interleaved repetitions, writes the outputs (and
/// the tolerance) files and fills `out`. Returns 0; throws StageError (status 1) or anything
/// else (status 2).
int time_stage(const Options& o, const StageDescriptor& stage, nlohmann::json& out) {
  const Problem& p = o.problem;
  check_host_memory(o.pool_mode ? pool_only_host_memory_need(p, 1) : ladder_host_memory_need(p, 1, false),
                    probe_host_memory());
  out["device"] = device_description();
  auto note = [&](const std::string& m) { if (!o.quiet) std::cerr << m << std::endl; };
  note("grade_timing: " + stage.label() + (o.pool_mode ? ", pool phase, " : ", ") + p.describe());

  // The input every repetition refills (x, or the convT-shaped pool input) and the parameters,
  // drawn once repetition 0's seed is known.
  const int64_t n = o.pool_mode ? p.out_elems() : p.x_elems();
  DeviceBuffer<float> fresh(size_t(n), (o.pool_mode ? "the convT-shaped pool input " : "x ") + format_bytes(4.0 * double(n)));
  DeviceBuffer<float> weight, conv_bias, bias;
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&stream));
  std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> stream_owner(stream, cudaStreamDestroy);

  Contender st;
  st.name = "stage " + stage.label();
  st.stage = &stage;
  st.pooled = DeviceBuffer<float>(size_t(p.pooled_elems()), "pooled");
  if (!o.pool_mode) st.y = DeviceBuffer<float>(size_t(p.batch), "y");
  size_t ws = 0;
  blame(st.name, [&] {
    ws = o.pool_mode ? (stage.pool_workspace_bytes ? stage.pool_workspace_bytes(p) : 0)
                     : (stage.workspace_bytes ? stage.workspace_bytes(p) : 0);
  });
  st.workspace = DeviceBuffer<unsigned char>(ws, "workspace");
  // As GpuSession: a self-resetting workspace is zeroed once; prepare runs once, untimed.
  if (stage.self_resetting_workspace && ws) CUDA_CHECK(cudaMemsetAsync(st.workspace.get(), 0, ws, stream));
  // prepare() is host-side setup: it sees only the problem's shape (no seed exists yet).
  const auto t0 = std::chrono::steady_clock::now();
  blame(st.name, [&] { if (stage.prepare) stage.prepare(p); });
  CUDA_CHECK(cudaDeviceSynchronize());
  const double prep_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out["prepare_ms"] = prep_ms;
  if (prep_ms > kPrepareMs)
    throw StageError(st.name + ": prepare() took " + std::to_string(prep_ms) + " ms, more than the " +
                     std::to_string(kPrepareMs) + " ms allowed for host-side setup");
  DeviceInputs din;
  if (o.pool_mode)
    st.enqueue = [&](PhaseMarks& m) {
      stage.run_pool({p, fresh.get(), st.pooled.get(), st.workspace.get(), stream, m});
    };
  else
    st.enqueue = [&](PhaseMarks& m) {
      stage.run_gpu({p, din, st.pooled.get(), st.y.get(), st.workspace.get(), stream, m});
    };

  Contender floor;
  floor.name = "floor (streaming read)";
  DeviceBuffer<float> sink(1, "streaming-read sink");
  const StreamingReadLaunch read = plan_streaming_read(n);  // the ladder's tuned launch
  floor.enqueue = [&](PhaseMarks& m) { m.begin(Phase::Pool); read(fresh.get(), n, sink.get(), stream); };
  Contender* cs[] = {&st, &floor};

  L2Flush flush_l2;
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)> start_owner(start, cudaEventDestroy);
  CUDA_CHECK(cudaEventCreate(&stop));
  std::unique_ptr<CUevent_st, cudaError_t (*)(cudaEvent_t)> stop_owner(stop, cudaEventDestroy);

  // Repetition 0's seed: asked for only now, after prepare() and every allocation.
  const Seeds seeds(o.handshake, o.handshake_timeout_s);
  uint64_t seed = seeds(0);
  out["seeds_from"] = seeds.from_grader() ? "the grader (--handshake), one per repetition" : "std::random_device";
  HostInputs params;
  if (!o.pool_mode) {
    Problem q = p;  // the parameters of repetition 0's seed; a batch of 1 keeps the host's x small
    q.batch = 1, q.seed = seed;
    params = make_inputs(q);
    weight = upload(params.weight, "weight"), conv_bias = upload(params.conv_bias, "conv_bias");
    bias = upload(params.bias, "bias");
    din = DeviceInputs{fresh.get(), weight.get(), conv_bias.get(), bias.get()};
  }
  refill_fresh(fresh.get(), n, seed, 0, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (!o.tolerance_path.empty()) {
    const Tolerance tol = first_input_tolerance(o, stage, fresh, params);
    std::vector<double> t(tol.pooled);
    t.insert(t.end(), tol.y.begin(), tol.y.end());
    write_raw(o.tolerance_path, t.data(), t.size());
  }

  std::vector<float> outputs;  // every timed repetition's pooled, then y
  for (int r = 0; r < o.warmup + o.reps; ++r) {
    const bool timed = r >= o.warmup;
    if (r > 0) {
      seed = seeds(r);
      refill_fresh(fresh.get(), n, seed, uint64_t(r), stream);
    }
    for (size_t k = 0; k < 2; ++k) {
      Contender& c = *cs[(size_t(r) + k) % 2];  // each repetition the other goes first
      blame(c.name, [&] {
        // Poison the outputs (all bits set is a NaN): an element the stage forgets stays NaN.
        for (const DeviceBuffer<float>* b : {&c.pooled, &c.y})
          if (b->size()) CUDA_CHECK(cudaMemsetAsync(b->get(), 0xFF, b->bytes(), stream));
        flush_l2(stream);
        CUDA_CHECK(cudaStreamSynchronize(stream));  // the wall clock starts on an idle device
        StartMark marks(start, stream);
        const auto w0 = std::chrono::steady_clock::now();
        c.enqueue(marks);
        if (!marks.marked) throw std::logic_error("marked no phase (call marks.begin before the first enqueue)");
        CUDA_CHECK(cudaEventRecord(stop, stream));
        CUDA_CHECK(cudaDeviceSynchronize());  // every stream: work launched elsewhere is waited for
        const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (timed) c.ms.push_back(ms), c.wall_ms.push_back(wall);
      });
    }
    if (timed) append_from_device(st.pooled, outputs), append_from_device(st.y, outputs);
    note("repetition " + std::to_string(r + 1) + " of " + std::to_string(o.warmup + o.reps) + (timed ? "" : " (warm-up)"));
  }
  if (!o.outputs_path.empty()) write_raw(o.outputs_path, outputs.data(), outputs.size());
  out["stage_ms"] = st.ms, out["stage_wall_ms"] = st.wall_ms;
  out["floor_ms"] = floor.ms, out["floor_wall_ms"] = floor.wall_ms;
  out["pooled_elems"] = st.pooled.size(), out["y_elems"] = st.y.size();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ProblemOptions po;
  Options o;
  std::string mode = "stage", json_path;
  CLI::App app{"One process of the autograder's timing of a rung: this build's stage and a streaming read of its\n"
               "input, interleaved, on fresh inputs every repetition (seeds from the grader with --handshake), L2\n"
               "flushed before every launch. It reports times and writes outputs; the grader judges them.\n"
               "x (or the pool input) is always U[0,1), also with --kernelbench-v1."};
  app.footer("Exit status: 0 timed; 1 the stage raised an error (or prepare() took too long); 2 invalid options or\n"
             "an error outside the stage (invalid problem, too little memory, no seed); 77 no CUDA device.");
  add_problem_options(app, po, /*epilogue_and_distribution=*/false);
  app.add_option("--mode", mode, "stage: the whole stage (run_gpu); pool: its pool phase alone (run_pool) on a "
                                 "convT-shaped tensor")
      ->check(CLI::IsMember({"stage", "pool"}))
      ->capture_default_str();
  app.add_option("--reps", o.reps, "timed repetitions")->check(at_least(1))->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed repetitions before them")->check(at_least(0))->capture_default_str();
  app.add_option("--handshake", o.handshake, "folder of the seed handshake with the grader: DIR/ready-R written, "
                                             "DIR/seed-R awaited, before repetition R (default: seeds from "
                                             "std::random_device)")
      ->type_name("DIR");
  app.add_option("--handshake-timeout", o.handshake_timeout_s, "seconds to wait for each seed")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--outputs", o.outputs_path, "write every timed repetition's pooled and y (fp32, raw) to FILE")
      ->type_name("FILE");
  app.add_option("--tolerance", o.tolerance_path, "write the per-element tolerance of pooled and y (fp64, raw) of "
                                                  "the first input, at this stage's precision, to FILE")
      ->type_name("FILE");
  app.add_option("--json", json_path, "write the results as JSON to FILE (default: standard output)")->type_name("FILE");
  app.add_flag("-q,--quiet", o.quiet, "no progress output on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  int status = 0;
  nlohmann::json out = {{"mode", mode}, {"stage", nullptr}, {"problem", nullptr}, {"device", nullptr},
                        {"reps", o.reps}, {"warmup", o.warmup}};
  try {
    o.problem = problem_from_options(app, po);
    o.problem.distribution = Distribution::Uniform;  // x ~ U[0,1) like every refill, also with --kernelbench-v1
    o.pool_mode = mode == "pool";
    const StageDescriptor& stage = GRADE_STAGE_SYMBOL();
    out["stage"] = stage.label();
    out["problem"] = o.problem.describe();
    check_request(o, stage);
    if (std::string why; !cuda_device_available(&why)) {
      out["error"] = "no CUDA device (" + why + "): grade_timing needs a GPU";
      status = 77;
    } else {
      status = time_stage(o, stage, out);
    }
  } catch (const StageError& e) {
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
