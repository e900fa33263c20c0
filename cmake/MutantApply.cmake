# Reads a tests/mutants/<name>.mutant file and writes the mutated copy of its stage.
# Included by cmake/Mutants.cmake at configure time, and run at build time as
#   cmake -DMUTANT_FILE=... -DSTAGES_DIR=... -DOUT_DIR=... -P cmake/MutantApply.cmake
# whenever the stage's sources or the mutant change. Either way a mutant whose original text does
# not occur exactly once in its file stops the configuration or the build with a message.
#
# A .mutant file: comment lines (#), then "key: value" lines
#   stage: NN_name            the stage folder whose sources the mutant program compiles
#   file:  NN_name/file.ext   the file to mutate, relative to stages/ (lib/file.ext: a shared header)
#   check: oracle | memcheck | racecheck | synccheck   what must reject the mutant
#   why:   one line: the mistake and what it breaks
# then the exact text to replace and its replacement, whole lines or part of one line:
#   --- original
#   ...
#   --- replacement
#   ...
#   --- end

# ladder_parse_mutant(<file> <prefix>): sets <prefix>_NAME, _STAGE, _FILE, _CHECK, _WHY,
# _ORIGINAL and _REPLACEMENT in the caller's scope.
function(ladder_parse_mutant path prefix)
  get_filename_component(name ${path} NAME_WE)
  file(READ ${path} content)
  string(FIND "${content}" "\n--- original\n" i_orig)
  string(FIND "${content}" "\n--- replacement\n" i_repl)
  string(FIND "${content}" "\n--- end" i_end REVERSE)
  if(i_orig LESS 0 OR i_repl LESS i_orig OR i_end LESS i_repl)
    message(FATAL_ERROR "mutant ${path}: expected the lines '--- original', '--- replacement' and "
                        "'--- end', in this order, after the header")
  endif()
  string(SUBSTRING "${content}" 0 ${i_orig} header)
  foreach(key stage file check why)
    if(NOT header MATCHES "(^|\n)${key}:[ \t]*([^\n]*)")
      message(FATAL_ERROR "mutant ${path}: no '${key}:' line in the header")
    endif()
    string(STRIP "${CMAKE_MATCH_2}" value)
    string(TOUPPER ${key} KEY)
    set(${prefix}_${KEY} "${value}" PARENT_SCOPE)
    set(${KEY} "${value}")
  endforeach()
  if(NOT CHECK MATCHES "^(oracle|memcheck|racecheck|synccheck)$")
    message(FATAL_ERROR "mutant ${path}: check must be oracle, memcheck, racecheck or synccheck, got '${CHECK}'")
  endif()
  if(NOT STAGE MATCHES "^[0-9][0-9]_[A-Za-z0-9_]+$")
    message(FATAL_ERROR "mutant ${path}: stage must be a stage folder name (NN_name), got '${STAGE}'")
  endif()
  # Original: from after its marker line to the newline before the replacement marker.
  math(EXPR begin "${i_orig} + 14")  # length of "\n--- original\n"
  math(EXPR length "${i_repl} - ${begin}")
  if(length LESS 1)
    message(FATAL_ERROR "mutant ${path}: the original text is empty")
  endif()
  string(SUBSTRING "${content}" ${begin} ${length} original)
  # Replacement: may be empty (a deletion), then the end marker follows its marker directly.
  math(EXPR begin "${i_repl} + 17")  # length of "\n--- replacement\n"
  math(EXPR length "${i_end} - ${begin}")
  set(replacement "")
  if(length GREATER 0)
    string(SUBSTRING "${content}" ${begin} ${length} replacement)
  endif()
  set(${prefix}_NAME "${name}" PARENT_SCOPE)
  set(${prefix}_ORIGINAL "${original}" PARENT_SCOPE)
  set(${prefix}_REPLACEMENT "${replacement}" PARENT_SCOPE)
endfunction()

include(${CMAKE_CURRENT_LIST_DIR}/WriteIfChanged.cmake)  # ladder_write_if_changed

