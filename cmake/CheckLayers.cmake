# The include layers of the C++ tree, checked (CTest: include_layers_hold):
#   common/toolkit/  includes only itself (and system headers): it knows no problem;
#   common/model/    includes the toolkit and itself;
#   ladder/          includes common/ and itself, never a stage folder (the registry is generated);
#   tracks/<t>/      never include a stage folder or problem 42's model.
# An include is matched by its file name against the files of the folders it may not reach.
# Run: cmake -DROOT=<repo> -P cmake/CheckLayers.cmake   (fails naming every offending line)
cmake_minimum_required(VERSION 3.24)
if(NOT ROOT)
  message(FATAL_ERROR "usage: cmake -DROOT=<repository> -P CheckLayers.cmake")
endif()

function(names_in out)  # the file names of the given globs
  set(names)
  foreach(g IN LISTS ARGN)
    file(GLOB files ${ROOT}/${g})
    foreach(f IN LISTS files)
      get_filename_component(n ${f} NAME)
      list(APPEND names ${n})
    endforeach()
  endforeach()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

set(failures)
function(check layer forbidden_names)  # every quoted include of the layer's files
  file(GLOB_RECURSE files ${ROOT}/${layer}/*.hpp ${ROOT}/${layer}/*.cpp ${ROOT}/${layer}/*.cu ${ROOT}/${layer}/*.cuh)
  foreach(f IN LISTS files)
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" inc "${line}")
      get_filename_component(n "${inc}" NAME)
      if(n IN_LIST forbidden_names OR inc MATCHES "(^|/)[0-9][0-9]_[A-Za-z0-9_]+/")
        file(RELATIVE_PATH rel ${ROOT} ${f})
        list(APPEND failures "${rel}: #include \"${inc}\" (${layer} may not include it)")
      endif()
    endforeach()
  endforeach()
  set(failures ${failures} PARENT_SCOPE)
endfunction()

names_in(model common/model/*)
names_in(ladder ladder/*)
names_in(stage_lib stages/lib/*)
check(common/toolkit "${model};${ladder};${stage_lib}")
check(common/model "${ladder};${stage_lib}")
check(ladder "${stage_lib}")
file(GLOB tracks LIST_DIRECTORIES true ${ROOT}/tracks/*)
foreach(t IN LISTS tracks)
  if(IS_DIRECTORY ${t})
    file(RELATIVE_PATH rel ${ROOT} ${t})
    # A track's own problem.hpp and oracle.hpp share names with the model's: a track reaches the
    # model only through "common/model/..." (its include path has the repository root, not the model).
    file(GLOB_RECURSE files ${t}/*.hpp ${t}/*.cpp ${t}/*.cu ${t}/*.cuh)
    foreach(f IN LISTS files)
      file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
      foreach(line IN LISTS lines)
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" inc "${line}")
        if(inc MATCHES "^common/model/|(^|/)[0-9][0-9]_[A-Za-z0-9_]+/|^stages/")
          file(RELATIVE_PATH r ${ROOT} ${f})
          list(APPEND failures "${r}: #include \"${inc}\" (a track may not include problem 42's model or a stage)")
        endif()
      endforeach()
    endforeach()
  endif()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "include layers broken:\n  ${text}")
endif()
message(STATUS "include layers hold")
