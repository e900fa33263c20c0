# The include layers of the C++ tree, checked (CTest: include_layers_hold):
#   common/toolkit/  includes only itself (and system headers): it knows no problem;
#   common/model/    includes the toolkit and itself;
#   harness/         includes the toolkit and itself: timing, phase marks, the L2 flush, the
#                    floor and the provenance report serve every ladder, so it knows no problem;
#   ladder/          includes common/, harness/ and itself, never a stage folder (the registry is
#                    generated);
#   tracks/<t>/      include the toolkit, harness/, tracks/shared/ and their own folder: never a
#                    stage folder, problem 42's model, ladder/ or another track;
#   tracks/shared/   what the tracks share: includes the toolkit and itself, no track.
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
# check(<folder> <forbidden file names> <forbidden include regex> <why>): every quoted include of
# the folder's sources whose file name is forbidden or whose text matches the regex fails.
function(check folder forbidden_names forbidden_regex why)
  file(GLOB_RECURSE files ${ROOT}/${folder}/*.hpp ${ROOT}/${folder}/*.cpp ${ROOT}/${folder}/*.cu ${ROOT}/${folder}/*.cuh)
  foreach(f IN LISTS files)
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" inc "${line}")
      get_filename_component(n "${inc}" NAME)
      if(n IN_LIST forbidden_names OR inc MATCHES "${forbidden_regex}")
        file(RELATIVE_PATH rel ${ROOT} ${f})
        list(APPEND failures "${rel}: #include \"${inc}\" (${why})")
      endif()
    endforeach()
  endforeach()
  set(failures ${failures} PARENT_SCOPE)
endfunction()

set(a_stage "(^|/)[0-9][0-9]_[A-Za-z0-9_]+/")
names_in(model common/model/*)
names_in(ladder ladder/*)
names_in(harness harness/*)
names_in(stage_lib stages/lib/*)
check(common/toolkit "${model};${ladder};${harness};${stage_lib}" "${a_stage}" "common/toolkit may not include it")
check(common/model "${ladder};${harness};${stage_lib}" "${a_stage}" "common/model may not include it")
check(harness "${model};${ladder};${stage_lib}" "${a_stage}|^common/model/|^ladder/|^tracks/"
      "harness/ stands on the toolkit alone")
check(ladder "${stage_lib}" "${a_stage}" "ladder may not include it")
# A track's own problem.hpp and oracle.hpp share names with the model's: a track reaches the model
# only through "common/model/..." (its include path has the repository root, not the model).
check(tracks "" "^common/model/|^stages/|${a_stage}" "a track may not include problem 42's model or a stage")
# What two tracks share lives in tracks/shared/, which includes no track; a track includes
# tracks/shared/, never another track's folder ("pNN_topic/...").
check(tracks/shared "" "(^|/)p[0-9]+_[A-Za-z0-9_]+/" "tracks/shared may not include a track")
file(GLOB track_dirs LIST_DIRECTORIES true ${ROOT}/tracks/p[0-9]*_*)
foreach(dir IN LISTS track_dirs)
  if(IS_DIRECTORY ${dir})
    get_filename_component(track ${dir} NAME)
    check(tracks/${track} "" "(^|/)p[0-9]+_[A-Za-z0-9_]+/" "a track may not include another track: share through tracks/shared/")
    # A bare name of problem 42's model or of ladder/ (conv_params.hpp, gpu_session.hpp), unless
    # the track or tracks/shared has a file of that name (its own problem.hpp), which it reaches.
    file(GLOB_RECURSE own_files ${dir}/* ${ROOT}/tracks/shared/*)
    set(own ${harness})
    foreach(f IN LISTS own_files)
      get_filename_component(n ${f} NAME)
      list(APPEND own ${n})
    endforeach()
    set(foreign ${model} ${ladder})
    if(foreign AND own)
      list(REMOVE_ITEM foreign ${own})
    endif()
    check(tracks/${track} "${foreign}" "^ladder/" "a track stands on harness/, not on problem 42's model or ladder/")
  endif()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "include layers broken:\n  ${text}")
endif()
message(STATUS "include layers hold")
