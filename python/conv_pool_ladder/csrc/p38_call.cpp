// Problem 38 (tracks/p38_spatial_softmax) in PyTorch: the track's GPU rungs as operators of the
// extension module's library, torch.ops.<module>.p38_*, added as a fragment to the library that
// stage_op.cpp defines (one namespace per module, see there):
//
//   p38_forward(Tensor x, Tensor weight, Tensor bias, Tensor scale, int[3] pool_kernel_size,
//               int[3] pool_stride, int[3] pool_padding, bool ceil_mode, bool count_include_pad,
//               int[3] stride, int[3] padding, int[3] output_padding, int[3] dilation, int groups,
//               float clamp_min, float clamp_max, str rung, bool poison=False) -> Tensor
//       softmax over D*H*W of clamp(ConvTranspose3d(AvgPool3d(x))), times scale, by one GPU rung
//       ("07", "subpixel_tiled" or "07_subpixel_tiled"); (batch, out_channels, D, H, W) float32.
//   p38_info(int[] x_shape, int[] weight_shape, <the same parameters>, str rung) -> str
//       the problem as the track sees it, lines "key\tvalue": pooled_size, out_size, spatial,
//       conv_macs (Problem38::conv_macs), workspace_bytes and unsupported (the rung's reason).
//   p38_rungs() -> str
//       the track's rungs in ladder order, lines "id\tname\tgpu|cpu\tdeterministic\tconv_passes\tprecision\tidea"
//       (precision: fp32, or tf32 for a rung on tensor cores, held to the TF32 bound).
//
// Operators, not pybind functions: binding.cpp, which holds the module's pybind functions, stays
// the same with or without the track (_build.py compiles this file only into a module built
// with_p38, which needs tracks/p38_spatial_softmax), and operators register themselves when the
// module loads.
//
// Forward only. p38_forward's kernel is registered for CompositeExplicitAutograd (every backend:
// a CPU x gets the ValueError below) and for Autograd, where it records nothing: the output never
// requires grad, so a backward through it fails at once ("does not require grad") instead of
// silently giving no gradient.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "track_call.hpp"
#include "p38_spatial_softmax/rung.hpp"  // not "rung.hpp": common/ is on the include path too

#ifndef TORCH_EXTENSION_NAME
#error "TORCH_EXTENSION_NAME must be defined (torch.utils.cpp_extension defines it)"
#endif

