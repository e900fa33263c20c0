# Script mode, run at every build: cmake -DSOURCE_DIR=<repo> -DOUT=<header> -P cmake/GitStamp.cmake
# Writes the commit the sources are at, and whether tracked files differ from it, as macros that
# common/toolkit/provenance.cpp records in the results (LADDER_BUILD_GIT_COMMIT, LADDER_BUILD_GIT_DIRTY).
# The file is rewritten only when that changes, so an unchanged tree rebuilds nothing. Outside a
# git checkout (a tarball) both are "unknown".
set(commit "unknown")
set(dirty "unknown")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} -C "${SOURCE_DIR}" rev-parse HEAD
                  OUTPUT_VARIABLE head RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND head MATCHES "^[0-9a-f]+$")
    set(commit "${head}")
    execute_process(COMMAND ${GIT_EXECUTABLE} -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE status RESULT_VARIABLE rc ERROR_QUIET)
    if(rc EQUAL 0)
      if(status STREQUAL "")
        set(dirty "no")
      else()
        set(dirty "yes")
      endif()
    endif()
  endif()
endif()
set(content "// Generated at build time by cmake/GitStamp.cmake. Do not edit.
#define LADDER_BUILD_GIT_COMMIT \"${commit}\"
#define LADDER_BUILD_GIT_DIRTY \"${dirty}\"
")
include(${CMAKE_CURRENT_LIST_DIR}/WriteIfChanged.cmake)
ladder_write_if_changed("${OUT}" "${content}")
