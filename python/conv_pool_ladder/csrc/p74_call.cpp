// Problem 74 (tracks/p74_backward) in PyTorch: the track's GPU rungs as operators of the extension
// module's library, torch.ops.<module>.p74_*, added as a fragment to the library stage_op.cpp
// defines (one namespace per module). The problem's parameters, in every operator below, are
// <params> = int[3] stride, int[3] padding, int[3] output_padding, int[3] dilation, int groups
// (nn.ConvTranspose3d's; kernel_size comes from the weight's shape), float negative_slope
// (nn.LeakyReLU's, both activations), int[3] pool_kernel_size, int[3] pool_stride,
// int[3] pool_padding, int[3] pool_dilation, bool ceil_mode (nn.MaxPool3d's; pool_stride given
// explicitly: the Python side turns None into the kernel size).
//
//   p74_forward(str rung, Tensor x, Tensor weight, Tensor bias, Tensor multiplier, <params>,
//               bool poison=False) -> (Tensor out, Tensor argmax, Tensor y_saved)
//       MaxPool3d(lrelu(multiplier * lrelu(ConvTranspose3d(x)))) by one forward GPU rung ("04",
//       "subpixel_forward" or "04_subpixel_forward"). out float32, argmax int32 (the window offset
//       of each window's first maximum, oracle.hpp) and y_saved float32 (the ConvTranspose3d
//       output, bias included, at that position), each (batch, out_channels, oD, oH, oW).
//   p74_backward(str rung, Tensor grad_out, Tensor x, Tensor weight, Tensor bias, Tensor multiplier,
//                Tensor argmax, Tensor y_saved, <params>, bool poison=False)
//       -> (Tensor grad_x, Tensor grad_weight, Tensor grad_bias, Tensor grad_multiplier)
//       the four gradients by one backward GPU rung ("09", ...), from the upstream gradient and
//       the state p74_forward saved; shaped as x, weight, bias and multiplier.
//   p74_info(str rung, int[] x_shape, int[] weight_shape, <params>) -> str
//       the problem as the track sees it, lines "key\tvalue": conv_size, out_size, conv_macs
//       (Problem74::conv_macs), forward_workspace_bytes / backward_workspace_bytes (where the rung
//       has that pass) and unsupported (the rung's reason, "" when it can run the problem).
//   p74_rungs() -> str
//       the track's rungs in ladder order, lines
//       "id\tname\tgpu|cpu\tforward\tbackward\tdeterministic\tprecision\tidea" (forward / backward: 1
//       when p74_forward / p74_backward can run the rung, a GPU pass; precision: fp32 or tf32, the
//       bound its forward is held to, tolerance.hpp).
//
// Operators, not pybind functions, as csrc/p38_call.cpp (see there): _build.py compiles this file
// only into a module built with_p74. The kernels are registered for CompositeExplicitAutograd and
// for Autograd, where they record nothing: the gradient comes from python/conv_pool_ladder/p74.py's
// autograd.Function, which calls p74_backward itself.
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
#include <tuple>

#include "track_call.hpp"
#include "p74_backward/rung.hpp"  // not "rung.hpp": common/ and csrc/ are on the include path too

#ifndef TORCH_EXTENSION_NAME
#error "TORCH_EXTENSION_NAME must be defined (torch.utils.cpp_extension defines it)"
#endif