// TORCH_LIBRARY_* paste their namespace argument: expand the module name first (as stage_op.cpp).
#define CPL_P38_FRAGMENT(ns, m) TORCH_LIBRARY_FRAGMENT(ns, m)
#define CPL_P38_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace cpl {
namespace {

namespace p38 = ladder::p38;
using c10::IntArrayRef;
using track::check_tensor;
using track::one_line;
using track::to_triple;

/// The Problem38 of a call: sizes from x's and the weight's shapes, nn.AvgPool3d's and
/// nn.ConvTranspose3d's parameters, validated as PyTorch would (Problem38::validate). Raises
/// ValueError naming the shape or parameter that is wrong.
p38::Problem38 make_problem(IntArrayRef x_shape, IntArrayRef w_shape, IntArrayRef pool_kernel_size,
                            IntArrayRef pool_stride, IntArrayRef pool_padding, bool ceil_mode, bool count_include_pad,
                            IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, IntArrayRef dilation,
                            int64_t groups, double clamp_min, double clamp_max) {
  TORCH_CHECK_VALUE(x_shape.size() == 5, "x must be 5-D (batch, in_channels, depth, height, width), got shape ",
                    x_shape);
  TORCH_CHECK_VALUE(w_shape.size() == 5,
                    "weight must be 5-D (in_channels, out_channels/groups, kD, kH, kW) as in nn.ConvTranspose3d, "
                    "got shape ", w_shape);
  TORCH_CHECK_VALUE(groups >= 1, "groups must be positive, got ", groups);
  TORCH_CHECK_VALUE(w_shape[0] == x_shape[1], "weight.size(0) = ", w_shape[0], " must equal x's in_channels = ",
                    x_shape[1], " (nn.ConvTranspose3d's weight is (in_channels, out_channels/groups, kD, kH, kW))");
  p38::Problem38 p;
  p.batch = x_shape[0];
  p.in_channels = x_shape[1];
  p.in_size = {x_shape[2], x_shape[3], x_shape[4]};
  p.pool.kernel_size = to_triple("pool_kernel_size", pool_kernel_size);
  p.pool.stride = to_triple("pool_stride", pool_stride);
  p.pool.padding = to_triple("pool_padding", pool_padding);
  p.pool.ceil_mode = ceil_mode;
  p.pool.count_include_pad = count_include_pad;
  p.conv.kernel_size = {w_shape[2], w_shape[3], w_shape[4]};
  p.conv.stride = to_triple("stride", stride);
  p.conv.padding = to_triple("padding", padding);
  p.conv.output_padding = to_triple("output_padding", output_padding);
  p.conv.dilation = to_triple("dilation", dilation);
  p.conv.groups = groups;
  p.clamp_min = clamp_min;
  p.clamp_max = clamp_max;
  try {
    p.out_channels = p38::checked_mul(w_shape[1], groups, "out_channels (weight.size(1) * groups)");
    p.validate();
  } catch (const p38::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  return p;
}

/// The rung by id, name or id_name; ValueError listing the rungs when there is none.
const p38::Rung& find(std::string_view key) {
  try {
    return p38::find_rung(std::string(key));
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

std::string gpu_rungs() {
  std::string s;
  for (const p38::Rung* r : p38::rungs())
    if (r->is_gpu()) s += (s.empty() ? "" : ", ") + r->id + "_" + r->name;
  return s;
}

/// A GPU rung that can run p: ValueError naming the rung and its reason otherwise.
const p38::Rung& runnable_rung(std::string_view key, const p38::Problem38& p) {
  const p38::Rung& r = find(key);
  TORCH_CHECK_VALUE(r.is_gpu() && r.workspace_bytes != nullptr, "rung ", r.label(),
                    " runs on the CPU; p38_forward runs the GPU rungs: ", gpu_rungs());
  std::string why;
  try {
    why = r.why_unsupported(p);
  } catch (const p38::InvalidProblem& e) {
    why = e.what();
  }
  TORCH_CHECK_VALUE(why.empty(), "rung ", r.label(), " cannot run this problem: ", why);
  return r;
}

/// p38_forward's kernel (see the file comment). Checks every argument, then allocates the output
/// and the workspace from PyTorch's caching allocator and enqueues the rung on torch's current
/// stream of x's device; no synchronization. Raises ValueError / TypeError naming the tensor or
/// parameter at fault, ValueError with the rung's reason when it cannot run the problem, and
/// RuntimeError when a launch fails. With `poison`, the output is filled with NaN (all bits set)
/// first, so that an element the rung does not write shows (tests only: it costs a memset).
at::Tensor p38_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& scale,
                       IntArrayRef pool_kernel_size, IntArrayRef pool_stride, IntArrayRef pool_padding, bool ceil_mode,
                       bool count_include_pad, IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                       IntArrayRef dilation, int64_t groups, double clamp_min, double clamp_max, std::string_view rung,
                       bool poison) {
  TORCH_CHECK_VALUE(x.defined() && x.is_cuda(), "x must be a CUDA tensor",
                    x.defined() ? ", got one on " + x.device().str() : std::string(", got an undefined tensor"));
  const at::Device device = x.device();
  check_tensor(x, "x", device);
  check_tensor(weight, "weight", device);
  check_tensor(bias, "bias", device);
  check_tensor(scale, "scale", device);
  const p38::Problem38 p = make_problem(x.sizes(), weight.sizes(), pool_kernel_size, pool_stride, pool_padding,
                                        ceil_mode, count_include_pad, stride, padding, output_padding, dilation,
                                        groups, clamp_min, clamp_max);
  const int64_t cout = p.out_channels;
  TORCH_CHECK_VALUE(bias.sizes() == IntArrayRef{cout}, "bias must have shape (", cout,
                    ") (nn.ConvTranspose3d's bias, out_channels), got ", bias.sizes());
  const bool scale_ok = scale.sizes() == IntArrayRef{1, cout, 1, 1, 1} || scale.sizes() == IntArrayRef{cout};
  TORCH_CHECK_VALUE(scale_ok, "scale must have shape (1, ", cout, ", 1, 1, 1) or (", cout, "), got ", scale.sizes());
  const p38::Rung& r = runnable_rung(rung, p);

  const c10::cuda::CUDAGuard guard(device);
  const p38::Triple os = p.out_size();
  size_t ws_bytes = 0;
  try {
    ws_bytes = r.workspace_bytes(p);
  } catch (const p38::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, "rung ", r.label(), ": ", e.what());
  }
  // The caching allocator hands out blocks at multiples of 512 bytes: the 256-byte alignment the
  // rung contract promises. At least one byte, so that the pointer is never null.
  at::Tensor workspace = at::detail::empty_cuda({static_cast<int64_t>(std::max<size_t>(ws_bytes, 1))}, at::kByte,
                                                device, std::nullopt);
  at::Tensor out = at::detail::empty_cuda({p.batch, cout, os.d, os.h, os.w}, at::kFloat, device, std::nullopt);
  TORCH_CHECK(reinterpret_cast<uintptr_t>(workspace.const_data_ptr()) % 256 == 0 &&
                  reinterpret_cast<uintptr_t>(out.const_data_ptr()) % 256 == 0,
              "p38_forward: the caching allocator returned a block that is not 256-byte aligned");
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  if (poison) C10_CUDA_CHECK(cudaMemsetAsync(out.mutable_data_ptr(), 0xFF, out.nbytes(), stream));
  const p38::RungArgs args{p,
                           {x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
                            scale.const_data_ptr<float>()},
                           out.mutable_data_ptr<float>(),
                           workspace.mutable_data_ptr(),
                           stream,
                           /*marks=*/nullptr};  // the ladder times phases; from PyTorch whole calls are timed
  try {
    r.run_gpu(args);  // enqueues only
  } catch (const p38::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, "rung ", r.label(), ": ", e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "rung ", r.label(), ": ", e.what());
  }
  // The workspace goes back to the allocator here, tied to `stream`: a later allocation on
  // that stream runs after the rung, so no synchronization is needed.
  return out;
}

/// p38_info's kernel (see the file comment); no tensors, no GPU.
std::string p38_info(IntArrayRef x_shape, IntArrayRef w_shape, IntArrayRef pool_kernel_size, IntArrayRef pool_stride,
                     IntArrayRef pool_padding, bool ceil_mode, bool count_include_pad, IntArrayRef stride,
                     IntArrayRef padding, IntArrayRef output_padding, IntArrayRef dilation, int64_t groups,
                     double clamp_min, double clamp_max, std::string_view rung) {
  const p38::Problem38 p = make_problem(x_shape, w_shape, pool_kernel_size, pool_stride, pool_padding, ceil_mode,
                                        count_include_pad, stride, padding, output_padding, dilation, groups,
                                        clamp_min, clamp_max);
  const p38::Rung& r = find(rung);
  std::ostringstream s;
  s << std::setprecision(17);
  auto triple = [](const p38::Triple& t) { return std::to_string(t.d) + "," + std::to_string(t.h) + "," + std::to_string(t.w); };
  s << "rung\t" << r.id << "_" << r.name << "\n";
  s << "pooled_size\t" << triple(p.pooled_size()) << "\n";
  s << "out_size\t" << triple(p.out_size()) << "\n";
  s << "spatial\t" << p.spatial() << "\n";
  s << "conv_macs\t" << p.conv_macs() << "\n";
  std::string why;
  try {
    if (r.is_gpu()) s << "workspace_bytes\t" << r.workspace_bytes(p) << "\n";
    why = r.why_unsupported(p);
  } catch (const std::exception& e) {
    why = e.what();
  }
  s << "unsupported\t" << one_line(why) << "\n";
  return s.str();
}

/// p38_rungs' kernel (see the file comment).
std::string p38_rungs() {
  std::ostringstream s;
  for (const p38::Rung* r : p38::rungs())
    s << r->id << "\t" << r->name << "\t" << (r->is_gpu() ? "gpu" : "cpu") << "\t" << (r->deterministic ? 1 : 0)
      << "\t" << r->conv_passes << "\t" << (r->precision == p38::Precision::Tf32 ? "tf32" : "fp32") << "\t"
      << one_line(r->idea) << "\n";
  return s.str();
}

}  // namespace
}  // namespace cpl

