# What a stage is, and the targets and files made from the stages. The one implementation of
# stage discovery: CMake uses it when it configures, python/conv_pool_ladder/_build.py runs it in
# script mode, and every script reads the list it writes (BUILD/stages.tsv).
#
# Rules. Under stages/:
#   - NN_name/ (two digits, an underscore, then letters, digits and underscores) is stage NN,
#     named `name`; its sources are the folder's .cu and .cpp files (at least one). It is a GPU
#     stage if one of them is a .cu file, else a CPU stage. Two folders with one number stop the
#     configuration. The number is written nowhere else: the stage's sources are compiled with
#     LADDER_STAGE_ID="NN", LADDER_STAGE_NAME="name" and LADDER_STAGE_SYMBOL=stage_NN_descriptor
#     (stages/lib/register_stage.hpp turns them into the descriptor), and the generated registry
#     calls stage_NN_descriptor() of each stage.
#   - lib/ holds the device code that stages share (headers, included as "lib/<file>"): no stage.
#   - anything else that is a folder stops the configuration (a misnamed stage would otherwise
#     be left out without a word).
#
# Script mode (no compiler needed):
#   cmake -DLADDER_STAGES_DIR=<repo>/stages [-DLADDER_STAGE_LIST_OUT=<file>]
#         [-DLADDER_REGISTRY_OUT=<file> -DLADDER_REGISTRY_IDS=01,04] -P cmake/Stages.cmake
# writes the stage list and/or the registry of the given stages.
#
# The stage list (stages.tsv): '#' comment lines, then one line per stage in ladder order with
# tab-separated columns
#   id  folder  name  kind (gpu|cpu)  sources (file names in the folder, ';'-separated)
#   definitions (the compile definitions above, ';'-separated NAME=VALUE)
include_guard(GLOBAL)
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  cmake_minimum_required(VERSION 3.24)  # the project's policies, before the functions record them
endif()

