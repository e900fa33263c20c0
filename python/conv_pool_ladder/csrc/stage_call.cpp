// See stage_call.hpp. Everything here runs on every call, so it stays cheap: no string building
// unless a check fails, one allocation from the caching allocator (straight to it, not through
// the dispatcher), and the stage's prepare() hook looked up in a small set, not called again.
#include "stage_call.hpp"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

namespace cpl {
namespace {

/// The ladder program marks phases with CUDA events; from PyTorch whole calls are timed.
class NoPhaseMarks : public ladder::PhaseMarks {
 public:
  void begin(ladder::Phase) override {}
};

ladder::Pair to_pair(const char* name, c10::IntArrayRef v) {
  TORCH_CHECK_VALUE(v.size() == 1 || v.size() == 2, name, " must have one value or two (height, width), got ",
                    v.size(), " values: ", v);
  return v.size() == 1 ? ladder::Pair::square(v[0]) : ladder::Pair{v[0], v[1]};
}

/// float32, CUDA, on x's device, contiguous, 16-byte aligned (stages use 16-byte loads).
void check_tensor(const at::Tensor& t, const char* name, const at::Device& device) {
  TORCH_CHECK_VALUE(t.defined(), name, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK_VALUE(t.device() == device, name, " is on ", t.device(), " but x is on ", device);
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, name, " must be float32, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.is_contiguous(), name, " must be contiguous (call .contiguous()), got strides ",
                    t.strides(), " for shape ", t.sizes());
  TORCH_CHECK_VALUE(reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0, name,
                    " must be 16-byte aligned (a view with an odd storage offset? call .clone())");
}

void check_shape(const at::Tensor& t, const char* name, c10::IntArrayRef expected, const char* what) {
  TORCH_CHECK_VALUE(t.sizes() == expected, name, " must have shape ", expected, " (", what, "), got ", t.sizes());
}

bool matches(const ladder::StageDescriptor& d, std::string_view key) {
  if (key == d.id || key == d.name) return true;
  // "13_single_launch", compared in place: no temporary string per call.
  return key.size() == d.id.size() + 1 + d.name.size() && key.substr(0, d.id.size()) == d.id &&
         key[d.id.size()] == '_' && key.substr(d.id.size() + 1) == d.name;
}

/// Every size and parameter of a problem: where a self-resetting stage's workspace layout (and so
/// which bytes its previous run left at zero) depends on the problem.
using ProblemShape = std::array<int64_t, 16>;
ProblemShape geometry_of(const ladder::Problem& p) {
  return {p.batch, p.in_channels, p.out_channels, p.in_h, p.in_w, p.kernel_size.h, p.kernel_size.w,
          p.stride.h, p.stride.w, p.padding.h, p.padding.w, p.output_padding.h, p.output_padding.w,
          p.dilation.h, p.dilation.w, p.groups};
}

/// The workspace of a stage that leaves it as its run needs it (self_resetting_workspace): one
/// per (stage, device, stream), kept for later calls, so a call costs no memset and no allocation
/// for it. It is zeroed when created, grown, or used for a problem other than the previous call's
/// (the layout, and so the bytes the previous run left at zero, depend on the problem). Per
/// stream, because two streams running the stage at once would share its counters; reuse on one
/// stream is ordered by the stream itself.
void* persistent_workspace(const ladder::StageDescriptor& stage, const ladder::Problem& p, size_t bytes,
                           const at::Device& device, cudaStream_t stream) {
  using Key = std::tuple<const ladder::StageDescriptor*, int, cudaStream_t>;
  struct Kept {
    at::Tensor buffer;
    ProblemShape geometry{};
  };
  static std::mutex mutex;
  static std::map<Key, Kept> workspaces;
  const std::lock_guard<std::mutex> lock(mutex);
  Kept& ws = workspaces[Key{&stage, device.index(), stream}];
  const ProblemShape g = geometry_of(p);
  if (!ws.buffer.defined() || size_t(ws.buffer.numel()) < bytes) {
    ws.buffer = at::detail::empty_cuda({static_cast<int64_t>(bytes)}, at::kByte, device, std::nullopt);
    ws.geometry = {};  // forces the memset below
  }
  if (ws.geometry != g) {
    C10_CUDA_CHECK(cudaMemsetAsync(ws.buffer.mutable_data_ptr(), 0, size_t(ws.buffer.numel()), stream));
    ws.geometry = g;
  }
  return ws.buffer.mutable_data_ptr();
}

/// Calls stage.prepare(p) the first time this (stage, device, geometry) is seen. prepare() does
/// host-side setup such as cudaFuncSetAttribute, which is per device and costs microseconds: a
/// set lookup per call instead. The set grows by one entry (~200 bytes) per distinct geometry.
void prepare_once(const ladder::StageDescriptor& stage, const ladder::Problem& p, int device) {
  if (stage.prepare == nullptr) return;
  using Key = std::tuple<const ladder::StageDescriptor*, int, std::array<int64_t, 16>>;
  static std::mutex mutex;
  static std::set<Key> prepared;
  const Key key{&stage, device,
                {p.batch, p.in_channels, p.out_channels, p.in_h, p.in_w, p.kernel_size.h, p.kernel_size.w,
                 p.stride.h, p.stride.w, p.padding.h, p.padding.w, p.output_padding.h, p.output_padding.w,
                 p.dilation.h, p.dilation.w, p.groups}};
  const std::lock_guard<std::mutex> lock(mutex);
  if (prepared.count(key)) return;
  try {
    stage.prepare(p);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "stage ", stage.label(), ": prepare failed: ", e.what());
  }
  prepared.insert(key);
}

size_t align16(size_t bytes) { return (bytes + 15) / 16 * 16; }

/// A contiguous float32 tensor of `sizes` at byte `offset` (a multiple of 16) of `buffer`'s
/// storage: one allocation for several arrays. A tensor of its own (own version counter, no
/// autograd history), not a view; it keeps the whole buffer alive.
at::Tensor float_tensor_in(const at::Tensor& buffer, size_t offset, c10::IntArrayRef sizes) {
  at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(buffer.storage()), buffer.key_set(),
                                                         caffe2::TypeMeta::Make<float>());
  t.unsafeGetTensorImpl()->set_storage_offset(static_cast<int64_t>(offset / sizeof(float)));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

}  // namespace

