// The host checks of a tensor map before the driver sees it (common/toolkit/tensor_map.hpp): each
// documented requirement has its own message naming the parameter. No GPU needed: only
// tensor_map_problem runs here; encode_tensor_map_f32 calls the driver.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tensor_map.hpp"

namespace ladder {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

alignas(16) const float kAligned[8] = {};

/// Stage 17's map of x at the KernelBench size: (w, h, ci in group, group, n) = (512, 512, 64, 1, 16),
/// box 68 x 6 x 8 x 1 x 1.
TensorMapF32 kernelbench_x() {
  TensorMapF32 m;
  m.base = kAligned;
  m.rank = 5;
  const uint64_t size[5] = {512, 512, 64, 1, 16};
  const uint32_t box[5] = {68, 6, 8, 1, 1};
  for (int i = 0; i < 5; ++i) m.size[i] = size[i], m.box[i] = box[i];
  m.stride[0] = 512 * 4, m.stride[1] = 512 * 512 * 4, m.stride[2] = 64 * m.stride[1], m.stride[3] = m.stride[2];
  return m;
}

TEST(TensorMap, TheKernelBenchMapOfXMeetsEveryRequirement) {
  EXPECT_EQ(tensor_map_problem(kernelbench_x()), "");
}

TEST(TensorMap, ARowPitchNotAMultipleOf16BytesNamesTheStride) {
  TensorMapF32 m = kernelbench_x();
  m.size[0] = 510, m.stride[0] = 510 * 4;  // in_w % 4 != 0: stage 17 takes the general path
  const std::string why = tensor_map_problem(m);
  EXPECT_TRUE(contains(why, "stride[0]") && contains(why, "multiple of 16")) << why;
}

TEST(TensorMap, ABoxPast256ElementsNamesTheBox) {
  TensorMapF32 m = kernelbench_x();
  m.box[1] = 257;
  const std::string why = tensor_map_problem(m);
  EXPECT_TRUE(contains(why, "box[1]") && contains(why, "1 .. 256")) << why;
}

TEST(TensorMap, ABoxRowNotA16ByteMultipleNamesBox0) {
  TensorMapF32 m = kernelbench_x();
  m.box[0] = 66;
  const std::string why = tensor_map_problem(m);
  EXPECT_TRUE(contains(why, "box[0]") && contains(why, "multiple of 16")) << why;
}

TEST(TensorMap, AnUnalignedBaseAndABadRankAreNamed) {
  TensorMapF32 m = kernelbench_x();
  m.base = kAligned + 1;
  EXPECT_TRUE(contains(tensor_map_problem(m), "base address")) << tensor_map_problem(m);
  m = kernelbench_x();
  m.rank = 6;
  EXPECT_TRUE(contains(tensor_map_problem(m), "rank 6")) << tensor_map_problem(m);
  m = kernelbench_x();
  m.size[4] = 0;
  EXPECT_TRUE(contains(tensor_map_problem(m), "size[4]")) << tensor_map_problem(m);
}

TEST(TensorMap, TheDescriptionListsEveryParameter) {
  EXPECT_EQ(describe_tensor_map(kernelbench_x()),
            "rank 5, size (512, 512, 64, 1, 16), strides (2048, 1048576, 67108864, 67108864) bytes, box (68, 6, 8, 1, 1)");
}

}  // namespace
}  // namespace ladder
