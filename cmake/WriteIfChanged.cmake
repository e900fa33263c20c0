# ladder_write_if_changed(<path> <content>): writes `content` to `path` unless the file already
# holds exactly that, so a generated file that did not change does not make its dependents out
# of date. Used at configure time (Stages.cmake, MutantApply.cmake) and in script mode
# (GitStamp.cmake, MutantApply.cmake at build time).
include_guard(GLOBAL)
function(ladder_write_if_changed path content)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()