Geometry make_geometry(c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef output_padding,
                       c10::IntArrayRef dilation, int64_t groups, double scale) {
  return {to_pair("stride", stride), to_pair("padding", padding), to_pair("output_padding", output_padding),
          to_pair("dilation", dilation), groups, scale};
}

std::string built_stages() {
  std::string s;
  for (const ladder::StageDescriptor* d : ladder::registered_stages()) {
    if (!s.empty()) s += ", ";
    s += d->id + "_" + d->name;
  }
  return s.empty() ? "none" : s;
}

const ladder::StageDescriptor& find_gpu_stage(std::string_view key) {
  for (const ladder::StageDescriptor* d : ladder::registered_stages()) {
    if (!matches(*d, key)) continue;
    TORCH_CHECK_VALUE(d->is_gpu() && d->workspace_bytes != nullptr, "stage ", d->label(), " is not a GPU stage");
    return *d;
  }
  TORCH_CHECK_VALUE(false, "stage '", key, "' is not in this build of the extension (built: ", built_stages(),
                    "); give a number, a folder name or a name");
}

at::Tensor zero_conv_bias(const at::Tensor& weight, int64_t groups) {
  TORCH_CHECK_VALUE(weight.defined() && weight.dim() == 4,
                    "weight must be 4-D (in_channels, out_channels/groups, kH, kW) as in nn.ConvTranspose2d, got ",
                    weight.defined() ? "shape " + c10::str(weight.sizes()) : std::string("an undefined tensor"));
  return at::zeros({weight.size(1) * groups}, weight.options());
}

