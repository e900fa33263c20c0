#include "npy.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

// The data block is copied to and from memory as-is, which is only correct
// when the host byte order matches the file's '<' (little-endian).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.cpp assumes a little-endian host");

namespace ladder::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes, plus the terminating NUL
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // NumPy >= 1.14 aligns data to 64 bytes; we do the same

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw NpyError("npy: " + path + ": " + problem);
}

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Product of dims, rejecting negative dims and int64 overflow (a corrupt header
// must not turn into a huge or wrapped-around allocation).
int64_t element_count(const std::string& path, const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d < 0) fail(path, "negative dimension in shape " + shape_string(shape));
        if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
            fail(path, "shape " + shape_string(shape) + " overflows the element count");
        n *= d;
    }
    return n;
}

void save(const std::string& path, const std::vector<int64_t>& shape, const void* data,
          size_t elem_size, const char* descr) {
    const int64_t count = element_count(path, shape);

    std::string header = std::string("{'descr': '") + descr +
                         "', 'fortran_order': False, 'shape': " + shape_string(shape) + ", }";
    // Preamble: magic (6) + version (2) + uint16 header length (2).
    const size_t preamble = kMagicLen + 2 + 2;
    const size_t unpadded = preamble + header.size() + 1;  // +1 for the final '\n'
    header.append((kAlign - unpadded % kAlign) % kAlign, ' ');
    header.push_back('\n');
    if (header.size() > 0xFFFF) fail(path, "header too long for format version 1.0");

    std::string pre(kMagic, kMagicLen);
    pre.push_back('\x01');  // version 1.0
    pre.push_back('\x00');
    pre.push_back(static_cast<char>(header.size() & 0xFF));  // little-endian uint16
    pre.push_back(static_cast<char>(header.size() >> 8));

    File f(std::fopen(path.c_str(), "wb"));
    if (!f) fail(path, std::string("cannot open for writing: ") + std::strerror(errno));
    const size_t bytes = static_cast<size_t>(count) * elem_size;
    if (std::fwrite(pre.data(), 1, pre.size(), f.get()) != pre.size() ||
        std::fwrite(header.data(), 1, header.size(), f.get()) != header.size() ||
        (bytes > 0 && std::fwrite(data, 1, bytes, f.get()) != bytes))
        fail(path, std::string("write failed: ") + std::strerror(errno));
    // fclose flushes buffered data, so its result is part of "fully written".
    if (std::fclose(f.release()) != 0) fail(path, std::string("close failed: ") + std::strerror(errno));
}

// --- Header dict parsing -------------------------------------------------
// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// We parse exactly the three keys NumPy writes, in any order.

struct Parser {
    const std::string& path;
    const std::string& s;
    size_t i = 0;

    [[noreturn]] void bad(const std::string& what) const {
        fail(path, "malformed header (" + what + "): " + s.substr(0, s.find_last_not_of(" \n") + 1));
    }
    void ws() {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
    }
    bool eat(char c) {
        ws();
        if (i < s.size() && s[i] == c) { ++i; return true; }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) bad(std::string("expected '") + c + "'");
    }
    std::string quoted() {
        ws();
        if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) bad("expected a quoted string");
        const char q = s[i++];
        const size_t end = s.find(q, i);
        if (end == std::string::npos) bad("unterminated string");
        std::string out = s.substr(i, end - i);
        i = end + 1;
        return out;
    }
    bool boolean() {
        ws();
        if (s.compare(i, 4, "True") == 0) { i += 4; return true; }
        if (s.compare(i, 5, "False") == 0) { i += 5; return false; }
        bad("fortran_order must be True or False");
    }
    std::vector<int64_t> shape() {
        std::vector<int64_t> dims;
        expect('(');
        while (!eat(')')) {
            ws();
            // A leading '-' is parsed so that negative dims get their own message.
            const bool neg = i < s.size() && s[i] == '-';
            if (neg) ++i;
            if (i >= s.size() || s[i] < '0' || s[i] > '9') bad("unparsable shape");
            int64_t v = 0;
            for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
                if (v > (std::numeric_limits<int64_t>::max() - (s[i] - '0')) / 10)
                    bad("shape dimension too large");
                v = v * 10 + (s[i] - '0');
            }
            dims.push_back(neg ? -v : v);
            // Elements are separated by ','; a trailing ',' before ')' is allowed.
            if (!eat(',')) { expect(')'); break; }
        }
        return dims;
    }
};

struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
};

