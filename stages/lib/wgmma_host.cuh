// The host half of the wgmma rungs (15, 16): whether this device runs the stage's wgmma code, the
// launch plan, the workspace, the opt-in to more than 48 KB of shared memory, and the launches.
// The stage passes what the host half takes from it as a template argument:
//   struct Rung {
//     static constexpr WgmmaOperands operands;   // operand parts and slots per ring (wgmma_tile.cuh)
//     template <int KW> static auto kernel();    // conv_pool_wgmma<KW>: (WgmmaArgs), KW 1..kMaxKernelW
//     static auto weight_layout();               // tf32_weight_kmajor: (ConvParams, weight, wt,
//   };                                           //   chunks, co tiles per group, wt floats)
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "conv_params.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "lib/conv_pool_general.cuh"
#include "lib/fused_partials.cuh"
#include "lib/kernel_width.cuh"  // ceil_div, with_kernel_width
#include "wgmma.cuh"
#include "lib/wgmma_tile.cuh"

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// Writes 1 where the code that runs on this device was compiled with wgmma (sm_90a), else 0.
__global__ void wgmma_probe(int* out) { *out = LADDER_HAS_WGMMA; }

/// Whether the current device runs this stage's wgmma code: an sm_90 GPU and a build for sm_90a.
/// A device-side probe, once per device: the host pass cannot tell sm_90 from sm_90a code. A GPU
/// for which the build has no code at all gets false, not an error. Throws CudaError on a CUDA
/// failure of the probe itself.
bool wgmma_here() {
#ifdef LADDER_NO_WGMMA
  return false;  // a test build: the path every other GPU takes
#endif
  constexpr int kMaxDevices = 64;
  static int known[kMaxDevices] = {};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < kMaxDevices && known[dev]) return known[dev] == 2;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  bool yes = false;
  if (prop.major == 9 && prop.minor == 0) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, wgmma_probe) == cudaSuccess) {
      DeviceBuffer<int> flag(1, "the wgmma probe's flag");
      wgmma_probe<<<1, 1>>>(flag.get());
      CUDA_CHECK_LAUNCH("wgmma_probe");
      int got = 0;
      CUDA_CHECK(cudaMemcpy(&got, flag.get(), sizeof(int), cudaMemcpyDeviceToHost));
      yes = got == 1;
    } else {
      (void)cudaGetLastError();  // no kernel image for this GPU: not an error here
    }
  }
  if (dev < kMaxDevices) known[dev] = yes ? 2 : 1;
  return yes;
}

/// Says when the wgmma kernel does not run: a GPU other than sm_90, or a build without sm_90a code.
std::string wgmma_device_note() {
  if (wgmma_here()) return "";
#ifdef LADDER_NO_WGMMA
  return "built with LADDER_NO_WGMMA: every problem takes the general FP32 path";
#endif
  return "wgmma needs an sm_90 GPU (H100, H200) and code built for sm_90a: every problem takes the general FP32 path";
}

/// The launch plan of a problem: a pure function of the problem and the device, so
/// workspace_bytes, prepare and run agree.
struct WgmmaPlan {
  bool fast = false;  ///< the wgmma kernel; else conv_pool_general
  int kernel_w = 0, patch_rows = 0, tiles_w = 0, shift = 0, vec_cols = 0;
  size_t smem_bytes = 0;
  FusedGrid g{};
};

template <class Rung>
struct WgmmaHost {
  static constexpr WgmmaOperands kOperands = Rung::operands;

  /// Bytes of one ring slot of each kind together: one step's weights, x staging and K-major x,
  /// the weights and K-major x once per operand part (kOperands.parts).
  static int64_t wgmma_slot_bytes(int64_t rows, int64_t taps) {
    return int64_t(sizeof(float)) *
           (kOperands.parts * (taps * 2 * kWgCo * 4 + 2 * rows * kKPitch * 4) + kCiChunk * rows * kStagePitch);
  }

  static WgmmaPlan make_wgmma_plan(const Problem& pr) {
    pr.validate();
    WgmmaPlan q;
    const int64_t rows = kOutRows + (pr.kernel_size.h - 1) * pr.dilation.h;
    const int64_t taps = pr.kernel_size.h * pr.kernel_size.w;
    const int64_t bytes = kOperands.ring * wgmma_slot_bytes(rows, taps);
    const int64_t static_bytes = kWgStaticBytes;
    q.fast = pr.stride.h == 1 && pr.stride.w == 1 && pr.dilation.w == 1 && pr.kernel_size.w <= kMaxKernelW &&
             rows <= kMaxWgPatchRows && bytes + static_bytes <= int64_t(shared_memory_per_block_limit()) &&
             wgmma_here();
    if (!q.fast) {
      q.g = general_grid(pr);
      return q;
    }
    q.kernel_w = int(pr.kernel_size.w);
    q.patch_rows = int(rows);
    const AlignedPatchRow row = aligned_patch_row(pr.padding.w, pr.kernel_size.w, kOutCols);
    q.shift = row.shift;
    q.vec_cols = row.vectors;
    q.smem_bytes = size_t(bytes);
    q.tiles_w = int(ceil_div(pr.out_w(), kOutCols));
    const int64_t units = ceil_div(pr.out_h(), kOutRows) * q.tiles_w;
    q.g = chunked_tile_grid(pr, units, kWgCo, "conv_pool_wgmma");
    return q;
  }