# ladder_discover_stages(<stages dir>): sets, in the caller's scope, LADDER_STAGE_IDS (sorted) and
# for each id LADDER_STAGE_FOLDER_<id>, LADDER_STAGE_NAME_<id>, LADDER_STAGE_KIND_<id> (gpu or
# cpu) and LADDER_STAGE_SOURCES_<id> (absolute paths, sorted). Fails on anything it cannot place.
function(ladder_discover_stages stages_dir)
  set(depends)
  if(NOT CMAKE_SCRIPT_MODE_FILE)
    set(depends CONFIGURE_DEPENDS)  # a new or renamed folder reconfigures at the next build
  endif()
  if(NOT IS_DIRECTORY ${stages_dir})
    message(FATAL_ERROR "no stages folder ${stages_dir}")
  endif()
  file(GLOB entries LIST_DIRECTORIES true ${depends} ${stages_dir}/*)
  list(SORT entries)
  set(ids)
  foreach(entry IN LISTS entries)
    get_filename_component(folder ${entry} NAME)
    if(NOT IS_DIRECTORY ${entry} OR folder STREQUAL "lib" OR folder MATCHES "^\\.")
      continue()
    endif()
    if(NOT folder MATCHES "^([0-9][0-9])_([A-Za-z0-9_]+)$")
      message(FATAL_ERROR "stages/${folder} is neither a stage folder (NN_name: two digits, an underscore, "
                          "letters, digits and underscores) nor stages/lib; rename it or move it out of stages/")
    endif()
    set(id ${CMAKE_MATCH_1})
    set(name ${CMAKE_MATCH_2})
    if(id IN_LIST ids)
      message(FATAL_ERROR "stages/${folder} and stages/${LADDER_STAGE_FOLDER_${id}} have the same number ${id}: "
                          "every stage needs its own")
    endif()
    file(GLOB sources ${depends} ${entry}/*.cu ${entry}/*.cpp)
    list(SORT sources)
    if(NOT sources)
      message(FATAL_ERROR "stage folder stages/${folder} has no .cu or .cpp sources")
    endif()
    set(kind cpu)
    foreach(source IN LISTS sources)
      get_filename_component(file ${source} NAME)
      if(NOT file MATCHES "^[A-Za-z0-9_.+-]+$")
        message(FATAL_ERROR "stages/${folder}/${file}: source names may hold only letters, digits and _.+-")
      endif()
      if(file MATCHES "\\.cu$")
        set(kind gpu)
      endif()
    endforeach()
    list(APPEND ids ${id})
    set(LADDER_STAGE_FOLDER_${id} ${folder})
    set(LADDER_STAGE_FOLDER_${id} ${folder} PARENT_SCOPE)
    set(LADDER_STAGE_NAME_${id} ${name} PARENT_SCOPE)
    set(LADDER_STAGE_KIND_${id} ${kind} PARENT_SCOPE)
    set(LADDER_STAGE_SOURCES_${id} ${sources} PARENT_SCOPE)
  endforeach()
  if(NOT ids)
    message(FATAL_ERROR "no stage folders (NN_name) under ${stages_dir}")
  endif()
  set(LADDER_STAGE_IDS ${ids} PARENT_SCOPE)
endfunction()

# ladder_stage_definitions(<id> <out var>): the compile definitions of stage <id>'s sources.
function(ladder_stage_definitions id out)
  set(${out} "LADDER_STAGE_ID=\"${id}\"" "LADDER_STAGE_NAME=\"${LADDER_STAGE_NAME_${id}}\""
             "LADDER_STAGE_SYMBOL=stage_${id}_descriptor" PARENT_SCOPE)
endfunction()

# Writes `content` to `path` unless it already holds exactly that (no needless rebuilds).
function(_ladder_write_if_changed path content)
  if(EXISTS ${path})
    file(READ ${path} old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE ${path} "${content}")
endfunction()

# ladder_write_stage_list(<path>): the stage list (format at the top of this file).
function(ladder_write_stage_list path)
  set(text "# Generated by cmake/Stages.cmake from the folders under stages/. Do not edit.\n")
  string(APPEND text "# id\tfolder\tname\tkind\tsources\tdefinitions\n")
  foreach(id IN LISTS LADDER_STAGE_IDS)
    set(files)
    foreach(source IN LISTS LADDER_STAGE_SOURCES_${id})
      get_filename_component(file ${source} NAME)
      list(APPEND files ${file})
    endforeach()
    ladder_stage_definitions(${id} defs)
    list(JOIN files ";" files)
    list(JOIN defs ";" defs)
    string(APPEND text "${id}\t${LADDER_STAGE_FOLDER_${id}}\t${LADDER_STAGE_NAME_${id}}\t"
                       "${LADDER_STAGE_KIND_${id}}\t${files}\t${defs}\n")
  endforeach()
  _ladder_write_if_changed(${path} "${text}")
endfunction()

# _ladder_write_registry_file(<path> <ids>): a registry.cpp defining registered_stages() over
# stage_<id>_descriptor() for each id, in the order given.
function(_ladder_write_registry_file path ids)
  set(decls "")
  set(entries "")
  foreach(id IN LISTS ids)
    string(APPEND decls "const StageDescriptor& stage_${id}_descriptor();\n")
    string(APPEND entries "      &stage_${id}_descriptor(),\n")
  endforeach()
  _ladder_write_if_changed(${path}
"// Generated by cmake/Stages.cmake from the folders under stages/. Do not edit.
#include \"stage.hpp\"

namespace ladder {
${decls}
const std::vector<const StageDescriptor*>& registered_stages() {
  static const std::vector<const StageDescriptor*> stages{
${entries}  };
  return stages;
}

}  // namespace ladder
")
endfunction()

# ladder_write_registry(<tag> <ids>): writes generated/registry_<tag>.cpp in the build tree and
# sets LADDER_REGISTRY_<tag> to its path.
function(ladder_write_registry tag ids)
  set(path ${PROJECT_BINARY_DIR}/generated/registry_${tag}.cpp)
  _ladder_write_registry_file(${path} "${ids}")
  set(LADDER_REGISTRY_${tag} ${path} PARENT_SCOPE)
endfunction()

# ladder_add_stage(<id>): the object library stage_NN from the stage's sources, and the
# single-stage program stage_NN_name (the ladder's driver, ladder_main, with only this stage
# registered). Needs ladder_discover_stages first.
function(ladder_add_stage id)
  set(folder ${LADDER_STAGE_FOLDER_${id}})
  ladder_stage_definitions(${id} defs)
  add_library(stage_${id} OBJECT ${LADDER_STAGE_SOURCES_${id}})
  target_include_directories(stage_${id} PRIVATE ${PROJECT_SOURCE_DIR}/stages)
  target_compile_definitions(stage_${id} PRIVATE ${defs})
  target_link_libraries(stage_${id} PUBLIC ladder_common PRIVATE ladder_warnings)

  ladder_write_registry(${id} "${id}")
  add_executable(stage_${folder} ${LADDER_REGISTRY_${id}})
  target_link_libraries(stage_${folder} PRIVATE stage_${id} ladder_main ladder_warnings)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT DEFINED LADDER_STAGES_DIR)
    message(FATAL_ERROR "usage: cmake -DLADDER_STAGES_DIR=<repo>/stages [-DLADDER_STAGE_LIST_OUT=<file>] "
                        "[-DLADDER_REGISTRY_OUT=<file> -DLADDER_REGISTRY_IDS=01,04] -P cmake/Stages.cmake")
  endif()
  ladder_discover_stages(${LADDER_STAGES_DIR})
  if(DEFINED LADDER_STAGE_LIST_OUT)
    ladder_write_stage_list(${LADDER_STAGE_LIST_OUT})
  endif()
  if(DEFINED LADDER_REGISTRY_OUT)
    string(REPLACE "," ";" wanted "${LADDER_REGISTRY_IDS}")
    foreach(id IN LISTS wanted)
      if(NOT id IN_LIST LADDER_STAGE_IDS)
        message(FATAL_ERROR "registry: no stage ${id} under ${LADDER_STAGES_DIR} (stages: ${LADDER_STAGE_IDS})")
      endif()
    endforeach()
    _ladder_write_registry_file(${LADDER_REGISTRY_OUT} "${wanted}")
  endif()
endif()