Header parse_header(const std::string& path, const std::string& text) {
    Parser p{path, text};
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    p.expect('{');
    while (!p.eat('}')) {
        const std::string key = p.quoted();
        p.expect(':');
        if (key == "descr") { h.descr = p.quoted(); have_descr = true; }
        else if (key == "fortran_order") { h.fortran_order = p.boolean(); have_order = true; }
        else if (key == "shape") { h.shape = p.shape(); have_shape = true; }
        else p.bad("unknown key '" + key + "'");
        if (!p.eat(',')) { p.expect('}'); break; }
    }
    p.ws();
    if (p.i != text.size()) p.bad("unexpected text after '}'");
    if (!have_descr) p.bad("missing key 'descr'");
    if (!have_order) p.bad("missing key 'fortran_order'");
    if (!have_shape) p.bad("missing key 'shape'");
    return h;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
    std::string out = "(";
    for (size_t k = 0; k < shape.size(); ++k) {
        if (k > 0) out += ", ";
        out += std::to_string(shape[k]);
    }
    if (shape.size() == 1) out += ",";  // Python's 1-tuple spelling
    return out + ")";
}

void save_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
    save(path, shape, data, sizeof(float), "<f4");
}

void save_f64(const std::string& path, const std::vector<int64_t>& shape, const double* data) {
    save(path, shape, data, sizeof(double), "<f8");
}

ArrayF32 load_f32(const std::string& path) {
    File f(std::fopen(path.c_str(), "rb"));
    if (!f) fail(path, std::string("cannot open: ") + std::strerror(errno));
    std::error_code ec;
    const uint64_t file_size = std::filesystem::file_size(path, ec);
    if (ec) fail(path, "cannot get file size: " + ec.message());

    unsigned char pre[kMagicLen + 2];
    if (std::fread(pre, 1, sizeof pre, f.get()) != sizeof pre || std::memcmp(pre, kMagic, kMagicLen) != 0)
        fail(path, "bad magic string (not a .npy file)");
    const int major = pre[kMagicLen], minor = pre[kMagicLen + 1];
    if (!((major == 1 || major == 2 || major == 3) && minor == 0))
        fail(path, "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                       " (supported: 1.0, 2.0, 3.0)");

    // Version 1.0 stores the header length as uint16, 2.0/3.0 as uint32 (little-endian).
    const size_t len_bytes = major == 1 ? 2 : 4;
    unsigned char len_buf[4] = {0, 0, 0, 0};
    if (std::fread(len_buf, 1, len_bytes, f.get()) != len_bytes) fail(path, "truncated header length");
    const uint64_t header_len = uint64_t(len_buf[0]) | uint64_t(len_buf[1]) << 8 |
                                uint64_t(len_buf[2]) << 16 | uint64_t(len_buf[3]) << 24;
    const uint64_t data_offset = sizeof pre + len_bytes + header_len;
    if (data_offset > file_size) fail(path, "truncated header");
    std::string text(header_len, '\0');
    if (header_len > 0 && std::fread(text.data(), 1, header_len, f.get()) != header_len)
        fail(path, "cannot read header");

    const Header h = parse_header(path, text);
    if (h.descr != "<f4")
        fail(path, "dtype '" + h.descr + "' found; float32 '<f4' is required");
    if (h.fortran_order)
        fail(path, "fortran_order is True; only C order is supported, save with np.ascontiguousarray(a)");

    const int64_t count = element_count(path, h.shape);
    if (uint64_t(count) > std::numeric_limits<uint64_t>::max() / sizeof(float))
        fail(path, "shape " + shape_string(h.shape) + " is too large");
    const uint64_t expected = uint64_t(count) * sizeof(float);
    const uint64_t actual = file_size - data_offset;
    if (actual < expected)
        fail(path, "truncated data: expected " + std::to_string(expected) + " bytes for shape " +
                       shape_string(h.shape) + ", found " + std::to_string(actual));
    if (actual > expected)
        fail(path, std::to_string(actual - expected) + " trailing extra bytes after the data (expected " +
                       std::to_string(expected) + " bytes for shape " + shape_string(h.shape) + ")");

    ArrayF32 out;
    out.shape = h.shape;
    out.data.resize(static_cast<size_t>(count));
    if (expected > 0 && std::fread(out.data.data(), 1, expected, f.get()) != expected)
        fail(path, "read of " + std::to_string(expected) + " data bytes failed");
    return out;
}

ArrayF32 load_f32_shaped(const std::string& path, const std::vector<int64_t>& expected,
                         const std::string& what) {
    ArrayF32 a = load_f32(path);
    if (a.shape != expected)
        fail(path, what + ": expected shape " + shape_string(expected) + ", found " + shape_string(a.shape));
    return a;
}

}  // namespace ladder::npy
