#include "stage.hpp"

#include <stdexcept>

namespace ladder {

const char* to_string(Phase p) {
  switch (p) {
    case Phase::Conv: return "conv";
    case Phase::Pool: return "pool";
    case Phase::Epilogue: return "epilogue";
    case Phase::Fused: return "fused";
  }
  return "?";
}

unsigned int blocks_for(long long threads, int block_size, const char* kernel) {
  const long long blocks = (threads + block_size - 1) / block_size;
  if (threads <= 0 || blocks > 2147483647LL)
    throw std::runtime_error(std::string("launch configuration of ") + kernel + ": " +
                             std::to_string(threads) + " threads need " + std::to_string(blocks) +
                             " blocks of " + std::to_string(block_size) +
                             ", outside CUDA's grid limit [1, 2^31 - 1]");
  return static_cast<unsigned int>(blocks);
}

}  // namespace ladder
