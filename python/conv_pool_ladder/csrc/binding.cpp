// The PyTorch binding of the ladder's GPU stages: tensors in, a Problem and device pointers
// out, the stage's run_gpu on torch's current stream, tensors back. No logic of its own beyond
// converting and checking arguments: the math lives in the stages (stages/NN_name/), the
// problem model and its validation in common/problem.hpp.
//
// Built by conv_pool_ladder/_build.py with torch.utils.cpp_extension.load together with
// common/*.cpp, the GPU stages' sources and a generated registry (registered_stages()).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "problem.hpp"
#include "stage.hpp"

namespace {

/// The runner records CUDA events at each phase; from PyTorch we time whole calls instead.
class NoPhaseMarks : public ladder::PhaseMarks {
 public:
  void begin(ladder::Phase) override {}
};

std::string known_stages() {
  std::string s;
  for (const ladder::StageDescriptor* d : ladder::registered_stages()) {
    if (!s.empty()) s += ", ";
    s += d->id + "_" + d->name;
  }
  return s.empty() ? "none" : s;
}

/// Finds a stage by number ("06") or by folder name ("06_pool_before_conv").
const ladder::StageDescriptor& find_stage(const std::string& key) {
  for (const ladder::StageDescriptor* d : ladder::registered_stages())
    if (key == d->id || key == d->id + "_" + d->name) return *d;
  TORCH_CHECK_VALUE(false, "stage '", key, "' is not in this build of the extension (built: ",
                    known_stages(), ")");
  return *ladder::registered_stages().front();  // not reached
}

/// A spatial parameter: one value (both axes) or two (height, width), as PyTorch accepts.
ladder::Pair to_pair(const char* name, const std::vector<int64_t>& v) {
  TORCH_CHECK_VALUE(v.size() == 1 || v.size() == 2, name,
                    " must have one value or two (height, width), got ", v.size());
  return v.size() == 1 ? ladder::Pair::square(v[0]) : ladder::Pair{v[0], v[1]};
}

/// float32, CUDA, on x's device, contiguous, 16-byte aligned (stages use 16-byte loads).
void check_tensor(const at::Tensor& t, const char* name, const at::Device& device) {
  TORCH_CHECK_VALUE(t.defined(), name, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK_VALUE(t.device() == device, name, " is on ", t.device(), " but x is on ", device);
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, name, " must be float32, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.is_contiguous(), name, " must be contiguous (call .contiguous()), got strides ",
                    t.strides());
  TORCH_CHECK_VALUE(reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0, name,
                    " must be 16-byte aligned (a view with an odd storage offset? call .clone())");
}

void check_shape(const at::Tensor& t, const char* name, at::IntArrayRef expected, const char* what) {
  TORCH_CHECK_VALUE(t.sizes() == expected, name, " must have shape ", expected, " (", what, "), got ",
                    t.sizes());
}

/// Runs one GPU stage. Returns (pooled (N, Cout), y (N, 1)); writes into `pooled_out` and
/// `y_out` when given (the caller can poison them with NaN to catch unwritten elements).
std::vector<at::Tensor> run_stage(const std::string& stage_id, const at::Tensor& x,
                                  const at::Tensor& weight, const at::Tensor& conv_bias,
                                  const at::Tensor& bias, const std::vector<int64_t>& stride,
                                  const std::vector<int64_t>& padding,
                                  const std::vector<int64_t>& output_padding,
                                  const std::vector<int64_t>& dilation, int64_t groups, double scale,
                                  std::optional<at::Tensor> pooled_out, std::optional<at::Tensor> y_out) {
  const ladder::StageDescriptor& stage = find_stage(stage_id);
  TORCH_CHECK_VALUE(stage.is_gpu() && stage.workspace_bytes != nullptr, "stage ", stage.label(),
                    " is not a GPU stage");

  TORCH_CHECK_VALUE(x.defined() && x.is_cuda(), "x must be a CUDA tensor");
  const at::Device device = x.device();
  check_tensor(x, "x", device);
  check_tensor(weight, "weight", device);
  check_tensor(conv_bias, "conv_bias", device);
  check_tensor(bias, "bias", device);
  TORCH_CHECK_VALUE(x.dim() == 4, "x must be 4-D (batch, in_channels, height, width), got shape ", x.sizes());
  TORCH_CHECK_VALUE(weight.dim() == 4,
                    "weight must be 4-D (in_channels, out_channels/groups, kH, kW) as in "
                    "nn.ConvTranspose2d, got shape ", weight.sizes());
  TORCH_CHECK_VALUE(groups >= 1, "groups must be positive, got ", groups);

  ladder::Problem p;
  p.batch = x.size(0);
  p.in_channels = x.size(1);
  p.in_h = x.size(2);
  p.in_w = x.size(3);
  p.out_channels = weight.size(1) * groups;
  p.kernel_size = {weight.size(2), weight.size(3)};
  p.stride = to_pair("stride", stride);
  p.padding = to_pair("padding", padding);
  p.output_padding = to_pair("output_padding", output_padding);
  p.dilation = to_pair("dilation", dilation);
  p.groups = groups;
  p.scale = scale;
  TORCH_CHECK_VALUE(weight.size(0) == p.in_channels, "weight.size(0) = ", weight.size(0),
                    " must equal x's in_channels = ", p.in_channels,
                    " (nn.ConvTranspose2d's weight is (in_channels, out_channels/groups, kH, kW))");
  p.validate();  // throws ladder::InvalidProblem (std::invalid_argument -> ValueError)

  const int64_t cout = p.out_channels;
  check_shape(conv_bias, "conv_bias", {cout}, "out_channels");
  const bool bias_ok = bias.sizes() == at::IntArrayRef{cout} || bias.sizes() == at::IntArrayRef{cout, 1, 1};
  TORCH_CHECK_VALUE(bias_ok, "bias must have shape (", cout, ", 1, 1) or (", cout, "), got ", bias.sizes());

  const at::TensorOptions opts = x.options();
  at::Tensor pooled = pooled_out ? *pooled_out : at::empty({p.batch, cout}, opts);
  at::Tensor y = y_out ? *y_out : at::empty({p.batch, 1}, opts);
  check_tensor(pooled, "pooled", device);
  check_tensor(y, "y", device);
  check_shape(pooled, "pooled", {p.batch, cout}, "batch, out_channels");
  check_shape(y, "y", {p.batch, 1}, "batch, 1");

  const c10::cuda::CUDAGuard guard(device);
  const size_t ws_bytes = stage.workspace_bytes(p);
  // From the caching allocator, on the current stream: freed after return, reused in stream order.
  at::Tensor workspace = at::empty({static_cast<int64_t>(ws_bytes)}, opts.dtype(at::kByte));
  NoPhaseMarks marks;
  const ladder::GpuStageArgs args{p,
                                  {x.data_ptr<float>(), weight.data_ptr<float>(),
                                   conv_bias.data_ptr<float>(), bias.data_ptr<float>()},
                                  pooled.data_ptr<float>(),
                                  y.data_ptr<float>(),
                                  ws_bytes ? workspace.data_ptr() : nullptr,
                                  at::cuda::getCurrentCUDAStream(device.index()).stream(),
                                  marks};
  stage.run_gpu(args);  // enqueues only; throws ladder::CudaError / std::runtime_error
  return {pooled, y};
}

pybind11::list list_stages() {
  pybind11::list out;
  for (const ladder::StageDescriptor* d : ladder::registered_stages()) {
    pybind11::dict e;
    e["id"] = d->id;
    e["name"] = d->name;
    e["idea"] = d->idea;
    e["gpu"] = d->is_gpu();
    out.append(e);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "The conv-transpose -> global-pool ladder's GPU stages, callable on torch tensors";
  m.def("run_stage", &run_stage, pybind11::arg("stage_id"), pybind11::arg("x"), pybind11::arg("weight"),
        pybind11::arg("conv_bias"), pybind11::arg("bias"), pybind11::arg("stride"),
        pybind11::arg("padding"), pybind11::arg("output_padding"), pybind11::arg("dilation"),
        pybind11::arg("groups"), pybind11::arg("scale"), pybind11::arg("pooled") = pybind11::none(),
        pybind11::arg("y") = pybind11::none(),
        "Runs one GPU stage on torch's current stream; returns [pooled (N, Cout), y (N, 1)].");
  m.def("list_stages", &list_stages, "The stages built into this extension: [{id, name, idea, gpu}].");
}
