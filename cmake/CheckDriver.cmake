# The command that CTest's GPU checks run: scripts/check_program.py, the entry point of
# tooling/checks/check_program.py (see its header for the rules), with compute-sanitizer where
# CMake finds one. Shared by Mutants.cmake and Sanitize.cmake.
include_guard(GLOBAL)

find_package(Python3 COMPONENTS Interpreter QUIET)
find_program(LADDER_COMPUTE_SANITIZER compute-sanitizer
             HINTS ${CUDAToolkit_BIN_DIR} ${CUDAToolkit_BIN_DIR}/../compute-sanitizer
             DOC "compute-sanitizer for the sanitize_* and sanitizer-checked mutant_* tests")

if(Python3_FOUND)
  set(LADDER_CHECK_COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check_program.py)
  if(LADDER_COMPUTE_SANITIZER)
    list(APPEND LADDER_CHECK_COMMAND --sanitizer ${LADDER_COMPUTE_SANITIZER})
  endif()
else()
  # Still a visible skip (77), never a pass.
  set(LADDER_CHECK_COMMAND sh -c "echo 'SKIPPED: python3 not found at configure time'; exit 77" --)
endif()