  /// Floats of the laid-out weights (tf32_weight_kmajor) of a fast plan, every operand part.
  static int64_t wgmma_layout_floats(const Problem& p, const WgmmaPlan& q) {
    return int64_t(kOperands.parts) * p.groups * ceil_div(p.in_per_group(), kCiChunk) * q.g.co_tiles_per_group *
           p.kernel_size.h * p.kernel_size.w * kWgCo * kCiChunk;
  }

  /// Workspace: the partial sums (N, parts, Cout) fp32, then on the fast path the laid-out weights
  /// (kOperands.parts * groups * ceil(Cin/g / 8) * co tiles * kH * kW * 128 * 8 fp32; 295 KB per
  /// part at the KernelBench size).
  static size_t wgmma_workspace_bytes(const Problem& p) {
    const WgmmaPlan q = make_wgmma_plan(p);
    if (!q.fast) return partials_bytes(p, q.g.parts);
    return aligned_partials_bytes(p, q.g.parts) + size_t(wgmma_layout_floats(p, q)) * sizeof(float);
  }

  /// Dynamic shared memory per block of the plan, in bytes (0 on the general path).
  static size_t wgmma_shared_memory_bytes(const Problem& p) { return make_wgmma_plan(p).smem_bytes; }

  /// Calls f(kernel) with the wgmma kernel for q's kernel width.
  template <typename F>
  static void with_wgmma_kernel(const WgmmaPlan& q, F&& f) {
    with_kernel_width(q.kernel_w, [&](auto w) { f(Rung::template kernel<decltype(w)::value>()); });
  }

  /// Once per problem, outside the timed region: the wgmma probe and the opt-in above 48 KB of
  /// dynamic shared memory. Throws CudaError if the device cannot give the plan's shared memory.
  static void prepare_wgmma(const Problem& p) {
    const WgmmaPlan q = make_wgmma_plan(p);
    if (q.fast) with_wgmma_kernel(q, [&](auto kernel) { opt_in_shared_memory(kernel, q.smem_bytes); });
  }

  /// Enqueues the stage: tf32_weight_kmajor lays the weights out in the workspace, then the wgmma
  /// kernel runs, then the finish; prepare_wgmma(a.problem) must have run first.
  static void run_wgmma(const GpuStageArgs& a) {
    const Problem& p = a.problem;
    const WgmmaPlan q = make_wgmma_plan(p);
    run_fused_plan(a, q, [&](float* partials) {
      const ConvParams cp = conv_params(p);
      float* wt = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + aligned_partials_bytes(p, q.g.parts));
      const int64_t total = wgmma_layout_floats(p, q);
      const auto layout = Rung::weight_layout();
      layout<<<blocks_for(total, kThreads, "tf32_weight_kmajor"), kThreads, 0, a.stream>>>(
          cp, a.in.weight, wt, int(ceil_div(p.in_per_group(), kCiChunk)), q.g.co_tiles_per_group, total);
      CUDA_CHECK_LAUNCH("tf32_weight_kmajor");
      const bool vec16 = p.in_w % 4 == 0 && reinterpret_cast<uintptr_t>(a.in.x) % 16 == 0;
      const WgmmaArgs t{cp, a.in.x, wt, partials, q.g, q.tiles_w, q.patch_rows, q.shift, q.vec_cols, vec16 ? 1 : 0};
      with_wgmma_kernel(q, [&](auto kernel) {
        kernel<<<q.g.blocks, kThreads, q.smem_bytes, a.stream>>>(t);
        CUDA_CHECK_LAUNCH("conv_pool_wgmma");
      });
    });
  }

  /// Fills the descriptor's hooks for this host half.
  static void describe(StageDescriptor& d) {
    d.workspace_bytes = wgmma_workspace_bytes;
    d.run_gpu = run_wgmma;
    d.shared_memory_bytes = wgmma_shared_memory_bytes;
    d.device_note = wgmma_device_note;
    d.prepare = prepare_wgmma;
    d.tensor_cores = true;
    d.deterministic = true;
  }
};

}  // namespace
}  // namespace ladder
