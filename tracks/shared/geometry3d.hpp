// What the tracks' 3-D problems share (problems 38 and 74 of KernelBench level 2): the (d, h, w)
// triple, torch.nn.ConvTranspose3d's parameters and rules, its output size, the input
// distributions and the error PyTorch's rejections map to. Names as in PyTorch's documentation.
// A track includes this, never another track's files.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ladder::tracks {

/// A (depth, height, width) triple, as PyTorch accepts for every 3-D spatial parameter.
struct Triple {
  int64_t d = 0;
  int64_t h = 0;
  int64_t w = 0;
  static Triple cube(int64_t v) { return {v, v, v}; }
  bool operator==(const Triple& o) const { return d == o.d && h == o.h && w == o.w; }
  bool operator!=(const Triple& o) const { return !(*this == o); }
  int64_t operator[](int axis) const { return axis == 0 ? d : axis == 1 ? h : w; }
  std::string str() const;  ///< "(d, h, w)"
};

/// Whether any axis of t satisfies pred (non_positive, negative): the parameter checks' test.
inline bool any_of(const Triple& t, bool (*pred)(int64_t)) { return pred(t.d) || pred(t.h) || pred(t.w); }
inline bool non_positive(int64_t v) { return v <= 0; }
inline bool negative(int64_t v) { return v < 0; }
/// Throws InvalidProblem("invalid problem: <name> (d, h, w): <rule>") unless ok.
void require(bool ok, const std::string& name, const Triple& v, const std::string& rule);

/// How a track draws x (each track's oracle.hpp): U[0,1) as torch.rand, or small integers on which
/// every fp32 sum of the track's pipeline is exact.
enum class Distribution { Uniform, Exact };
const char* to_string(Distribution d);
/// Parses "uniform" or "exact"; throws InvalidProblem otherwise.
Distribution distribution_from_string(const std::string& s);

/// Thrown for parameter sets PyTorch would reject; the message names the parameter and value.
class InvalidProblem : public std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// torch.nn.ConvTranspose3d's parameters besides the channel counts (bias=True, padding_mode
/// 'zeros', the only mode ConvTranspose3d supports).
struct ConvTranspose3dParams {
  Triple kernel_size = Triple::cube(3);
  Triple stride = Triple::cube(2);
  Triple padding = Triple::cube(1);
  Triple output_padding = Triple::cube(1);
  Triple dilation = Triple::cube(1);
  int64_t groups = 1;
};

/// PyTorch's ConvTranspose3d output size (ConvTranspose3d page, "Shape"):
/// (in - 1)*stride - 2*padding + dilation*(kernel_size - 1) + output_padding + 1.
/// Throws InvalidProblem on int64 overflow. May return <= 0 for invalid parameters.
int64_t conv_transpose_out_size(int64_t in, int64_t kernel_size, int64_t stride, int64_t padding,
                                int64_t output_padding, int64_t dilation);

/// ConvTranspose3d's rules on its own parameters and channel counts (positive groups dividing
/// both channel counts, positive kernel_size, stride and dilation, non-negative padding,
/// output_padding smaller than stride or dilation per axis); throws InvalidProblem naming the
/// parameter. The output size is checked by the caller, which knows the input size.
void validate_conv_transpose3d(const ConvTranspose3dParams& conv, int64_t in_channels, int64_t out_channels);

/// a*b, throwing InvalidProblem naming `what` when it overflows int64.
int64_t checked_mul(int64_t a, int64_t b, const char* what);

}  // namespace ladder::tracks