// TORCH_LIBRARY_* paste their namespace argument: expand the module name first (as stage_op.cpp).
#define CPL_P74_FRAGMENT(ns, m) TORCH_LIBRARY_FRAGMENT(ns, m)
#define CPL_P74_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace cpl {
namespace {

namespace p74 = ladder::p74;
using c10::IntArrayRef;
using track::check_tensor;
using track::one_line;
using track::to_triple;

/// The problem's parameters besides the shapes, as the operators take them.
struct Params {
  IntArrayRef stride, padding, output_padding, dilation;
  int64_t groups;
  double negative_slope;
  IntArrayRef pool_kernel_size, pool_stride, pool_padding, pool_dilation;
  bool ceil_mode;
};

/// The Problem74 of a call: sizes from x's and the weight's shapes, the modules' parameters,
/// validated as PyTorch would (Problem74::validate). ValueError naming the shape or parameter.
p74::Problem74 make_problem(IntArrayRef x_shape, IntArrayRef w_shape, const Params& a) {
  TORCH_CHECK_VALUE(x_shape.size() == 5, "x must be 5-D (batch, in_channels, depth, height, width), got shape ",
                    x_shape);
  TORCH_CHECK_VALUE(w_shape.size() == 5,
                    "weight must be 5-D (in_channels, out_channels/groups, kD, kH, kW) as in nn.ConvTranspose3d, "
                    "got shape ", w_shape);
  TORCH_CHECK_VALUE(a.groups >= 1, "groups must be positive, got ", a.groups);
  TORCH_CHECK_VALUE(w_shape[0] == x_shape[1], "weight.size(0) = ", w_shape[0], " must equal x's in_channels = ",
                    x_shape[1], " (nn.ConvTranspose3d's weight is (in_channels, out_channels/groups, kD, kH, kW))");
  p74::Problem74 p;
  p.batch = x_shape[0];
  p.in_channels = x_shape[1];
  p.in_size = {x_shape[2], x_shape[3], x_shape[4]};
  p.conv.kernel_size = {w_shape[2], w_shape[3], w_shape[4]};
  p.conv.stride = to_triple("stride", a.stride);
  p.conv.padding = to_triple("padding", a.padding);
  p.conv.output_padding = to_triple("output_padding", a.output_padding);
  p.conv.dilation = to_triple("dilation", a.dilation);
  p.conv.groups = a.groups;
  p.negative_slope = a.negative_slope;
  p.pool.kernel_size = to_triple("pool_kernel_size", a.pool_kernel_size);
  p.pool.stride = to_triple("pool_stride", a.pool_stride);
  p.pool.padding = to_triple("pool_padding", a.pool_padding);
  p.pool.dilation = to_triple("pool_dilation", a.pool_dilation);
  p.pool.ceil_mode = a.ceil_mode;
  try {
    p.out_channels = p74::checked_mul(w_shape[1], a.groups, "out_channels (weight.size(1) * groups)");
    p.validate();
  } catch (const p74::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  return p;
}

/// The rung by id, name or id_name; ValueError listing the rungs when there is none.
const p74::Rung& find(std::string_view key) {
  try {
    return p74::find_rung(std::string(key));
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

/// "01_naive, 02_fused_chain, ...": the rungs with a GPU forward (or backward) pass.
std::string gpu_rungs(bool backward) {
  std::string s;
  for (const p74::Rung* r : p74::rungs())
    if (backward ? r->backward != nullptr : r->forward != nullptr) s += (s.empty() ? "" : ", ") + r->id + "_" + r->name;
  return s;
}

std::string unsupported_reason(const p74::Rung& r, const p74::Problem74& p) {
  try {
    return r.why_unsupported(p);
  } catch (const std::exception& e) {
    return e.what();
  }
}

/// A rung with a GPU pass of this direction that can run p; ValueError naming the rung and why.
const p74::Rung& runnable_rung(std::string_view key, const p74::Problem74& p, bool backward) {
  const p74::Rung& r = find(key);
  const bool has = backward ? (r.backward != nullptr && r.backward_workspace != nullptr)
                            : (r.forward != nullptr && r.forward_workspace != nullptr);
  TORCH_CHECK_VALUE(has, "rung ", r.label(), " has no GPU ", backward ? "backward" : "forward", " pass; ",
                    backward ? "p74_backward" : "p74_forward", " runs these rungs: ", gpu_rungs(backward));
  const std::string why = unsupported_reason(r, p);
  TORCH_CHECK_VALUE(why.empty(), "rung ", r.label(), " cannot run this problem: ", why);
  return r;
}

void check_shape(const at::Tensor& t, const char* name, IntArrayRef expected, const char* what) {
  TORCH_CHECK_VALUE(t.sizes() == expected, name, " must have shape ", expected, " (", what, "), got ", t.sizes());
}

/// The checks both passes share: x's device first (every other tensor must be on it), the four
/// inputs, the problem, and the bias's and the multiplier's shapes. Returns the problem.
p74::Problem74 check_inputs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const at::Tensor& multiplier, const Params& a) {
  TORCH_CHECK_VALUE(x.defined() && x.is_cuda(), "x must be a CUDA tensor",
                    x.defined() ? ", got one on " + x.device().str() : std::string(", got an undefined tensor"));
  const at::Device device = x.device();
  check_tensor(x, "x", device);
  check_tensor(weight, "weight", device);
  check_tensor(bias, "bias", device);
  check_tensor(multiplier, "multiplier", device);
  p74::Problem74 p = make_problem(x.sizes(), weight.sizes(), a);
  const int64_t c = p.out_channels;
  check_shape(bias, "bias", {c}, "nn.ConvTranspose3d's bias: out_channels");
  const bool mult_ok = multiplier.sizes() == IntArrayRef{c, 1, 1, 1} || multiplier.sizes() == IntArrayRef{c};
  TORCH_CHECK_VALUE(mult_ok, "multiplier must have shape (", c, ", 1, 1, 1) or (", c, "), got ", multiplier.sizes());
  return p;
}

/// (batch, out_channels, oD, oH, oW): out, argmax, y_saved and grad_out.
std::vector<int64_t> pool_shape(const p74::Problem74& p) {
  const p74::Triple o = p.out_size();
  return {p.batch, p.out_channels, o.d, o.h, o.w};
}

/// `bytes` (at least one, so the pointer is never null) from the caching allocator, whose blocks
/// are 512-byte aligned: the 256 bytes the rung contract promises.
at::Tensor workspace(size_t bytes, const at::Device& device) {
  at::Tensor w = at::detail::empty_cuda({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, at::kByte, device,
                                        std::nullopt);
  TORCH_CHECK(reinterpret_cast<uintptr_t>(w.const_data_ptr()) % 256 == 0,
              "p74: the caching allocator returned a workspace that is not 256-byte aligned");
  return w;
}

at::Tensor empty(IntArrayRef shape, at::ScalarType dtype, const at::Device& device) {
  return at::detail::empty_cuda(shape, dtype, device, std::nullopt);
}

/// All bits set: NaN for float32, -1 for int32 (the poison the rung contract names).
void poison_fill(const at::Tensor& t, cudaStream_t stream) {
  C10_CUDA_CHECK(cudaMemsetAsync(t.mutable_data_ptr(), 0xFF, t.nbytes(), stream));
}

p74::DeviceInputs device_inputs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& multiplier) {
  return {x.const_data_ptr<float>(), weight.const_data_ptr<float>(), bias.const_data_ptr<float>(),
          multiplier.const_data_ptr<float>()};
}

/// Runs `launch` (which enqueues a rung), turning the rung's exceptions into PyTorch's: ValueError
/// for an InvalidProblem (a size the rung's kernels cannot index, say), RuntimeError otherwise.
template <typename F>
void run_rung(const p74::Rung& r, F&& launch) {
  try {
    launch();
  } catch (const p74::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, "rung ", r.label(), ": ", e.what());
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "rung ", r.label(), ": ", e.what());
  }
}

template <typename F>
size_t workspace_bytes(const p74::Rung& r, F&& query) {
  try {
    return query();
  } catch (const p74::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, "rung ", r.label(), ": ", e.what());
  }
}

