// The Python module of the ladder's GPU stages. Three functions:
//   run_stage      one stage, (pooled, y), no autograd (stage_call.cpp);
//   stage_forward  y through the registered operator, autograd included (stage_op.cpp): the
//                  per-call path that ModelNew takes, so it is a plain CPython function that
//                  reads its arguments itself (pybind11's generic conversion of eleven arguments,
//                  four of them sequences, costs microseconds);
//   list_stages    what this build holds.
// No logic of its own: the math lives in the stages (stages/NN_name/), the problem model and
// its validation in common/model/problem.hpp, argument checks in stage_call.cpp.
//
// Built by conv_pool_ladder/_build.py with torch.utils.cpp_extension.load together with
// common/{toolkit,model}/*.cpp, the GPU stages' sources and a generated registry (registered_stages()).
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

#include <array>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stage_call.hpp"
#include "stage_op.hpp"

namespace {

std::vector<at::Tensor> run_stage(const std::string& stage, const at::Tensor& x, const at::Tensor& weight,
                                  const std::optional<at::Tensor>& conv_bias, const at::Tensor& bias,
                                  const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                  const std::vector<int64_t>& output_padding, const std::vector<int64_t>& dilation,
                                  int64_t groups, double scale, const std::optional<at::Tensor>& pooled,
                                  const std::optional<at::Tensor>& y) {
  const ladder::StageDescriptor& d = cpl::find_gpu_stage(stage);
  const cpl::Geometry g = cpl::make_geometry(stride, padding, output_padding, dilation, groups, scale);
  const at::Tensor cb = conv_bias && conv_bias->defined() ? *conv_bias : cpl::zero_conv_bias(weight, groups);
  cpl::StageOutputs out = cpl::run_stage(d, x, weight, cb, bias, g, pooled, y);
  return {out.pooled, out.y};
}

const at::Tensor& tensor_arg(PyObject* o, const char* name) {
  TORCH_CHECK_TYPE(THPVariable_Check(o), name, " must be a torch.Tensor, got ", Py_TYPE(o)->tp_name);
  return THPVariable_Unpack(o);
}

int64_t int_arg(PyObject* o, const char* name) {
  TORCH_CHECK_TYPE(PyLong_Check(o), name, " must be an int, got ", Py_TYPE(o)->tp_name);
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) throw python_error();
  return v;
}

/// An int or a tuple/list of ints, as nn.ConvTranspose2d takes its spatial parameters; the
/// values land in `buf` (the count is checked in C++ later, with the parameter's name).
c10::IntArrayRef ints_arg(PyObject* o, const char* name, std::array<int64_t, 8>& buf) {
  if (PyLong_Check(o)) {
    buf[0] = int_arg(o, name);
    return {buf.data(), 1};
  }
  TORCH_CHECK_TYPE(PyTuple_Check(o) || PyList_Check(o), name, " must be an int or a tuple of ints, got ",
                   Py_TYPE(o)->tp_name);
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  TORCH_CHECK_VALUE(n >= 1 && n <= Py_ssize_t(buf.size()), name,
                    " must have one value or two (height, width), got ", n, " values");
  for (Py_ssize_t i = 0; i < n; ++i) buf[size_t(i)] = int_arg(PySequence_Fast_GET_ITEM(o, i), name);
  return {buf.data(), size_t(n)};
}

/// stage_forward(x, weight, conv_bias, bias, stage, stride, padding, output_padding, dilation,
///               groups, scale, contiguous=False) -> y (N, 1), positional only. conv_bias may be
/// None; the spatial parameters are an int or (height, width); contiguous=True makes x
/// contiguous first (ModelNew, since nn.ConvTranspose2d takes any layout), otherwise a
/// non-contiguous x is an error. Errors: TypeError / ValueError naming the argument.
PyObject* stage_forward(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(nargs == 11 || nargs == 12,
                   "stage_forward takes 11 or 12 positional arguments (x, weight, conv_bias, bias, stage, "
                   "stride, padding, output_padding, dilation, groups, scale, contiguous=False), got ", nargs);
  const bool contiguous = nargs == 12 && PyObject_IsTrue(args[11]) == 1;
  const at::Tensor& x_in = tensor_arg(args[0], "x");
  const at::Tensor x = contiguous ? x_in.contiguous() : x_in;
  std::optional<at::Tensor> conv_bias;
  if (args[2] != Py_None) conv_bias = tensor_arg(args[2], "conv_bias");
  Py_ssize_t stage_len = 0;
  TORCH_CHECK_TYPE(PyUnicode_Check(args[4]), "stage must be a str, got ", Py_TYPE(args[4])->tp_name);
  const char* stage = PyUnicode_AsUTF8AndSize(args[4], &stage_len);
  if (stage == nullptr) throw python_error();
  std::array<int64_t, 8> stride, padding, output_padding, dilation;
  const double scale = PyFloat_AsDouble(args[10]);
  if (scale == -1.0 && PyErr_Occurred()) throw python_error();
  return THPVariable_Wrap(cpl::call_stage_forward(
      x, tensor_arg(args[1], "weight"), conv_bias, tensor_arg(args[3], "bias"),
      std::string_view(stage, size_t(stage_len)), ints_arg(args[5], "stride", stride),
      ints_arg(args[6], "padding", padding), ints_arg(args[7], "output_padding", output_padding),
      ints_arg(args[8], "dilation", dilation), int_arg(args[9], "groups"), scale));
  END_HANDLE_TH_ERRORS
}

PyMethodDef fast_functions[] = {
    {"stage_forward", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&stage_forward)), METH_FASTCALL,
     "stage_forward(x, weight, conv_bias, bias, stage, stride, padding, output_padding, dilation, groups, scale, "
     "contiguous=False) -> y (N, 1), positional only: the registered operator OP_NAME through the dispatcher "
     "(autograd: exact first and second derivatives). conv_bias may be None; spatial parameters are an int or "
     "(height, width); contiguous=True makes x contiguous first."},
    {nullptr, nullptr, 0, nullptr}};

pybind11::list list_stages() {
  pybind11::list out;
  for (const ladder::StageDescriptor* d : ladder::registered_stages()) {
    pybind11::dict e;
    e["id"] = d->id;
    e["name"] = d->name;
    e["idea"] = d->idea;
    e["gpu"] = d->is_gpu();
    e["has_prepare"] = d->prepare != nullptr;
    e["tf32"] = d->precision == ladder::Precision::Tf32;  // checked at the TF32 bound
    e["tensor_cores"] = d->tensor_cores;
    out.append(e);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  m.doc() = "The conv-transpose -> global-pool ladder's GPU stages, callable on torch tensors";
  m.attr("OP_NAME") = cpl::stage_forward_op_name();
  m.def("run_stage", &run_stage, py::arg("stage"), py::arg("x"), py::arg("weight"), py::arg("conv_bias"),
        py::arg("bias"), py::arg("stride"), py::arg("padding"), py::arg("output_padding"), py::arg("dilation"),
        py::arg("groups"), py::arg("scale"), py::arg("pooled") = py::none(), py::arg("y") = py::none(),
        "Runs one GPU stage (number, folder name or name) on torch's current stream; returns "
        "[pooled (N, Cout), y (N, 1)], written into `pooled` / `y` when given. No autograd.");
  if (PyModule_AddFunctions(m.ptr(), fast_functions) != 0) throw py::error_already_set();
  m.def("list_stages", &list_stages, "The stages built into this extension: [{id, name, idea, gpu, has_prepare}].");
}
