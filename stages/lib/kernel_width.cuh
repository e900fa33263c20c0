// The tiled stages' (07-11) kernels are templates on the kernel width, so that the tap loops
// unroll; the host picks a problem's instance here. And the ceiling division their plans use.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace ladder {
namespace {  // internal linkage: each including stage compiles its own copy

/// ceil(a / b) for a >= 0, b > 0.
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Calls f(std::integral_constant<int, W>{}) with W = kernel_w, for 1 <= kernel_w <= 5 (the
/// widest tiled kernel); throws std::logic_error naming the stage for any other width.
template <typename F>
void with_kernel_width(int kernel_w, F&& f) {
  switch (kernel_w) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    default:
      throw std::logic_error("stage " LADDER_STAGE_ID ": no tiled kernel for kernel_w " + std::to_string(kernel_w));
  }
}

}  // namespace
}  // namespace ladder