/// p74_forward's kernel (see the file comment). Checks every argument, allocates the outputs and
/// the workspace from PyTorch's caching allocator and enqueues the rung on torch's current stream
/// of x's device; no synchronization. ValueError / TypeError name the tensor or parameter at
/// fault, ValueError gives the rung's reason when it cannot run the problem, RuntimeError a failed
/// launch. With `poison` the outputs are filled with NaN (argmax with -1) first, so that an
/// element the rung does not write shows (tests only: three memsets).
std::tuple<at::Tensor, at::Tensor, at::Tensor> p74_forward(
    std::string_view rung, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
    const at::Tensor& multiplier, IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
    IntArrayRef dilation, int64_t groups, double negative_slope, IntArrayRef pool_kernel_size, IntArrayRef pool_stride,
    IntArrayRef pool_padding, IntArrayRef pool_dilation, bool ceil_mode, bool poison) {
  const Params a{stride,           padding,     output_padding, dilation,      groups,   negative_slope,
                 pool_kernel_size, pool_stride, pool_padding,   pool_dilation, ceil_mode};
  const p74::Problem74 p = check_inputs(x, weight, bias, multiplier, a);
  const p74::Rung& r = runnable_rung(rung, p, /*backward=*/false);

  const at::Device device = x.device();
  const c10::cuda::CUDAGuard guard(device);
  const auto shape = pool_shape(p);
  at::Tensor ws = workspace(workspace_bytes(r, [&] { return r.forward_workspace(p); }), device);
  at::Tensor out = empty(shape, at::kFloat, device);
  at::Tensor argmax = empty(shape, at::kInt, device);
  at::Tensor y_saved = empty(shape, at::kFloat, device);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  if (poison) {
    poison_fill(out, stream);
    poison_fill(argmax, stream);
    poison_fill(y_saved, stream);
  }
  const p74::ForwardArgs args{p,
                              device_inputs(x, weight, bias, multiplier),
                              out.mutable_data_ptr<float>(),
                              argmax.mutable_data_ptr<int32_t>(),
                              y_saved.mutable_data_ptr<float>(),
                              ws.mutable_data_ptr(),
                              stream,
                              /*marks=*/nullptr};  // the ladder times phases; from PyTorch whole calls are timed
  run_rung(r, [&] { r.forward(args); });
  // The workspace returns to the allocator here, tied to `stream`: a later allocation on that
  // stream runs after the rung, so no synchronization is needed.
  return {out, argmax, y_saved};
}

