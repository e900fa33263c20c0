# compute-sanitizer over every GPU stage program, as CTest tests sanitize_<tool>_NN (label gpu;
# sanitize): memcheck (with leak checking), racecheck, synccheck and initcheck, each on the small
# problems of tests/mutants/sanitizer.problems, through scripts/check_program.py, which skips
# (exit 77) without a GPU or without a usable compute-sanitizer. The stages are those
# cmake/Stages.cmake found (LADDER_STAGE_IDS), the GPU ones (a .cu source).
# scripts/sanitize.sh runs the same checks outside CTest.
include(${CMAKE_CURRENT_LIST_DIR}/CheckDriver.cmake)

foreach(id IN LISTS LADDER_STAGE_IDS)
  if(NOT LADDER_STAGE_KIND_${id} STREQUAL "gpu")
    continue()  # a CPU stage: nothing for a GPU sanitizer to see
  endif()
  set(folder ${LADDER_STAGE_FOLDER_${id}})
  foreach(tool memcheck racecheck synccheck initcheck)
    add_test(NAME sanitize_${tool}_${id}
             COMMAND ${LADDER_CHECK_COMMAND} --program $<TARGET_FILE:stage_${folder}> --expect accept
                     --tool ${tool} --problems ${PROJECT_SOURCE_DIR}/tests/mutants/sanitizer.problems
                     --label "${tool} on stage ${folder}")
    set(labels gpu sanitize)
    if("${tool}_${id}" IN_LIST LADDER_MUTANT_SANITIZER_CONTROLS)
      list(APPEND labels mutant)  # the control of a mutant checked by this tool (Mutants.cmake)
    endif()
    set_tests_properties(sanitize_${tool}_${id} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77 TIMEOUT 900)
  endforeach()
endforeach()
