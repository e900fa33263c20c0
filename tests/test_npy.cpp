// Tests for common/npy: round trips, on-disk layout, hand-written files of
// other versions, and one rejection test per malformed case.
#include "npy.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using ladder::npy::ArrayF32;
using ladder::npy::NpyError;

namespace {

std::string read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << "cannot write test file " << p;
}

// Builds a .npy file by hand: magic, version, header length (uint16 for 1.x,
// uint32 for 2.x/3.x), the dict padded with spaces + '\n' to a 64-byte boundary, data.
std::string make_npy(int major, const std::string& dict, const std::string& data) {
    const size_t len_bytes = major == 1 ? 2 : 4;
    std::string header = dict;
    const size_t unpadded = 8 + len_bytes + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header.push_back('\n');
    std::string out("\x93NUMPY", 6);
    out.push_back(static_cast<char>(major));
    out.push_back('\0');
    for (size_t k = 0; k < len_bytes; ++k) out.push_back(static_cast<char>((header.size() >> (8 * k)) & 0xFF));
    return out + header + data;
}

std::string f32_bytes(const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Runs f and returns the NpyError message; records a failure if nothing (or
// something else) is thrown.
template <class F>
std::string error_of(F f) {
    try {
        f();
    } catch (const NpyError& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "expected NpyError, got another exception: " << e.what();
        return "";
    }
    ADD_FAILURE() << "expected NpyError, nothing was thrown";
    return "";
}

void expect_contains(const std::string& msg, std::initializer_list<const char*> words) {
    for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
}

// Fresh, uniquely named directory under the system temp dir, removed afterwards.
class NpyTempDir : public ::testing::Test {
protected:
    void SetUp() override {
        std::random_device rd;
        const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
        dir_ = fs::temp_directory_path() /
               ("ladder_npy_test_" + std::to_string(now) + "_" + std::to_string(rd()));
        ASSERT_TRUE(fs::create_directory(dir_));
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }

    fs::path dir_;
};

class NpyRoundTrip : public NpyTempDir {};
class NpyLayout : public NpyTempDir {};
class NpyRead : public NpyTempDir {};
class NpyReject : public NpyTempDir {};

const std::string kGoodDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
const std::vector<float> kSix = {1, 2, 3, 4, 5, 6};

}  // namespace

TEST(NpyShapeString, MatchesNumPy) {
    using ladder::npy::shape_string;
    EXPECT_EQ(shape_string({16, 64, 512, 512}), "(16, 64, 512, 512)");
    EXPECT_EQ(shape_string({5}), "(5,)");
    EXPECT_EQ(shape_string({}), "()");
    EXPECT_EQ(shape_string({3, 0}), "(3, 0)");
}

TEST_F(NpyRoundTrip, Float32Shapes) {
    const std::vector<std::vector<int64_t>> shapes = {{7}, {2, 3, 4, 5}, {}, {3, 0, 2}, {1, 1}};
    for (const auto& shape : shapes) {
        SCOPED_TRACE(ladder::npy::shape_string(shape));
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        std::vector<float> v(static_cast<size_t>(n));
        for (size_t k = 0; k < v.size(); ++k) v[k] = 0.25f * static_cast<float>(k) - 3.0f;
        const std::string p = path("a.npy");
        ladder::npy::save_f32(p, shape, v.data());
        const ArrayF32 a = ladder::npy::load_f32(p);
        EXPECT_EQ(a.shape, shape);
        ASSERT_EQ(a.data.size(), v.size());
        // Bitwise comparison: the round trip must be exact.
        EXPECT_EQ(0, std::memcmp(a.data.data(), v.data(), v.size() * sizeof(float)));
    }
}

TEST_F(NpyRoundTrip, Float64WritesF8HeaderAndRawData) {
    const std::vector<double> v = {1.5, -2.25, 1e300, 0.1};
    const std::string p = path("d.npy");
    ladder::npy::save_f64(p, {2, 2}, v.data());
    const std::string bytes = read_bytes(p);
    ASSERT_GE(bytes.size(), 10u);
    const size_t header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    const std::string header = bytes.substr(10, header_len);
    EXPECT_NE(header.find("'descr': '<f8'"), std::string::npos) << header;
    EXPECT_NE(header.find("'shape': (2, 2)"), std::string::npos) << header;
    EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
    ASSERT_EQ(bytes.size(), 10 + header_len + v.size() * sizeof(double));
    EXPECT_EQ(0, std::memcmp(bytes.data() + 10 + header_len, v.data(), v.size() * sizeof(double)));
}

TEST_F(NpyLayout, Version1HeaderAlignedTo64) {
    const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {4, 5, 6}, {1, 2, 3, 4, 5, 6, 7, 8}, {0, 9}};
    const std::vector<float> zeros(8 * 7 * 6 * 5 * 4 * 3 * 2, 0.0f);
    for (const auto& shape : shapes) {
        SCOPED_TRACE(ladder::npy::shape_string(shape));
        const std::string p = path("h.npy");
        ladder::npy::save_f32(p, shape, zeros.data());
        const std::string bytes = read_bytes(p);
        ASSERT_GE(bytes.size(), 10u);
        EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
        const size_t header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
        EXPECT_EQ((10 + header_len) % 64, 0u);
        ASSERT_LE(10 + header_len, bytes.size());
        EXPECT_EQ(bytes[10 + header_len - 1], '\n');
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        EXPECT_EQ(bytes.size(), 10 + header_len + static_cast<size_t>(n) * sizeof(float));
    }
}

