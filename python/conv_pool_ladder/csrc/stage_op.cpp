// A ladder stage as a PyTorch operator with its autograd formula in C++:
//
//   <module>::stage_forward(Tensor x, Tensor weight, Tensor? conv_bias, Tensor bias, str stage,
//                           int[2] stride=1, int[2] padding=0, int[2] output_padding=0,
//                           int[2] dilation=1, int groups=1, float scale=10.0) -> Tensor y (N, 1)
//
// y = scale * logsumexp_co(mean_{oh,ow} ConvTranspose2d(x) + bias), computed by the GPU stage
// named `stage` ("single_launch", "13" or "13_single_launch"). <module> is the extension
// module's name (conv_pool_ladder_s06, ...): a namespace can be defined by one library only.
//
// Two kernels are registered. CompositeExplicitAutograd (every backend, below autograd) runs
// the stage; non-CUDA tensors get the stage's ValueError. Autograd runs the stage and, when a
// graph is needed (grad mode on, some input requiring grad), records a StageBackward node whose
// backward is exact to every order. The per-call host path is C++ only.
#include "stage_op.hpp"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include <memory>
#include <string>

#include "stage_call.hpp"

#ifndef TORCH_EXTENSION_NAME
#error "TORCH_EXTENSION_NAME must be defined (torch.utils.cpp_extension defines it)"
#endif

// TORCH_LIBRARY pastes its namespace argument: expand the module name first.
#define CPL_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define CPL_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace cpl {
namespace {

using torch::autograd::variable_list;

/// mask[k, i] = 1 where input index i with tap k lands inside the output,
/// 0 <= i*stride - padding + k*dilation < out (valid_input_range in common/model/problem.hpp), else 0.
/// (kernel, in) in `opts`' dtype, built on the device.
at::Tensor tap_masks(int64_t in, int64_t out, int64_t stride, int64_t padding, int64_t dilation, int64_t kernel,
                     const at::TensorOptions& opts) {
  const at::Tensor i = at::arange(in, opts.dtype(at::kLong));
  const at::Tensor k = at::arange(kernel, opts.dtype(at::kLong)).unsqueeze(1);
  const at::Tensor pos = i * stride - padding + k * dilation;
  return at::logical_and(pos >= 0, pos < out).to(opts.dtype());
}

/// R[n,ci,kh,kw] = sum of x[n,ci] over the rows of mh[kh] and the columns of mw[kw].
at::Tensor tap_sums(const at::Tensor& x, const at::Tensor& mh, const at::Tensor& mw) {
  return at::matmul(at::matmul(mh, x), mw.t());
}

/// The backward of stage_forward, exact to every order, from the linearity identity
/// (docs/problem.md). With P = Hout*Wout and R as in tap_sums (masks Mh, Mw from tap_masks),
///   pooled[n,co] = cb[co] + (1/P) sum_{ci in group(co), kh, kw} w[ci,co',kh,kw] R[n,ci,kh,kw]
/// is linear in x, w and cb (co' = co mod Cout/groups). With G[n,co] = dL/dy[n] * scale *
/// softmax_co(pooled + bias)[n,co], the gradient of the log-sum-exp:
///   dL/dbias[co] = dL/dcb[co] = sum_n G[n,co]
///   dL/dw[ci,co',kh,kw]       = (1/P) sum_n G[n,co] R[n,ci,kh,kw]
///   dL/dx[n,ci,ih,iw]         = (1/P) sum_{co in group(ci), kh, kw} G[n,co] w[ci,co',kh,kw] Mh[kh,ih] Mw[kw,iw]
/// the gradients autograd gives the reference Model, up to rounding. apply() is made of
/// differentiable ATen ops. When a graph of the gradients is being built (create_graph=True:
/// grad mode is on inside apply), pooled is recomputed from x, w and cb by the identity instead
/// of taken from the stage, so that gradients of gradients are exact too.
///
/// A Node written directly, as PyTorch's own operators do, rather than a
/// torch::autograd::Function, which keeps per-input bookkeeping and a saved-data map on every
/// call: here a call takes microseconds, and the node is part of it.
/// Edges: 0 x, 1 weight, 2 conv_bias, 3 bias.
struct StageBackward : public torch::autograd::Node {
  // Inputs as SavedVariables: an in-place change to one before backward is an error, as for
  // PyTorch's own operators. pooled is the stage's, seen by nothing else: a plain tensor.
  torch::autograd::SavedVariable x, weight, conv_bias, bias;
  at::Tensor pooled;
  Geometry g;

