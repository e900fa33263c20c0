// Internals of the problem-74 runner shared by runner.cu and runner_support.cu: device copies of
// the tensors, poisoning, and timing with CUDA events (per repetition and per marked phase).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "device.hpp"
#include "timing.hpp"  // Spread, L2Flush
#include "oracle.hpp"
#include "rung.hpp"

namespace ladder::p74::detail {

/// A host vector on the device (DeviceMemoryError names `what` when it does not fit).
template <typename T>
DeviceBuffer<T> upload(const std::vector<T>& v, const std::string& what) {
  DeviceBuffer<T> d(std::max<size_t>(v.size(), 1), what);
  if (!v.empty()) CUDA_CHECK(cudaMemcpy(d.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <typename T>
std::vector<T> download(const DeviceBuffer<T>& d, size_t count) {
  std::vector<T> h(count);
  if (count) CUDA_CHECK(cudaMemcpy(h.data(), d.get(), count * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

/// The inputs on the device.
struct DeviceInputsCopy {
  DeviceBuffer<float> x, weight, bias, multiplier;
  explicit DeviceInputsCopy(const Inputs& in)
      : x(upload(in.x, "x")), weight(upload(in.weight, "weight")), bias(upload(in.bias, "bias")),
        multiplier(upload(in.multiplier, "multiplier")) {}
  DeviceInputs view() const { return {x.get(), weight.get(), bias.get(), multiplier.get()}; }
  double bytes() const { return double(x.bytes() + weight.bytes() + bias.bytes() + multiplier.bytes()); }
};

/// A forward rung's outputs on the device, pool-sized.
struct DeviceForwardOut {
  size_t count;
  DeviceBuffer<float> out, y;
  DeviceBuffer<int32_t> argmax;
  explicit DeviceForwardOut(size_t n)
      : count(n), out(std::max<size_t>(n, 1), "out"), y(std::max<size_t>(n, 1), "y_saved"),
        argmax(std::max<size_t>(n, 1), "argmax") {}
  /// out and y to NaN (all bits set), argmax to -1: an element a rung leaves unwritten fails the check.
  void poison(cudaStream_t s) const;
  ForwardResult fetch() const { return {download(out, count), download(argmax, count), download(y, count)}; }
  double bytes() const { return double(out.bytes() + y.bytes() + argmax.bytes()); }
};

/// A backward rung's inputs besides DeviceInputs (grad_out, saved state) and its four gradients.
struct DeviceBackwardIo {
  DeviceBuffer<float> grad_out, y_saved;
  DeviceBuffer<int32_t> argmax;
  DeviceBuffer<float> grad_x, grad_weight, grad_bias, grad_multiplier;
  size_t nx, nw, nc;
  DeviceBackwardIo(const Problem74& p, const Saved& saved, const std::vector<float>& grad_out);
  void poison(cudaStream_t s) const;  ///< every gradient to NaN
  GradResult fetch() const {
    return {download(grad_x, nx), download(grad_weight, nw), download(grad_bias, nc), download(grad_multiplier, nc)};
  }
  double bytes() const;
};

}  // namespace ladder::p74::detail