CPL_P38_FRAGMENT(TORCH_EXTENSION_NAME, m) {
  m.def(
      "p38_forward(Tensor x, Tensor weight, Tensor bias, Tensor scale, int[3] pool_kernel_size, "
      "int[3] pool_stride, int[3] pool_padding, bool ceil_mode, bool count_include_pad, int[3] stride, "
      "int[3] padding, int[3] output_padding, int[3] dilation, int groups, float clamp_min, float clamp_max, "
      "str rung, bool poison=False) -> Tensor");
  // No tensor arguments: a kernel given with the schema (CompositeImplicitAutograd) serves every call.
  m.def(
      "p38_info(int[] x_shape, int[] weight_shape, int[3] pool_kernel_size, int[3] pool_stride, "
      "int[3] pool_padding, bool ceil_mode, bool count_include_pad, int[3] stride, int[3] padding, "
      "int[3] output_padding, int[3] dilation, int groups, float clamp_min, float clamp_max, str rung) -> str",
      &cpl::p38_info);
  m.def("p38_rungs() -> str", &cpl::p38_rungs);
}

CPL_P38_IMPL(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, m) { m.impl("p38_forward", &cpl::p38_forward); }

CPL_P38_IMPL(TORCH_EXTENSION_NAME, Autograd, m) { m.impl("p38_forward", &cpl::p38_forward); }
