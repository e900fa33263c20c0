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

# ladder_stage_build_setting(<id> <key> <out>): the value of "build": {"<key>": ...} in stage
# <id>'s rung.json (JSON text for an object), empty where the file or the key is absent. The file
# is read at configure time, and a change to it reconfigures.
function(ladder_stage_build_setting id key out)
  set(value)
  set(meta ${PROJECT_SOURCE_DIR}/stages/${LADDER_STAGE_FOLDER_${id}}/rung.json)
  if(EXISTS ${meta})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${meta})
    file(READ ${meta} json)
    string(JSON value ERROR_VARIABLE no_key GET "${json}" build ${key})
    if(no_key)
      set(value)
    endif()
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# ladder_stage_cuda_architectures(<id> <out>): the CUDA architectures to compile stage <id> for.
# CMAKE_CUDA_ARCHITECTURES, except that a stage whose rung.json says "build": {"sm_90a": true}
# (Hopper-only instructions such as wgmma, which exist only in sm_90a code) gets 90a in place of
# every 90 (90-real -> 90a-real, ...).
function(ladder_stage_cuda_architectures id out)
  set(archs ${CMAKE_CUDA_ARCHITECTURES})
  ladder_stage_build_setting(${id} sm_90a sm90a)
  if(sm90a)
    list(TRANSFORM archs REPLACE "^90($|-)" "90a\\1")
  endif()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()

# ladder_stage_fallback(<id> <out>): the stage's fallback build, from its rung.json's "build":
# {"fallback": {"macro": "LADDER_NO_X", "what": W}}: compiled with LADDER_NO_X, the stage takes
# the path an older GPU takes; tests/CMakeLists.txt builds it as stage_<id>_without_x and tests
# it against the oracle, W saying which path. <out> is the list "LADDER_NO_X;without_x;W", empty
# for a stage without one.
function(ladder_stage_fallback id out)
  set(result)
  ladder_stage_build_setting(${id} fallback fallback)
  if(fallback)
    string(JSON macro ERROR_VARIABLE bad_macro GET "${fallback}" macro)
    string(JSON what ERROR_VARIABLE bad_what GET "${fallback}" what)
    if(bad_macro OR bad_what OR NOT macro MATCHES "^LADDER_NO_[A-Z0-9_]+$" OR what STREQUAL "")
      message(FATAL_ERROR "stages/${LADDER_STAGE_FOLDER_${id}}/rung.json: \"build\": {\"fallback\": ...} needs "
                          "\"macro\" (LADDER_NO_...) and \"what\" (the path it takes)")
    endif()
    string(REGEX REPLACE "^LADDER_NO_" "without_" suffix "${macro}")
    string(TOLOWER "${suffix}" suffix)
    set(result "${macro}" "${suffix}" "${what}")
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

include(${CMAKE_CURRENT_LIST_DIR}/WriteIfChanged.cmake)  # ladder_write_if_changed

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
  ladder_write_if_changed(${path} "${text}")
endfunction()

# _ladder_write_list_file(<path> <source> <header> <namespace> <type> <function> <symbol> <ids>): a
# generated .cpp that includes <header> and defines <namespace>::<function>(), the list of
# <type>s returned by <symbol>() for each id (the "@" in <symbol> is the id), in the order given:
# the stages' registry and the tracks' rung lists alike.
function(_ladder_write_list_file path source header namespace type function symbol ids)
  set(decls "")
  set(entries "")
  foreach(id IN LISTS ids)
    string(REPLACE "@" "${id}" name "${symbol}")
    string(APPEND decls "const ${type}& ${name}();\n")
    string(APPEND entries "      &${name}(),\n")
  endforeach()
  ladder_write_if_changed(${path}
"// Generated by cmake/Stages.cmake from ${source}. Do not edit.
#include \"${header}\"

namespace ${namespace} {
${decls}
const std::vector<const ${type}*>& ${function}() {
  static const std::vector<const ${type}*> all{
${entries}  };
  return all;
}

}  // namespace ${namespace}
")
endfunction()

# _ladder_write_registry_file(<path> <ids>): a registry.cpp defining registered_stages() over
# stage_<id>_descriptor() for each id, in the order given.
function(_ladder_write_registry_file path ids)
  _ladder_write_list_file(${path} "the folders under stages/" stage.hpp ladder StageDescriptor registered_stages
                          "stage_@_descriptor" "${ids}")
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
  ladder_stage_cuda_architectures(${id} archs)
  set_property(TARGET stage_${id} PROPERTY CUDA_ARCHITECTURES ${archs})
  # The handout's stubs left in the stage's own sources (ladder_todo calls outside the instructor's
  # "// STUB:" comments), so that a run without a GPU can say the rung is still a stub. An edit of
  # a source reruns this count.
  set(stubs 0)
  foreach(source IN LISTS LADDER_STAGE_SOURCES_${id})
    file(STRINGS ${source} calls REGEX "ladder_todo\\(")
    foreach(call IN LISTS calls)
      if(NOT call MATCHES "^[ \t]*//")
        math(EXPR stubs "${stubs} + 1")
      endif()
    endforeach()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${source})
  endforeach()
  target_compile_definitions(stage_${id} PRIVATE LADDER_STAGE_STUBS=${stubs})
  target_link_libraries(stage_${id} PUBLIC ladder_common PRIVATE ladder_warnings)

  ladder_write_registry(${id} "${id}")
  add_executable(stage_${folder} ${LADDER_REGISTRY_${id}})
  target_link_libraries(stage_${folder} PRIVATE stage_${id} ladder_main ladder_warnings)