  std::string name() const override { return "StageBackward"; }

  void release_variables() override {
    x.reset_data();
    weight.reset_data();
    conv_bias.reset_data();
    bias.reset_data();
    pooled.reset();
  }

  variable_list apply(variable_list&& grads) override {
    const at::Tensor x_ = x.unpack(), w_ = weight.unpack(), cb_ = conv_bias.unpack(), b_ = bias.unpack();
    TORCH_CHECK(pooled.defined(), "StageBackward: the graph was freed (backward twice? pass retain_graph=True)");
    at::Tensor pooled_ = pooled;
    const int64_t groups = g.groups;
    const int64_t n = x_.size(0), cin = x_.size(1), h = x_.size(2), w = x_.size(3);
    const int64_t cout_g = w_.size(1), kh = w_.size(2), kw = w_.size(3);
    const int64_t cout = cout_g * groups, cin_g = cin / groups;
    ladder::Problem p;  // for the output size only: PyTorch's formula, in one place
    p.in_h = h;
    p.in_w = w;
    p.kernel_size = {kh, kw};
    p.stride = g.stride;
    p.padding = g.padding;
    p.output_padding = g.output_padding;
    p.dilation = g.dilation;
    const int64_t hout = p.out_h(), wout = p.out_w();
    const double plane = double(hout) * double(wout);
    const at::Tensor mh = tap_masks(h, hout, g.stride.h, g.padding.h, g.dilation.h, kh, x_.options());  // (kH, H)
    const at::Tensor mw = tap_masks(w, wout, g.stride.w, g.padding.w, g.dilation.w, kw, x_.options());  // (kW, W)
    const at::Tensor w5 = w_.reshape({groups, cin_g, cout_g, kh, kw});

    at::Tensor r;
    if (c10::GradMode::is_enabled()) {  // create_graph: pooled as a differentiable function of x, w, cb
      r = tap_sums(x_, mh, mw);
      pooled_ = at::einsum("ngckl,gcjkl->ngj", {r.reshape({n, groups, cin_g, kh, kw}), w5}).reshape({n, cout}) / plane;
      pooled_ = pooled_ + cb_.reshape({1, cout});
    }

    const at::Tensor gr = grads[0].reshape({n, 1}) * g.scale * at::softmax(pooled_ + b_.reshape({1, cout}), 1);
    const at::Tensor g3 = gr.reshape({n, groups, cout_g});
    variable_list out(4);
    if (task_should_compute_output(2)) out[2] = gr.sum(0);
    if (task_should_compute_output(3)) out[3] = gr.sum(0).reshape(b_.sizes());
    if (task_should_compute_output(1)) {
      if (!r.defined()) r = tap_sums(x_, mh, mw);  // (N, Cin, kH, kW)
      out[1] = at::einsum("ngj,ngckl->gcjkl", {g3, r.reshape({n, groups, cin_g, kh, kw})})
                   .reshape({cin, cout_g, kh, kw}) / plane;
    }
    if (task_should_compute_output(0)) {
      const at::Tensor a = at::einsum("ngj,gcjkl->ngckl", {g3, w5}).reshape({n, cin, kh, kw}) / plane;
      out[0] = at::matmul(at::matmul(mh.t(), a), mw);  // (N, Cin, H, W)
    }
    return out;
  }
};

at::Tensor conv_bias_or_zeros(const std::optional<at::Tensor>& conv_bias, const at::Tensor& weight,
                              int64_t groups) {
  return conv_bias && conv_bias->defined() ? *conv_bias : zero_conv_bias(weight, groups);
}

/// CompositeExplicitAutograd: the stage alone (inference mode, or below autograd).
at::Tensor stage_forward_impl(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& conv_bias, const at::Tensor& bias,
                              std::string_view stage, c10::IntArrayRef stride, c10::IntArrayRef padding,
                              c10::IntArrayRef output_padding, c10::IntArrayRef dilation, int64_t groups,
                              double scale) {
  const ladder::StageDescriptor& d = find_gpu_stage(stage);
  const Geometry g = make_geometry(stride, padding, output_padding, dilation, groups, scale);
  return run_stage(d, x, weight, conv_bias_or_zeros(conv_bias, weight, groups), bias, g).y;
}

/// Autograd: runs the stage (directly: the operator calls no other operator, so nothing below
/// autograd needs a redispatch), then records a StageBackward node when a graph is needed (grad
/// mode on and some input requiring grad), as PyTorch's generated autograd kernels do. The node
/// is recorded after the launch, while the GPU runs.
at::Tensor stage_forward_autograd(const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& conv_bias, const at::Tensor& bias,
                                  std::string_view stage, c10::IntArrayRef stride, c10::IntArrayRef padding,
                                  c10::IntArrayRef output_padding, c10::IntArrayRef dilation, int64_t groups,
                                  double scale) {
  const ladder::StageDescriptor& d = find_gpu_stage(stage);
  const Geometry g = make_geometry(stride, padding, output_padding, dilation, groups, scale);
  const at::Tensor cb = conv_bias_or_zeros(conv_bias, weight, groups);
  StageOutputs out = run_stage(d, x, weight, cb, bias, g);  // checks every argument first
  if (!torch::autograd::compute_requires_grad(x, weight, cb, bias)) return out.y;
  const std::shared_ptr<StageBackward> node(new StageBackward(), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(x, weight, cb, bias));
  node->x = torch::autograd::SavedVariable(x, false);
  node->weight = torch::autograd::SavedVariable(weight, false);
  node->conv_bias = torch::autograd::SavedVariable(cb, false);
  node->bias = torch::autograd::SavedVariable(bias, false);
  node->pooled = out.pooled;
  node->g = g;
  torch::autograd::set_history(out.y, node);
  return out.y;
}

}  // namespace

