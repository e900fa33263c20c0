// How a stage registers itself. Its number and name come from its folder, stages/NN_name/, and
// nowhere else: cmake/Stages.cmake compiles the folder's sources with
//   LADDER_STAGE_ID="NN"  LADDER_STAGE_NAME="name"  LADDER_STAGE_SYMBOL=stage_NN_descriptor
// and the generated registry (registered_stages()) calls LADDER_STAGE_SYMBOL() of every stage.
// One source of the stage, at namespace ladder scope, writes
//
//   LADDER_REGISTER_STAGE(d) {
//     d.idea = "one line for tables";
//     d.workspace_bytes = workspace_bytes;  // GPU stages: these two; CPU stages: d.run_cpu
//     d.run_gpu = run;
//     d.deterministic = true;               // any other StageDescriptor field, by name
//   }
//
// which defines LADDER_STAGE_SYMBOL() returning the descriptor with id and name filled in.
#pragma once

#include "stage.hpp"

#if !defined(LADDER_STAGE_ID) || !defined(LADDER_STAGE_NAME) || !defined(LADDER_STAGE_SYMBOL)
#error "LADDER_STAGE_ID, LADDER_STAGE_NAME and LADDER_STAGE_SYMBOL are not all defined: a stage source is compiled by cmake/Stages.cmake (or python/conv_pool_ladder/_build.py), which derives them from the stage's folder name"
#endif

#ifndef LADDER_STAGE_STUBS  // set by cmake/Stages.cmake: the handout's stubs still in the sources
#define LADDER_STAGE_STUBS 0
#endif

#define LADDER_REGISTER_STAGE(d)                                          \
  static void ladder_describe_stage(::ladder::StageDescriptor& d);        \
  const ::ladder::StageDescriptor& LADDER_STAGE_SYMBOL() {                \
    static const ::ladder::StageDescriptor descriptor = [] {              \
      ::ladder::StageDescriptor s;                                        \
      s.id = LADDER_STAGE_ID;                                             \
      s.name = LADDER_STAGE_NAME;                                         \
      s.stubs = LADDER_STAGE_STUBS;                                       \
      ladder_describe_stage(s);                                           \
      return s;                                                           \
    }();                                                                  \
    return descriptor;                                                    \
  }                                                                       \
  static void ladder_describe_stage(::ladder::StageDescriptor& d)