endfunction()

# A track's rungs, the same rule as stages: under tracks/<track>/rungs/, a folder NN_name/ is the
# track's rung NN, named `name`. It holds the rung's one source file (a .cu file for a GPU rung, a
# .cpp file for the CPU rung; any name, e.g. block_tree.cu), its rung.json (grader/rung_meta.py)
# and any header of its own. Its number and name are written nowhere else: the source is compiled
# with LADDER_RUNG_ID="NN", LADDER_RUNG_NAME="name" and LADDER_RUNG_SYMBOL=rung_NN
# (common/toolkit/rung_id.hpp checks they are there), and the generated registry defines
# <namespace>::rungs() over rung_NN() of every folder, in number order. Anything else under rungs/
# (a loose file, a misnamed folder, a folder with no source or two) stops the configuration, as a
# stray entry under stages/ does.
#
# ladder_discover_track_rungs(<rungs dir>): sets LADDER_RUNG_IDS (sorted) and, per id,
# LADDER_RUNG_FOLDER_<id> (the folder's name), LADDER_RUNG_FILE_<id> (its source, absolute path)
# and LADDER_RUNG_NAME_<id>.
function(ladder_discover_track_rungs rungs_dir)
  set(depends)
  if(NOT CMAKE_SCRIPT_MODE_FILE)
    set(depends CONFIGURE_DEPENDS)  # a new or renamed rung folder reconfigures at the next build
  endif()
  if(NOT IS_DIRECTORY ${rungs_dir})
    message(FATAL_ERROR "no rungs folder ${rungs_dir}")
  endif()
  file(GLOB entries LIST_DIRECTORIES true ${depends} ${rungs_dir}/*)
  list(SORT entries)
  set(ids)
  foreach(entry IN LISTS entries)
    get_filename_component(folder ${entry} NAME)
    if(folder MATCHES "^\\.")
      continue()
    endif()
    if(NOT IS_DIRECTORY ${entry} OR NOT folder MATCHES "^([0-9][0-9])_([A-Za-z0-9_]+)$")
      message(FATAL_ERROR "${entry}: everything under a track's rungs/ is a rung folder NN_name/ (two digits, an "
                          "underscore, letters, digits and underscores) holding the rung's source and rung.json; "
                          "move or rename it")
    endif()
    set(id ${CMAKE_MATCH_1})
    set(name ${CMAKE_MATCH_2})
    if(id IN_LIST ids)
      message(FATAL_ERROR "${rungs_dir}/${folder} and ${rungs_dir}/${LADDER_RUNG_FOLDER_${id}} have the same number ${id}: "
                          "every rung needs its own")
    endif()
    file(GLOB sources ${depends} ${entry}/*.cu ${entry}/*.cpp)
    list(LENGTH sources count)
    if(NOT count EQUAL 1)
      message(FATAL_ERROR "${entry}: a rung folder holds one source file (.cu, or .cpp for the CPU rung); found ${count}")
    endif()
    get_filename_component(file ${sources} NAME)
    if(NOT file MATCHES "^[A-Za-z0-9_.+-]+$")
      message(FATAL_ERROR "${sources}: source names may hold only letters, digits and _.+-")
    endif()
    list(APPEND ids ${id})
    set(LADDER_RUNG_FOLDER_${id} ${folder})
    set(LADDER_RUNG_FOLDER_${id} ${folder} PARENT_SCOPE)
    set(LADDER_RUNG_FILE_${id} ${sources} PARENT_SCOPE)
    set(LADDER_RUNG_NAME_${id} ${name} PARENT_SCOPE)
  endforeach()
  if(NOT ids)
    message(FATAL_ERROR "no rung folders (NN_name/) under ${rungs_dir}")
  endif()
  set(LADDER_RUNG_IDS ${ids} PARENT_SCOPE)
endfunction()

# _ladder_rung_of(<file> <id var> <name var> <track var>): the number and name of the rung whose
# source <file> is (tracks/pNN_topic/rungs/NN_name/<file>), and its track (pNN); fails on any
# other place.
function(_ladder_rung_of file id_var name_var track_var)
  get_filename_component(rung_dir ${file} DIRECTORY)
  get_filename_component(folder ${rung_dir} NAME)
  get_filename_component(rungs_dir ${rung_dir} DIRECTORY)
  get_filename_component(rungs ${rungs_dir} NAME)
  get_filename_component(track_dir ${rungs_dir} DIRECTORY)
  get_filename_component(track_folder ${track_dir} NAME)
  if(NOT folder MATCHES "^([0-9][0-9])_([A-Za-z0-9_]+)$" OR NOT rungs STREQUAL "rungs")
    message(FATAL_ERROR "${file}: a track rung's source lives in its folder tracks/pNN_topic/rungs/NN_name/")
  endif()
  set(${id_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
  set(${name_var} ${CMAKE_MATCH_2} PARENT_SCOPE)
  if(NOT track_folder MATCHES "^(p[0-9]+)_")
    message(FATAL_ERROR "${file}: a track rung lives in tracks/pNN_topic/rungs/ (got folder '${track_folder}')")
  endif()
  set(${track_var} ${CMAKE_MATCH_1} PARENT_SCOPE)
endfunction()

# ladder_rung_definitions(<file> <out var>): the compile definitions of a rung's source
# tracks/pNN_topic/rungs/NN_name/<file>, from its path: LADDER_RUNG_TRACK="pNN" as well (the stub
# messages' label, common/toolkit/todo.cuh).
function(ladder_rung_definitions file out)
  _ladder_rung_of(${file} id name track)
  set(${out} "LADDER_RUNG_ID=\"${id}\"" "LADDER_RUNG_NAME=\"${name}\"" "LADDER_RUNG_SYMBOL=rung_${id}"
      "LADDER_RUNG_TRACK=\"${track}\"" PARENT_SCOPE)
endfunction()

# ladder_write_track_registry(<path> <namespace> <rungs dir> <ids>): rungs() of namespace
# ladder::<namespace> over rung_<id>() for each id, as a .cpp that includes the track's rung.hpp
# as "<track folder>/rung.hpp" (tracks/ is on every track target's include path).
function(ladder_write_track_registry path namespace rungs_dir ids)
  get_filename_component(track_dir ${rungs_dir} DIRECTORY)
  get_filename_component(track_folder ${track_dir} NAME)
  _ladder_write_list_file(${path} "the folders under tracks/${track_folder}/rungs/" "${track_folder}/rung.hpp"
                          ladder::${namespace} Rung rungs "rung_@" "${ids}")
endfunction()

# ladder_add_track_rungs(<target> <rungs dir> <namespace>): every rung folder's source into
# <target>, each compiled with its definitions, and the generated registry.
function(ladder_add_track_rungs target rungs_dir namespace)
  ladder_discover_track_rungs(${rungs_dir})
  foreach(id IN LISTS LADDER_RUNG_IDS)
    ladder_track_rung_source(${target} ${LADDER_RUNG_FILE_${id}})
  endforeach()
  set(path ${PROJECT_BINARY_DIR}/generated/rungs_${namespace}.cpp)
  ladder_write_track_registry(${path} ${namespace} ${rungs_dir} "${LADDER_RUNG_IDS}")
  target_sources(${target} PRIVATE ${path})
endfunction()

# ladder_track_rung_source(<target> <file>): one rung's source compiled into <target> with its
# definitions (a track's library, or a test that compiles one rung).
function(ladder_track_rung_source target file)
  ladder_rung_definitions(${file} defs)
  set_source_files_properties(${file} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_DEFINITIONS "${defs}")
  target_sources(${target} PRIVATE ${file})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/common/toolkit)  # rung_id.hpp
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE AND DEFINED LADDER_TRACK_RUNGS_DIR)
  # cmake -DLADDER_TRACK_RUNGS_DIR=<track>/rungs -DLADDER_TRACK_NAMESPACE=p38
  #       [-DLADDER_TRACK_RUNG_LIST_OUT=<file>] [-DLADDER_TRACK_REGISTRY_OUT=<file>] -P cmake/Stages.cmake
  # The list: '#' comments, then per rung "id<TAB>source, relative to the rungs dir (NN_name/file.cu)
  # <TAB>name<TAB>definitions (';'-separated)".
  ladder_discover_track_rungs(${LADDER_TRACK_RUNGS_DIR})
  if(DEFINED LADDER_TRACK_RUNG_LIST_OUT)
    set(text "# Generated by cmake/Stages.cmake from ${LADDER_TRACK_RUNGS_DIR}. Do not edit.\n")
    foreach(id IN LISTS LADDER_RUNG_IDS)
      get_filename_component(file ${LADDER_RUNG_FILE_${id}} NAME)
      set(file ${LADDER_RUNG_FOLDER_${id}}/${file})
      ladder_rung_definitions(${LADDER_RUNG_FILE_${id}} defs)
      list(JOIN defs ";" defs)
      string(APPEND text "${id}\t${file}\t${LADDER_RUNG_NAME_${id}}\t${defs}\n")
    endforeach()
    ladder_write_if_changed(${LADDER_TRACK_RUNG_LIST_OUT} "${text}")
  endif()
  if(DEFINED LADDER_TRACK_REGISTRY_OUT)
    ladder_write_track_registry(${LADDER_TRACK_REGISTRY_OUT} ${LADDER_TRACK_NAMESPACE} ${LADDER_TRACK_RUNGS_DIR} "${LADDER_RUNG_IDS}")
  endif()
elseif(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
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
