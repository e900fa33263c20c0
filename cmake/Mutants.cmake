# Known-bad stages ("mutants") that the test suite must reject, from tests/mutants/*.mutant
# (format in cmake/MutantApply.cmake; the list and the rules in tests/mutants/README.md).
# For each mutant <name>: a mutated copy of its stage folder in the build tree, the object
# library mutant_<name>_stage compiled from it with the stage's compile definitions (the
# mutant's include directory before stages/, so the stage's `#include "lib/..."` picks the
# mutated copy of a shared header), and the program mutant_<name> (the ladder's driver,
# ladder_main, with that one stage registered, like stage_NN_name).
# CTest: mutant_<name> must see the program rejected; mutant_control_NN must see the unmutated
# stage program accepted by the same driver on the same problems (a driver that rejects
# everything fails there). Mutants checked by a sanitizer use sanitize_<tool>_NN as control.
include(${CMAKE_CURRENT_LIST_DIR}/MutantApply.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/CheckDriver.cmake)

set(LADDER_MUTANT_DIR ${PROJECT_SOURCE_DIR}/tests/mutants)
file(GLOB LADDER_MUTANT_FILES CONFIGURE_DEPENDS ${LADDER_MUTANT_DIR}/*.mutant)
list(SORT LADDER_MUTANT_FILES)

set(LADDER_MUTANT_BASES "")               # stage folders some mutant is derived from
set(LADDER_MUTANT_SANITIZER_CONTROLS "")  # <tool>_<id> whose sanitize test is a mutant's control
foreach(mutant_file IN LISTS LADDER_MUTANT_FILES)
  get_filename_component(name ${mutant_file} NAME_WE)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/mutants/${name}/stages)
  set(LADDER_MUTANT_CONFIGURE_DEPENDS ON)
  ladder_apply_mutant(${mutant_file} ${PROJECT_SOURCE_DIR}/stages ${out} OFF)
  # Re-applied at build time when the stage or the mutant changes (and fails the build if the
  # original text is gone), without reconfiguring.
  add_custom_command(
    OUTPUT ${MUTANT_OUTPUTS}
    COMMAND ${CMAKE_COMMAND} -DMUTANT_FILE=${mutant_file} -DSTAGES_DIR=${PROJECT_SOURCE_DIR}/stages
            -DOUT_DIR=${out} -P ${CMAKE_CURRENT_LIST_DIR}/MutantApply.cmake
    DEPENDS ${mutant_file} ${MUTANT_INPUTS} ${CMAKE_CURRENT_LIST_DIR}/MutantApply.cmake
    COMMENT "Applying mutant ${name} to stages/${MUTANT_FILE}"
    VERBATIM)

  string(SUBSTRING ${MUTANT_STAGE} 0 2 id)
  if(NOT "${LADDER_STAGE_FOLDER_${id}}" STREQUAL MUTANT_STAGE)
    message(FATAL_ERROR "mutant ${name}: stages/${MUTANT_STAGE} is not one of the stages CMake found "
                        "(${LADDER_STAGE_IDS}; stage ${id} is '${LADDER_STAGE_FOLDER_${id}}')")
  endif()
  ladder_stage_definitions(${id} defs)
  add_library(mutant_${name}_stage OBJECT ${MUTANT_OUTPUTS})  # headers listed for the dependency only
  target_include_directories(mutant_${name}_stage BEFORE PRIVATE ${out})
  target_include_directories(mutant_${name}_stage PRIVATE ${PROJECT_SOURCE_DIR}/stages)
  target_compile_definitions(mutant_${name}_stage PRIVATE ${defs})
  target_link_libraries(mutant_${name}_stage PUBLIC ladder_common PRIVATE ladder_warnings)
  ladder_write_registry(mutant_${name} "${id}")
  add_executable(mutant_${name} ${LADDER_REGISTRY_mutant_${name}})
  target_link_libraries(mutant_${name} PRIVATE mutant_${name}_stage ladder_main ladder_warnings)

  if(MUTANT_CHECK STREQUAL "oracle")
    set(tool none)
    set(problems ${LADDER_MUTANT_DIR}/oracle.problems)
  else()
    set(tool ${MUTANT_CHECK})
    set(problems ${LADDER_MUTANT_DIR}/sanitizer.problems)
    list(APPEND LADDER_MUTANT_SANITIZER_CONTROLS ${tool}_${id})
  endif()
  add_test(NAME mutant_${name}
           COMMAND ${LADDER_CHECK_COMMAND} --program $<TARGET_FILE:mutant_${name}> --expect reject
                   --tool ${tool} --problems ${problems} --label "mutant ${name} (${MUTANT_WHY})")
  set_tests_properties(mutant_${name} PROPERTIES LABELS "gpu;mutant" SKIP_RETURN_CODE 77 TIMEOUT 900)
  list(APPEND LADDER_MUTANT_BASES ${MUTANT_STAGE})
endforeach()

list(REMOVE_DUPLICATES LADDER_MUTANT_BASES)
list(SORT LADDER_MUTANT_BASES)
foreach(folder IN LISTS LADDER_MUTANT_BASES)
  string(SUBSTRING ${folder} 0 2 id)
  add_test(NAME mutant_control_${id}
           COMMAND ${LADDER_CHECK_COMMAND} --program $<TARGET_FILE:stage_${folder}> --expect accept
                   --tool none --problems ${LADDER_MUTANT_DIR}/oracle.problems
                   --label "control: unmutated stage ${folder}")
  set_tests_properties(mutant_control_${id} PROPERTIES LABELS "gpu;mutant" SKIP_RETURN_CODE 77 TIMEOUT 900)
endforeach()

# The driver's rules (what counts as a rejection, a skip, an infrastructure failure), checked
# on the CPU with a fake program and a fake compute-sanitizer: runs in CI.
if(Python3_FOUND)
  add_test(NAME check_program_rules COMMAND ${Python3_EXECUTABLE} ${LADDER_MUTANT_DIR}/test_check_program.py)
  set_tests_properties(check_program_rules PROPERTIES LABELS "mutant" TIMEOUT 300)
endif()
