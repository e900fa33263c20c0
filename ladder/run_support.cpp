#include "run_support.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <stdexcept>

#include "cuda_context.hpp"

namespace ladder {

void check_timing_options(const LadderOptions& opt) {
  if (opt.reps < 1 || opt.warmup < 0)
    throw std::invalid_argument("--reps must be >= 1 and --warmup >= 0, got " + std::to_string(opt.reps) +
                                " and " + std::to_string(opt.warmup));
}

RunRecord record_run(const LadderOptions& opt) {
  return {collect_provenance(nvcc_version()), opt.warmup, opt.reps, opt.flush_l2};
}

void note(const LadderOptions& o, const std::string& msg) {
  if (o.progress) std::cerr << msg << std::endl;
}

std::vector<const StageDescriptor*> selected_stages(const LadderOptions& opt) {
  const auto& all = registered_stages();
  if (opt.rung_ids.empty()) return all;
  std::vector<const StageDescriptor*> out;
  for (const std::string& id : opt.rung_ids) {
    const StageDescriptor* found = nullptr;
    for (const StageDescriptor* s : all)
      if (s->id == id || s->name == id || s->label() == id) found = s;
    if (!found) {
      std::string known;
      for (const StageDescriptor* s : all) known += " " + s->id;
      throw std::invalid_argument("unknown stage '" + id + "'; this program has:" + known);
    }
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k] == found) {
        const std::string& first = opt.rung_ids[k];
        throw std::invalid_argument("--stages: stage " + found->id + " is listed twice" +
                                    (first == id ? "" : " (as '" + first + "' and '" + id + "')"));
      }
    out.push_back(found);
  }
  return out;
}

// A progress callback that rewrites one stderr line when stderr is a terminal.
Progress progress_printer(const LadderOptions& opt, const std::string& label) {
  if (!opt.progress) return {};
  const bool tty = isatty(STDERR_FILENO);
  return [tty, label](int done, int total) {
    if (tty) {
      std::fprintf(stderr, "\r  %s: repetition %d/%d", label.c_str(), done, total);
      if (done == total) std::fprintf(stderr, "\n");
    } else if (done == total || done % 10 == 0) {
      std::fprintf(stderr, "  %s: repetition %d/%d\n", label.c_str(), done, total);
    }
  };
}

std::string context_lost_message(const std::string& culprit, cudaError_t code) {
  return culprit + " caused a sticky CUDA error, " + cuda_error_text(code) +
         ": the CUDA context is unusable, so the remaining GPU stages were not run";
}

}  // namespace ladder
