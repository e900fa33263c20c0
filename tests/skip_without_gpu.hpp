// The GPU tests' first line: without a usable CUDA device the test is reported as skipped, with
// the runtime's reason (and its advice, e.g. a driver older than the toolkit), never as passed.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "device.hpp"

#define SKIP_WITHOUT_GPU()                                                       \
  do {                                                                           \
    std::string why;                                                             \
    if (!::ladder::cuda_device_available(&why)) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)