TEST_F(NpyRead, Version2HandWrittenKeysReordered) {
    // Keys in another order, double quotes, spaces and a trailing comma in the shape.
    const std::string dict = "{\"shape\": ( 3 , 2 , ), 'fortran_order': False, 'descr': '<f4'}";
    write_bytes(path("v2.npy"), make_npy(2, dict, f32_bytes(kSix)));
    const ArrayF32 a = ladder::npy::load_f32(path("v2.npy"));
    EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(a.data, kSix);
}

TEST_F(NpyRead, Version3ScalarAndShapedOk) {
    write_bytes(path("v3.npy"), make_npy(3, "{'descr': '<f4', 'fortran_order': False, 'shape': ()}",
                                         f32_bytes({42.0f})));
    const ArrayF32 a = ladder::npy::load_f32_shaped(path("v3.npy"), {}, "s");
    EXPECT_TRUE(a.shape.empty());
    EXPECT_EQ(a.data, std::vector<float>{42.0f});
}

TEST_F(NpyReject, MissingFile) {
    const std::string msg = error_of([&] { ladder::npy::load_f32(path("nope.npy")); });
    expect_contains(msg, {"nope.npy", "cannot open"});
}

TEST_F(NpyReject, UnwritablePath) {
    const std::string msg = error_of([&] { ladder::npy::save_f32(path("no_dir/x.npy"), {1}, kSix.data()); });
    expect_contains(msg, {"no_dir/x.npy", "cannot open for writing"});
}

TEST_F(NpyReject, BadMagic) {
    std::string bytes = make_npy(1, kGoodDict, f32_bytes(kSix));
    bytes[1] = 'X';
    write_bytes(path("m.npy"), bytes);
    expect_contains(error_of([&] { ladder::npy::load_f32(path("m.npy")); }), {"m.npy", "bad magic"});
    write_bytes(path("short.npy"), "\x93NU");
    expect_contains(error_of([&] { ladder::npy::load_f32(path("short.npy")); }), {"bad magic"});
}

TEST_F(NpyReject, UnsupportedVersion) {
    write_bytes(path("v4.npy"), make_npy(4, kGoodDict, f32_bytes(kSix)));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("v4.npy")); }), {"unsupported", "4.0"});
}

TEST_F(NpyReject, WrongDtypeFloat64) {
    const std::vector<double> v(6, 1.0);
    ladder::npy::save_f64(path("f8.npy"), {2, 3}, v.data());
    expect_contains(error_of([&] { ladder::npy::load_f32(path("f8.npy")); }), {"'<f8'", "float32", "'<f4'"});
}

TEST_F(NpyReject, WrongDtypeInt32) {
    write_bytes(path("i4.npy"),
                make_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", f32_bytes(kSix)));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("i4.npy")); }), {"'<i4'", "float32", "'<f4'"});
}

TEST_F(NpyReject, FortranOrder) {
    write_bytes(path("f.npy"),
                make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f32_bytes(kSix)));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("f.npy")); }),
                    {"fortran_order", "np.ascontiguousarray"});
}

TEST_F(NpyReject, TruncatedData) {
    std::string data = f32_bytes(kSix);
    data.resize(data.size() - 3);  // 21 of 24 bytes
    write_bytes(path("t.npy"), make_npy(1, kGoodDict, data));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("t.npy")); }), {"truncated", "24", "21"});
}

TEST_F(NpyReject, TrailingBytes) {
    write_bytes(path("x.npy"), make_npy(1, kGoodDict, f32_bytes(kSix) + "junk"));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("x.npy")); }), {"4 trailing", "24"});
}

TEST_F(NpyReject, MalformedHeaderMissingKey) {
    write_bytes(path("k.npy"), make_npy(1, "{'descr': '<f4', 'fortran_order': False}", f32_bytes(kSix)));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("k.npy")); }),
                    {"malformed header", "missing key 'shape'"});
}

TEST_F(NpyReject, MalformedHeaderBadShape) {
    write_bytes(path("s.npy"),
                make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", f32_bytes(kSix)));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("s.npy")); }), {"malformed header", "shape"});
    write_bytes(path("s2.npy"),
                make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", f32_bytes(kSix)));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("s2.npy")); }), {"malformed header"});
}

TEST_F(NpyReject, NegativeDimension) {
    write_bytes(path("n.npy"),
                make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", f32_bytes(kSix)));
    expect_contains(error_of([&] { ladder::npy::load_f32(path("n.npy")); }), {"negative dimension", "(-2, 3)"});
    expect_contains(error_of([&] { ladder::npy::save_f32(path("n2.npy"), {2, -3}, kSix.data()); }),
                    {"negative dimension"});
}

TEST_F(NpyReject, ShapeMismatch) {
    ladder::npy::save_f32(path("x.npy"), {2, 3}, kSix.data());
    expect_contains(error_of([&] { ladder::npy::load_f32_shaped(path("x.npy"), {3, 2}, "x"); }),
                    {"x: expected shape (3, 2), found (2, 3)", "x.npy"});
    // The matching shape loads fine.
    EXPECT_EQ(ladder::npy::load_f32_shaped(path("x.npy"), {2, 3}, "x").data, kSix);
}
