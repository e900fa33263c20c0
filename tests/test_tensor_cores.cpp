// The tensor-core stages' arithmetic, beyond the oracle tests every stage gets (test_gpu_stages):
// inputs whose every value lies between two TF32 values tell how a stage rounds its operands.
// x and the weights are all c = 1 + 3 * 2^-12: TF32 keeps 10 mantissa bits, so round to nearest
// (cvt.rna) gives 1 + 2^-10, a kernel that hands the raw FP32 bits to the mma (the tensor core
// ignores the low 13: truncation, the "forgotten rounding") computes with 1, and 3xTF32 with c
// itself to about 2^-22. Each product of rounded values is exact in FP32 (20 significant bits),
// so each kernel's result equals the fp64 oracle *of its own rounded inputs* to the FP32
// accumulation bound, while the other roundings are off by 2^-11 to 2^-10 relative, many times
// that bound. Every test also checks, on the CPU, that its check rejects the wrong rounding's
// exact result.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "gpu_session.hpp"
#include "oracle.hpp"
#include "problem_matrix.hpp"
#include "skip_without_gpu.hpp"
#include "stage.hpp"
#include "tf32.hpp"
#include "tolerance.hpp"

namespace ladder {
namespace {

constexpr float kBetweenTf32 = 1.0f + 3.0f / 4096.0f;  // 1 + 3 * 2^-12: 0.75 of a TF32 step above 1

std::vector<const StageDescriptor*> tensor_core_stages() {
  std::vector<const StageDescriptor*> out;
  for (const StageDescriptor* s : registered_stages())
    if (s->tensor_cores) out.push_back(s);
  return out;
}

// x and the weights all `v`; the biases as drawn.
HostInputs with_constant_operands(HostInputs in, float v) {
  std::fill(in.x.begin(), in.x.end(), v);
  std::fill(in.weight.begin(), in.weight.end(), v);
  return in;
}

// Stride 1, 3x3: the tiled kernel; 16 input channels (two 8-channel steps), 24 output channels
// (a partly filled 128-channel tile), sizes that leave edge tiles, padding 1 (zeros in the patch).
// The width is a multiple of 4: stage 17's tensor map needs rows of x in 16-byte units, and at
// any other width it runs its general FP32 path, which has no TF32 operands to round.
Problem problem() {
  Problem p = testing::make(2, 16, 24, 21, 20, {3, 3}, {1, 1}, {1, 1});
  p.distribution = Distribution::Uniform;  // real fractions: the FP32 accumulation bound applies
  return p;
}

TEST(TensorCores, Tf32StagesRoundToNearest) {
  const Problem p = problem();
  const HostInputs drawn = make_inputs(p);
  const HostInputs in = with_constant_operands(drawn, kBetweenTf32);
  ASSERT_EQ(round_to_tf32(kBetweenTf32), 1.0f + 1.0f / 1024.0f) << "the rounding emulation (tf32.hpp)";
  const Reference rounded = linearity_pipeline(p, with_constant_operands(drawn, round_to_tf32(kBetweenTf32)));
  const Reference truncated = linearity_pipeline(p, with_constant_operands(drawn, 1.0f));
  const Tolerance tol = stage_tolerance(p, rounded, Precision::Fp32);
  // The check can fail: a truncating kernel's exact result is far outside it.
  EXPECT_FALSE(compare(truncated.pooled, truncated.y, rounded.pooled, rounded.y, tol).pass());
  SKIP_WITHOUT_GPU();
  GpuSession gpu(p, in);
  int checked = 0;
  for (const StageDescriptor* s : tensor_core_stages()) {
    if (s->precision != Precision::Tf32) continue;
    if (s->device_note && !s->device_note().empty()) {  // below sm_80: the general FP32 path
      std::cout << "[ SKIPPED  ] " << s->label() << ": " << s->device_note() << "\n";
      continue;
    }
    const GpuTiming t = gpu.run_once(*s);
    const Agreement a = compare(t.pooled, t.y, rounded.pooled, rounded.y, tol);
    EXPECT_TRUE(a.pass()) << s->label() << " against the oracle of its operands rounded to nearest: " << a.summary();
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no TF32 tensor-core stage in this build";
}

TEST(TensorCores, ThreeTf32KeepsWhatTf32Drops) {
  const Problem p = problem();
  const HostInputs drawn = make_inputs(p);
  const HostInputs in = with_constant_operands(drawn, kBetweenTf32);
  const Reference exact = linearity_pipeline(p, in);
  const Reference rounded = linearity_pipeline(p, with_constant_operands(drawn, round_to_tf32(kBetweenTf32)));
  const Tolerance tol = stage_tolerance(p, exact, Precision::Fp32);
  // The check can fail: plain TF32's exact result is far outside it.
  EXPECT_FALSE(compare(rounded.pooled, rounded.y, exact.pooled, exact.y, tol).pass());
  SKIP_WITHOUT_GPU();
  GpuSession gpu(p, in);
  int checked = 0;
  for (const StageDescriptor* s : tensor_core_stages()) {
    if (s->precision != Precision::Fp32) continue;  // 3xTF32: held to the FP32 bound
    if (s->device_note && !s->device_note().empty()) {  // below sm_80: the general FP32 path
      std::cout << "[ SKIPPED  ] " << s->label() << ": " << s->device_note() << "\n";
      continue;
    }
    const GpuTiming t = gpu.run_once(*s);
    const Agreement a = compare(t.pooled, t.y, exact.pooled, exact.y, tol);
    EXPECT_TRUE(a.pass()) << s->label() << " against the fp64 oracle at the FP32 bound: " << a.summary();
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no FP32-accurate tensor-core stage in this build";
}

}  // namespace
}  // namespace ladder
