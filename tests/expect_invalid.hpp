// A test helper the tracks' problem tests share: validation must fail, with a message naming
// every needle (the parameter and the rule).
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "shared/geometry3d.hpp"  // InvalidProblem, the type both tracks throw

/// P: a track's problem (validate(), describe()).
template <class P>
void expect_invalid(const P& p, std::initializer_list<std::string> needles) {
  try {
    p.validate();
    ADD_FAILURE() << "validate() accepted an invalid problem: " << p.describe();
  } catch (const ladder::tracks::InvalidProblem& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "message lacks '" << n << "': " << msg;
  }
}
