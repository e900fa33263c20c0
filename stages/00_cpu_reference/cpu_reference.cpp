// Stage 00: the literal pipeline on the CPU in double precision, exactly as the PyTorch model
// reads: materialize the ConvTranspose2d output, average each plane, add the bias, take a stable
// log-sum-exp over channels, scale. It is also the literal oracle (common/model/oracle.cpp holds the
// three steps so that tests can call them without a stage): the slowest rung and the truth.
#include <chrono>

#include "lib/register_stage.hpp"
#include "oracle.hpp"
#include "stage.hpp"

namespace ladder {
namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

CpuStageResult run_cpu_reference(const Problem& p, const HostInputs& in) {
  CpuStageResult r;
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<double> conv_out = conv_transpose2d_literal(p, in);  // gather form, OpenMP
  r.phase_ms.emplace_back(Phase::Conv, ms_since(t0));

  t0 = std::chrono::steady_clock::now();
  r.pooled = global_average_pool(p, conv_out);
  r.phase_ms.emplace_back(Phase::Pool, ms_since(t0));

  t0 = std::chrono::steady_clock::now();
  r.y = bias_logsumexp_scale(p, r.pooled, in.bias);
  r.phase_ms.emplace_back(Phase::Epilogue, ms_since(t0));
  return r;
}

}  // namespace

LADDER_REGISTER_STAGE(d) {
  d.idea = "literal pipeline on the CPU, fp64, OpenMP over (n, co)";
  d.run_cpu = run_cpu_reference;
}

}  // namespace ladder
