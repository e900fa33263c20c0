// The per-rung run loop every ladder shares (ladder/, tracks/p38_*, tracks/p74_*), written once:
// which rungs run and why the others do not, each run inside try/catch, a lost CUDA context, the
// --refill-check run and the comparison with the previous rung that ran. A problem model says
// what differs: how a rung runs and is checked, and the words of its notes (run_loop.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "device.hpp"  // DeviceBuffer
#include "timing.hpp"  // Spread

namespace ladder {

/// Enqueues every byte of `bytes` at `data` set to 0xff: a NaN in float, -1 in int32, so that an
/// element a rung leaves unwritten fails the check. Throws CudaError.
void poison(void* data, size_t bytes, cudaStream_t stream);
template <typename T>
void poison(const DeviceBuffer<T>& b, cudaStream_t stream) {
  poison(b.get(), b.bytes(), stream);
}

/// A rung's workspace of `bytes` (cudaMalloc aligns to 256 bytes), at least 1 byte; DeviceMemoryError
/// names the rung.
template <class Rung>
DeviceBuffer<unsigned char> workspace(size_t bytes, const Rung& g) {
  return DeviceBuffer<unsigned char>(std::max<size_t>(bytes, 1), "workspace of rung " + g.label());
}

/// Throws std::invalid_argument naming the rung, the problem and the rung's reason when `g`
/// cannot run `p` (a track's rung.why_unsupported).
template <class Rung, class Problem>
void require_supported(const Rung& g, const Problem& p) {
  const std::string why = g.why_unsupported(p);
  if (!why.empty()) throw std::invalid_argument("rung " + g.label() + " cannot run " + p.describe() + ": " + why);
}

/// Runs `f` once (a CPU rung) and returns what it returns; `ms` receives its wall-clock time, in ms,
/// as the spread of one run.
template <class F>
auto wall_clock(Spread& ms, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  auto out = f();
  const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ms = {t, t, t};
  return out;
}

/// A rung's note when its run on refilled buffers fails (the grader matches "run on refilled inputs").
inline const char* const kRefilledDisagrees =
    "the run on refilled inputs (same buffers, another seed) disagrees with its oracle";

/// After `e` stopped a GPU rung: the sticky error the CUDA context is left in (e's own code when
/// it is one, so no further CUDA call is made), or cudaSuccess if the context still works.
cudaError_t sticky_error_after(const std::exception& e);

/// Why a rung does not run, in the order the loop asks (Unsupported and Blocked: the model alone
/// decides; the others only when they hold).
enum class Skip {
  Lost,         ///< an earlier rung left a sticky CUDA error (the ladder skips only its GPU stages)
  Unsupported,  ///< the rung cannot run this problem
  CpuCost,      ///< a CPU rung above --cpu-max-macs, without --force-cpu
  NoDevice,     ///< a GPU rung without a CUDA device
  Blocked,      ///< something the rung needs is missing (p74's backward: the saved state)
};

/// The tracks' notes ("" for Blocked): Unsupported the rung's reason (`unsupported`, "" if none),
/// CpuCost `macs`; the grader matches "not run: no CUDA device". Lost names the context's error now.
std::string track_skip_note(Skip why, const std::string& unsupported, double macs, double cpu_max_macs);

struct LoopOptions {
  bool gpu = false;  ///< a CUDA device is there, set up for the GPU rungs
  double cpu_max_macs = 0;
  bool force_cpu = false;
  bool refill_check = false;    ///< each passing GPU rung runs again on refilled buffers
  bool stop_when_lost = false;  ///< after a sticky error, list no later rung (else: skipped as Lost)
};

/// What one program's loops share (p74 runs two, forward then backward): the sticky error that
/// stopped the GPU, cudaSuccess while it works.
struct LoopState {
  cudaError_t lost = cudaSuccess;
};

/// The note of the first Skip that holds for `g` (a GPU rung or not), "" when it runs.
template <class Model>
std::string why_skipped(Model& m, const typename Model::Rung& g, bool gpu, const LoopOptions& o, const LoopState& st) {
  for (Skip why : {Skip::Lost, Skip::Unsupported, Skip::CpuCost, Skip::NoDevice, Skip::Blocked}) {
    const bool holds = why == Skip::Lost       ? st.lost != cudaSuccess
                       : why == Skip::CpuCost  ? !gpu && m.cpu_macs(g) > o.cpu_max_macs && !o.force_cpu
                       : why == Skip::NoDevice ? gpu && !o.gpu
                                               : true;
    if (!holds) continue;
    if (std::string note = m.skip_note(why, g); !note.empty()) return note;
  }
  return "";
}

/// Runs `rungs` in order and appends a Result for each to `results`.
///
/// The model (Model::Rung: has label(); Model::Result: fields gpu, ran, failed, note; Model::Output:
/// what one run returns, movable) supplies, for a Rung& g, a Result& r, an Output& out:
///   Result start(g)                  the record before it runs (id, name, r.gpu ...)
///   std::string skip_note(Skip, g)   the note for that skip, "" when it does not apply (see Skip)
///   double cpu_macs(g)               a CPU rung's cost, held to cpu_max_macs
///   void skipped(g, r, label)        after a skip: progress output (r.note is set)
///   Output run(g, r, label)          runs it: a CPU rung once on the wall clock, a GPU rung
///                                    poisoned, warmed up and timed (time_phases); times, ms, in r
///   void check(g, r, out)            r against the fp64 oracle
///   bool passed(r)                   whether that check passed
///   void refill(bool other)          the same device buffers refilled with another seed's values
///                                    (other), or back to the first ones
///   Output run_once(g)               one untimed run on a fresh workspace, outputs poisoned first
///   void check_refilled(g, r, out)   `out` against the other seed's oracle; on failure r takes
///                                    that check and a note that says so
///   void compare(r, out, prev, prev_out)  against the previous rung that ran
///   void done(g, r, out, label)      after a run (its check, refill, compare): progress, files
///   void failed(g, r, label, e, lost)  `e` stopped it (r.failed is set): r.note, progress; lost:
///                                    the sticky error it left (cudaSuccess: none)
/// A hook may throw: from run to done the rung is reported failed; from the others the exception
/// leaves run_loop.
template <class Model>
void run_loop(Model& m, const std::vector<const typename Model::Rung*>& rungs, const LoopOptions& o,
              LoopState& st, std::vector<typename Model::Result>& results) {
  using Result = typename Model::Result;
  std::optional<size_t> previous;  // index into results of the last rung that ran
  std::optional<typename Model::Output> previous_out;
  for (size_t i = 0; i < rungs.size(); ++i) {
    const auto& g = *rungs[i];
    Result r = m.start(g);
    const std::string label = "[" + std::to_string(i + 1) + "/" + std::to_string(rungs.size()) + "] " + g.label();
    r.note = why_skipped(m, g, r.gpu, o, st);
    if (!r.note.empty()) {
      m.skipped(g, r, label);
      results.push_back(std::move(r));
      continue;
    }
    try {
      typename Model::Output out = m.run(g, r, label);
      r.ran = true;
      m.check(g, r, out);
      if (o.refill_check && r.gpu && m.passed(r)) {
        // A rung that keeps an earlier answer (a cache keyed on the buffers' addresses) fails here.
        m.refill(true);
        const typename Model::Output again = m.run_once(g);
        m.refill(false);  // the next rung sees the first inputs again
        m.check_refilled(g, r, again);
      }
      if (previous) m.compare(r, out, results[*previous], *previous_out);
      m.done(g, r, out, label);
      previous = results.size();
      previous_out = std::move(out);
    } catch (const std::exception& e) {
      r.failed = true;
      const cudaError_t code = o.gpu && r.gpu ? sticky_error_after(e) : cudaSuccess;
      if (code != cudaSuccess) st.lost = code;
      m.failed(g, r, label, e, code);
      if (code != cudaSuccess && o.stop_when_lost) {
        results.push_back(std::move(r));
        return;
      }
    }
    results.push_back(std::move(r));
  }
}

}  // namespace ladder