const char* stage_forward_op_name() { return C10_STRINGIZE(TORCH_EXTENSION_NAME) "::stage_forward"; }

at::Tensor call_stage_forward(const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& conv_bias, const at::Tensor& bias,
                              std::string_view stage, c10::IntArrayRef stride, c10::IntArrayRef padding,
                              c10::IntArrayRef output_padding, c10::IntArrayRef dilation, int64_t groups,
                              double scale) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(stage_forward_op_name(), "")
                             .typed<decltype(stage_forward_impl)>();
  return op.call(x, weight, conv_bias, bias, stage, stride, padding, output_padding, dilation, groups, scale);
}

}  // namespace cpl

CPL_LIBRARY(TORCH_EXTENSION_NAME, m) {
  m.def(
      "stage_forward(Tensor x, Tensor weight, Tensor? conv_bias, Tensor bias, str stage, "
      "int[2] stride=1, int[2] padding=0, int[2] output_padding=0, int[2] dilation=1, int groups=1, "
      "float scale=10.0) -> Tensor");
}

CPL_LIBRARY_IMPL(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, m) {
  m.impl("stage_forward", &cpl::stage_forward_impl);
}

CPL_LIBRARY_IMPL(TORCH_EXTENSION_NAME, Autograd, m) {
  m.impl("stage_forward", &cpl::stage_forward_autograd);
}