# ladder_apply_mutant(<mutant file> <stages dir> <out dir> <force>): copies the stage folder's
# code (*.cu, *.cuh, *.cpp, *.hpp, *.h) and the mutated file to <out dir>/<folder>/..., applies
# the replacement, and appends a guard to each source of the stage that includes the mutated
# file: compiling it fails if the mutated copy was not the one included (an include-path error).
# Sets MUTANT_<key> (as ladder_parse_mutant), MUTANT_OUTPUTS (written files, absolute),
# MUTANT_SOURCES (the stage's .cu/.cpp among them) and MUTANT_INPUTS (files read) in the caller.
function(ladder_apply_mutant mutant_file stages_dir out_dir force)
  ladder_parse_mutant(${mutant_file} M)
  set(target_file ${stages_dir}/${M_FILE})
  if(NOT IS_DIRECTORY ${stages_dir}/${M_STAGE})
    message(FATAL_ERROR "mutant ${M_NAME}: no stage folder stages/${M_STAGE}")
  endif()
  if(NOT EXISTS ${target_file})
    message(FATAL_ERROR "mutant ${M_NAME}: no file stages/${M_FILE}")
  endif()
  file(READ ${target_file} text)
  string(FIND "${text}" "${M_ORIGINAL}" first)
  string(FIND "${text}" "${M_ORIGINAL}" last REVERSE)
  if(first LESS 0)
    message(FATAL_ERROR "mutant ${M_NAME} (${mutant_file}): its original text no longer occurs in "
                        "stages/${M_FILE}; the stage changed, so update the mutant's original text "
                        "(and its replacement) to the current code. The text it looks for:\n${M_ORIGINAL}")
  endif()
  if(NOT first EQUAL last)
    message(FATAL_ERROR "mutant ${M_NAME} (${mutant_file}): its original text occurs more than once in "
                        "stages/${M_FILE}; make it longer so that it names one place:\n${M_ORIGINAL}")
  endif()
  string(REPLACE "${M_ORIGINAL}" "${M_REPLACEMENT}" mutated "${text}")
  string(APPEND mutated "\n// Mutant ${M_NAME} (tests/mutants/${M_NAME}.mutant), applied by cmake/MutantApply.cmake.\n"
                        "#define LADDER_MUTANT_APPLIED 1\n")

  set(globs)
  foreach(ext cu cuh cpp hpp h)
    list(APPEND globs ${stages_dir}/${M_STAGE}/*.${ext})
  endforeach()
  if(LADDER_MUTANT_CONFIGURE_DEPENDS)
    file(GLOB files CONFIGURE_DEPENDS ${globs})
  else()
    file(GLOB files ${globs})
  endif()
  list(APPEND files ${target_file})
  list(REMOVE_DUPLICATES files)
  set(outputs)
  set(sources)
  set(guarded 0)
  foreach(f IN LISTS files)
    file(RELATIVE_PATH rel ${stages_dir} ${f})
    if(rel STREQUAL M_FILE)
      set(content "${mutated}")
    else()
      file(READ ${f} content)
    endif()
    if(rel MATCHES "^${M_STAGE}/[^/]*\\.(cu|cpp)$")
      list(APPEND sources ${out_dir}/${rel})
      string(FIND "${content}" "#include \"${M_FILE}\"" includes)
      if(rel STREQUAL M_FILE OR includes GREATER -1)
        string(APPEND content "\n#ifndef LADDER_MUTANT_APPLIED\n#error \"mutant ${M_NAME}: the mutated copy of "
                              "${M_FILE} was not included: the mutant's include directory must come first\"\n#endif\n")
        math(EXPR guarded "${guarded} + 1")
      endif()
    endif()
    # Unchanged copies are left alone, so reconfiguring does not make the mutant's objects out of
    # date; `force` (the build-time step, rerun because an input changed) always rewrites.
    if(force)
      file(WRITE ${out_dir}/${rel} "${content}")
    else()
      ladder_write_if_changed(${out_dir}/${rel} "${content}")
    endif()
    list(APPEND outputs ${out_dir}/${rel})
  endforeach()
  if(guarded EQUAL 0)
    message(FATAL_ERROR "mutant ${M_NAME}: no source of stages/${M_STAGE} is ${M_FILE} or includes "
                        "\"${M_FILE}\", so the mutation would not be compiled")
  endif()
  foreach(key NAME STAGE FILE CHECK WHY)
    set(MUTANT_${key} "${M_${key}}" PARENT_SCOPE)
  endforeach()
  set(MUTANT_OUTPUTS ${outputs} PARENT_SCOPE)
  set(MUTANT_SOURCES ${sources} PARENT_SCOPE)
  set(MUTANT_INPUTS ${files} PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  foreach(var MUTANT_FILE STAGES_DIR OUT_DIR)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "usage: cmake -DMUTANT_FILE=... -DSTAGES_DIR=... -DOUT_DIR=... -P MutantApply.cmake")
    endif()
  endforeach()
  ladder_apply_mutant(${MUTANT_FILE} ${STAGES_DIR} ${OUT_DIR} ON)
endif()
