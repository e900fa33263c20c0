// Argument checks the tracks' operator files share (p38_call.cpp, p74_call.cpp): both tracks take
// 3-D parameters as PyTorch does and fp32/int32 CUDA tensors on x's device.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

#include "shared/geometry3d.hpp"  // Triple, both tracks' type

namespace cpl::track {

/// A (depth, height, width) parameter; ValueError naming it unless it has three values.
inline ladder::tracks::Triple to_triple(const char* name, c10::IntArrayRef v) {
  TORCH_CHECK_VALUE(v.size() == 3, name, " must have three values (depth, height, width), got ", v.size(),
                    " values: ", v);
  return {v[0], v[1], v[2]};
}

/// Defined, CUDA, on `device` (x's), of `dtype`, contiguous; ValueError or TypeError naming the
/// tensor otherwise.
inline void check_tensor(const at::Tensor& t, const char* name, const at::Device& device,
                         at::ScalarType dtype = at::kFloat) {
  TORCH_CHECK_VALUE(t.defined(), name, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.is_cuda(), name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK_VALUE(t.device() == device, name, " is on ", t.device(), " but x is on ", device);
  TORCH_CHECK_TYPE(t.scalar_type() == dtype, name, " must be ", dtype == at::kInt ? "int32" : "float32", ", got ",
                   t.scalar_type());
  TORCH_CHECK_VALUE(t.is_contiguous(), name, " must be contiguous (call .contiguous()), got strides ", t.strides(),
                    " for shape ", t.sizes());
}

/// Tabs and newlines replaced by spaces: one line of the info operators' output.
inline std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\t', ' ');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace cpl::track