/// p74_backward's kernel (see the file comment); checks, allocation, stream and errors as
/// p74_forward. grad_out, argmax (int32) and y_saved must be (batch, out_channels, oD, oH, oW).
/// The gradients are new tensors shaped as x, weight, bias and multiplier (its shape as given).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> p74_backward(
    std::string_view rung, const at::Tensor& grad_out, const at::Tensor& x, const at::Tensor& weight,
    const at::Tensor& bias, const at::Tensor& multiplier, const at::Tensor& argmax, const at::Tensor& y_saved,
    IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding, IntArrayRef dilation, int64_t groups,
    double negative_slope, IntArrayRef pool_kernel_size, IntArrayRef pool_stride, IntArrayRef pool_padding,
    IntArrayRef pool_dilation, bool ceil_mode, bool poison) {
  const Params a{stride,           padding,     output_padding, dilation,      groups,   negative_slope,
                 pool_kernel_size, pool_stride, pool_padding,   pool_dilation, ceil_mode};
  const p74::Problem74 p = check_inputs(x, weight, bias, multiplier, a);
  const at::Device device = x.device();
  check_tensor(grad_out, "grad_out", device);
  check_tensor(argmax, "argmax", device, at::kInt);
  check_tensor(y_saved, "y_saved", device);
  const auto shape = pool_shape(p);
  check_shape(grad_out, "grad_out", shape, "the MaxPool3d output's: batch, out_channels, oD, oH, oW");
  check_shape(argmax, "argmax", shape, "what p74_forward returned");
  check_shape(y_saved, "y_saved", shape, "what p74_forward returned");
  const p74::Rung& r = runnable_rung(rung, p, /*backward=*/true);

  const c10::cuda::CUDAGuard guard(device);
  at::Tensor ws = workspace(workspace_bytes(r, [&] { return r.backward_workspace(p); }), device);
  at::Tensor grad_x = empty(x.sizes(), at::kFloat, device);
  at::Tensor grad_weight = empty(weight.sizes(), at::kFloat, device);
  at::Tensor grad_bias = empty(bias.sizes(), at::kFloat, device);
  at::Tensor grad_multiplier = empty(multiplier.sizes(), at::kFloat, device);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  if (poison)
    for (const at::Tensor* t : {&grad_x, &grad_weight, &grad_bias, &grad_multiplier}) poison_fill(*t, stream);
  const p74::BackwardArgs args{p,
                               device_inputs(x, weight, bias, multiplier),
                               grad_out.const_data_ptr<float>(),
                               argmax.const_data_ptr<int32_t>(),
                               y_saved.const_data_ptr<float>(),
                               grad_x.mutable_data_ptr<float>(),
                               grad_weight.mutable_data_ptr<float>(),
                               grad_bias.mutable_data_ptr<float>(),
                               grad_multiplier.mutable_data_ptr<float>(),
                               ws.mutable_data_ptr(),
                               stream,
                               /*marks=*/nullptr};
  run_rung(r, [&] { r.backward(args); });
  return {grad_x, grad_weight, grad_bias, grad_multiplier};
}

