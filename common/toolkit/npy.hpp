// Minimal reader/writer for NumPy .npy files holding float arrays.
//
// Only what the tutorial needs: C-ordered little-endian float32 in and out,
// float64 out (for reference results). Everything else is rejected with an
// NpyError whose message names the file and the problem, so a bad input is
// diagnosed at load time rather than showing up as wrong numbers later.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ladder::npy {

/// Error for any malformed or unsupported .npy file; the message names the file and the problem.
class NpyError : public std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// A float32 array in C (row-major) order: data.size() == product of shape (1 for shape ()).
struct ArrayF32 {
    std::vector<int64_t> shape;
    std::vector<float> data;
};

/// Writes `data` (C order, product(shape) float32 elements; 1 element for shape ())
/// to `path` as a little-endian '<f4' array, format version 1.0, with the header
/// padded so the data starts at a byte offset that is a multiple of 64.
/// The data block is written with a single fwrite.
/// Throws NpyError if a dimension is negative, the header would not fit in
/// version 1.0, or the file cannot be opened or fully written.
/// The element count cannot be checked against `data` (it is a raw pointer):
/// the caller must pass at least product(shape) elements.
void save_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);

/// Same as save_f32 for float64: writes a '<f8' array, version 1.0, data at a
/// multiple of 64 bytes. Throws NpyError under the same conditions.
void save_f64(const std::string& path, const std::vector<int64_t>& shape, const double* data);

/// Reads a C-ordered little-endian float32 ('<f4') array from `path`.
/// Accepts format versions 1.0, 2.0 and 3.0, header keys in any order, and
/// shapes with spaces, a trailing comma, or () for a 0-d scalar.
/// The data block is read with a single fread.
/// Throws NpyError (message starts with "npy: <path>:") when the file is missing
/// or unreadable, the magic string is wrong, the version is unsupported, the
/// header is malformed (missing/unknown keys, unparsable shape), a dimension is
/// negative, the dtype is not '<f4' (the message names the dtype found),
/// fortran_order is True (the message says to save with np.ascontiguousarray),
/// the data is truncated (the message gives expected and actual byte counts),
/// or there are trailing bytes after the data.
ArrayF32 load_f32(const std::string& path);

/// load_f32, then checks that the shape equals `expected`. On mismatch throws
/// NpyError naming `what` (e.g. "x"), the file, and the expected and found shapes.
ArrayF32 load_f32_shaped(const std::string& path, const std::vector<int64_t>& expected,
                         const std::string& what);

/// Formats a shape as NumPy prints it: "(16, 64, 512, 512)", "(5,)", "()".
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace ladder::npy