StageOutputs run_stage(const ladder::StageDescriptor& stage, const at::Tensor& x, const at::Tensor& weight,
                       const at::Tensor& conv_bias, const at::Tensor& bias, const Geometry& geometry,
                       const std::optional<at::Tensor>& pooled_out, const std::optional<at::Tensor>& y_out) {
  TORCH_CHECK_VALUE(x.defined() && x.is_cuda(), "x must be a CUDA tensor",
                    x.defined() ? ", got one on " + x.device().str() : std::string(", got an undefined tensor"));
  const at::Device device = x.device();
  check_tensor(x, "x", device);
  check_tensor(weight, "weight", device);
  check_tensor(bias, "bias", device);
  TORCH_CHECK_VALUE(x.dim() == 4, "x must be 4-D (batch, in_channels, height, width), got shape ", x.sizes());
  TORCH_CHECK_VALUE(weight.dim() == 4,
                    "weight must be 4-D (in_channels, out_channels/groups, kH, kW) as in "
                    "nn.ConvTranspose2d, got shape ", weight.sizes());
  TORCH_CHECK_VALUE(geometry.groups >= 1, "groups must be positive, got ", geometry.groups);

  ladder::Problem p;
  p.batch = x.size(0);
  p.in_channels = x.size(1);
  p.in_h = x.size(2);
  p.in_w = x.size(3);
  p.out_channels = weight.size(1) * geometry.groups;
  p.kernel_size = {weight.size(2), weight.size(3)};
  p.stride = geometry.stride;
  p.padding = geometry.padding;
  p.output_padding = geometry.output_padding;
  p.dilation = geometry.dilation;
  p.groups = geometry.groups;
  p.scale = geometry.scale;
  TORCH_CHECK_VALUE(weight.size(0) == p.in_channels, "weight.size(0) = ", weight.size(0),
                    " must equal x's in_channels = ", p.in_channels,
                    " (nn.ConvTranspose2d's weight is (in_channels, out_channels/groups, kH, kW))");
  try {
    p.validate();
  } catch (const ladder::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, e.what());  // ValueError on every path (pybind and torch.ops)
  }

  const int64_t cout = p.out_channels;
  check_tensor(conv_bias, "conv_bias", device);
  check_shape(conv_bias, "conv_bias", {cout}, "out_channels");
  const bool bias_ok = bias.sizes() == c10::IntArrayRef{cout} || bias.sizes() == c10::IntArrayRef{cout, 1, 1};
  TORCH_CHECK_VALUE(bias_ok, "bias must have shape (", cout, ", 1, 1) or (", cout, "), got ", bias.sizes());

  const c10::cuda::CUDAGuard guard(device);
  prepare_once(stage, p, device.index());
  // One allocation from the caching allocator holds the workspace (unless the stage keeps a
  // persistent one: persistent_workspace), pooled and y (those the caller did not give): each
  // allocation costs host time on every call. It is returned when the last tensor on it goes
  // (y, or pooled kept by the backward; the workspace is a few KB) and reused in stream order on
  // the current stream, so no synchronization is needed.
  const size_t ws_bytes = stage.workspace_bytes(p);
  const bool persistent = stage.self_resetting_workspace && ws_bytes;
  const size_t pooled_at = persistent ? 0 : align16(ws_bytes);
  const size_t y_at = pooled_out ? pooled_at : align16(pooled_at + size_t(p.pooled_elems()) * sizeof(float));
  const size_t buffer_bytes = y_out ? y_at : y_at + size_t(p.batch) * sizeof(float);
  at::Tensor buffer;
  if (buffer_bytes)
    buffer = at::detail::empty_cuda({static_cast<int64_t>(buffer_bytes)}, at::kByte, device, std::nullopt);
  at::Tensor pooled = pooled_out ? *pooled_out : float_tensor_in(buffer, pooled_at, {p.batch, cout});
  at::Tensor y = y_out ? *y_out : float_tensor_in(buffer, y_at, {p.batch, 1});
  if (pooled_out) {
    check_tensor(pooled, "pooled", device);
    check_shape(pooled, "pooled", {p.batch, cout}, "batch, out_channels");
  }
  if (y_out) {
    check_tensor(y, "y", device);
    check_shape(y, "y", {p.batch, 1}, "batch, 1");
  }

  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  void* workspace = persistent ? persistent_workspace(stage, p, ws_bytes, device, stream)
                               : (ws_bytes ? buffer.mutable_data_ptr() : nullptr);
  NoPhaseMarks marks;
  const ladder::GpuStageArgs args{p,
                                  {x.const_data_ptr<float>(), weight.const_data_ptr<float>(),
                                   conv_bias.const_data_ptr<float>(), bias.const_data_ptr<float>()},
                                  pooled.mutable_data_ptr<float>(),
                                  y.mutable_data_ptr<float>(),
                                  workspace, stream, marks};
  try {
    stage.run_gpu(args);  // enqueues only
  } catch (const ladder::InvalidProblem& e) {
    TORCH_CHECK_VALUE(false, "stage ", stage.label(), ": ", e.what());
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "stage ", stage.label(), ": ", e.what());
  }
  return {pooled, y};
}

}  // namespace cpl