std::string triple_str(const p74::Triple& t) {
  return std::to_string(t.d) + "," + std::to_string(t.h) + "," + std::to_string(t.w);
}

/// p74_info's kernel (see the file comment); no tensors, no GPU.
std::string p74_info(std::string_view rung, IntArrayRef x_shape, IntArrayRef w_shape, IntArrayRef stride,
                     IntArrayRef padding, IntArrayRef output_padding, IntArrayRef dilation, int64_t groups,
                     double negative_slope, IntArrayRef pool_kernel_size, IntArrayRef pool_stride,
                     IntArrayRef pool_padding, IntArrayRef pool_dilation, bool ceil_mode) {
  const Params a{stride,           padding,     output_padding, dilation,      groups,   negative_slope,
                 pool_kernel_size, pool_stride, pool_padding,   pool_dilation, ceil_mode};
  const p74::Problem74 p = make_problem(x_shape, w_shape, a);
  const p74::Rung& r = find(rung);
  std::ostringstream s;
  s << std::setprecision(17);
  s << "rung\t" << r.id << "_" << r.name << "\n";
  s << "conv_size\t" << triple_str(p.conv_size()) << "\n";
  s << "out_size\t" << triple_str(p.out_size()) << "\n";
  s << "conv_macs\t" << p.conv_macs() << "\n";
  std::string why;
  try {
    if (r.forward_workspace) s << "forward_workspace_bytes\t" << r.forward_workspace(p) << "\n";
    if (r.backward_workspace) s << "backward_workspace_bytes\t" << r.backward_workspace(p) << "\n";
    why = r.why_unsupported(p);
  } catch (const std::exception& e) {
    why = e.what();
  }
  s << "unsupported\t" << one_line(why) << "\n";
  return s.str();
}

/// p74_rungs' kernel (see the file comment).
std::string p74_rungs() {
  std::ostringstream s;
  for (const p74::Rung* r : p74::rungs())
    s << r->id << "\t" << r->name << "\t" << (r->is_cpu() ? "cpu" : "gpu") << "\t" << (r->forward ? 1 : 0) << "\t"
      << (r->backward ? 1 : 0) << "\t" << (r->deterministic ? 1 : 0) << "\t" << p74::precision_name(r->precision) << "\t" << one_line(r->idea)
      << "\n";
  return s.str();
}

}  // namespace
}  // namespace cpl

#define CPL_P74_PARAMS                                                                                       \
  "int[3] stride, int[3] padding, int[3] output_padding, int[3] dilation, int groups, float negative_slope, " \
  "int[3] pool_kernel_size, int[3] pool_stride, int[3] pool_padding, int[3] pool_dilation, bool ceil_mode"

CPL_P74_FRAGMENT(TORCH_EXTENSION_NAME, m) {
  m.def("p74_forward(str rung, Tensor x, Tensor weight, Tensor bias, Tensor multiplier, " CPL_P74_PARAMS
        ", bool poison=False) -> (Tensor, Tensor, Tensor)");
  m.def("p74_backward(str rung, Tensor grad_out, Tensor x, Tensor weight, Tensor bias, Tensor multiplier, "
        "Tensor argmax, Tensor y_saved, " CPL_P74_PARAMS ", bool poison=False) -> (Tensor, Tensor, Tensor, Tensor)");
  // No tensor arguments: a kernel given with the schema (CompositeImplicitAutograd) serves every call.
  m.def("p74_info(str rung, int[] x_shape, int[] weight_shape, " CPL_P74_PARAMS ") -> str", &cpl::p74_info);
  m.def("p74_rungs() -> str", &cpl::p74_rungs);
}

CPL_P74_IMPL(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, m) {
  m.impl("p74_forward", &cpl::p74_forward);
  m.impl("p74_backward", &cpl::p74_backward);
}

CPL_P74_IMPL(TORCH_EXTENSION_NAME, Autograd, m) {
  m.impl("p74_forward", &cpl::p74_forward);
  m.impl("p74_backward", &cpl::p74_backward);
}
