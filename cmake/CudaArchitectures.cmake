# Chooses the GPU architectures to build for, before project() (CMake's own compiler check
# already compiles for them, so a bad choice must be caught here, with a clear message).
#
#   1. -DCMAKE_CUDA_ARCHITECTURES=... or the CUDAARCHS environment variable: used as given;
#   2. else the GPUs nvidia-smi lists (their compute capabilities, e.g. 7.5 -> 75);
#   3. else (no GPU here: a cluster login node, CI) LADDER_DEFAULT_CUDA_ARCHITECTURES: every
#      architecture the course targets that this nvcc offers, announced, never silent.
#
# Every choice is checked against what this nvcc can generate (nvcc --list-gpu-code) and against
# the ladder's own minimum, sm_75 (Turing: T4, RTX 20xx); CUDA 13 itself starts at sm_75.
# The ladder needs CUDA 12.0 or newer; sm_100 and sm_120 need CUDA 12.8 or newer.
include_guard(GLOBAL)

set(LADDER_MIN_CUDA_ARCH 75)
# The course's GPUs: T4/RTX 2080 (75), A100 (80), RTX 30xx/A10 (86), L4/RTX 40xx (89),
# H100/H200 (90), B200 (100), RTX 50xx (120).
set(LADDER_COURSE_CUDA_ARCHITECTURES 75 80 86 89 90 100 120)

# The nvcc that project() will use: CMAKE_CUDA_COMPILER, $CUDACXX, PATH, /usr/local/cuda/bin.
if(DEFINED CMAKE_CUDA_COMPILER)
  set(_ladder_nvcc "${CMAKE_CUDA_COMPILER}")
elseif(DEFINED ENV{CUDACXX})
  set(_ladder_nvcc "$ENV{CUDACXX}")
else()
  find_program(_ladder_nvcc nvcc PATHS /usr/local/cuda/bin)
endif()

# The architectures this nvcc can generate machine code for (sm_NN -> NN); empty if unknown.
set(_ladder_supported "")
if(_ladder_nvcc)
  execute_process(COMMAND "${_ladder_nvcc}" --list-gpu-code OUTPUT_VARIABLE _ladder_codes
                  RESULT_VARIABLE _ladder_rc ERROR_QUIET)
  execute_process(COMMAND "${_ladder_nvcc}" --version OUTPUT_VARIABLE _ladder_nvcc_version ERROR_QUIET)
  string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" _ladder_release "${_ladder_nvcc_version}")
  set(_ladder_release "${CMAKE_MATCH_1}")
  if(_ladder_rc EQUAL 0)
    string(REGEX MATCHALL "sm_[0-9]+" _ladder_codes "${_ladder_codes}")
    foreach(_code IN LISTS _ladder_codes)
      string(REPLACE "sm_" "" _code "${_code}")
      list(APPEND _ladder_supported ${_code})
    endforeach()
  endif()
  if(_ladder_release AND _ladder_release VERSION_LESS 12.0)
    message(FATAL_ERROR "CUDA ${_ladder_release} (${_ladder_nvcc}) is too old: the ladder needs CUDA 12.0 or newer")
  endif()
endif()

# Stops configuring if an architecture is below the ladder's minimum or unknown to this nvcc.
function(ladder_check_cuda_architectures archs origin)
  foreach(_arch IN LISTS archs)
    if(_arch MATCHES "^(native|all|all-major|OFF)$")
      continue()  # CMake's own keywords: CMake resolves them
    endif()
    if(NOT _arch MATCHES "^([0-9]+)[af]?(-real|-virtual)?$")
      message(FATAL_ERROR "CUDA architecture '${_arch}' (${origin}) is not of the form 75, 90-real or 90-virtual")
    endif()
    set(_num ${CMAKE_MATCH_1})
    if(_num LESS LADDER_MIN_CUDA_ARCH)
      message(FATAL_ERROR "sm_${_num} (${origin}) is older than the ladder supports: it needs sm_${LADDER_MIN_CUDA_ARCH} "
                          "(Turing: T4, RTX 2080) or newer")
    endif()
    if(_ladder_supported AND NOT _num IN_LIST _ladder_supported)
      string(REPLACE ";" " " _offers "${_ladder_supported}")
      message(FATAL_ERROR "CUDA ${_ladder_release}'s nvcc (${_ladder_nvcc}) cannot generate code for sm_${_num} "
                          "(${origin}); it offers: ${_offers}. A newer GPU needs a newer CUDA toolkit "
                          "(sm_100 and sm_120: CUDA 12.8 or newer); pass -DCMAKE_CUDA_ARCHITECTURES=<one it offers> "
                          "to build for another GPU.")
    endif()
  endforeach()
endfunction()

# The automatic choice is a normal variable, never cached: every configure decides afresh, and a
# cached CMAKE_CUDA_ARCHITECTURES is always the user's.
if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(_ladder_archs "${CMAKE_CUDA_ARCHITECTURES}")
    set(_ladder_origin "CMAKE_CUDA_ARCHITECTURES")
  else()
    set(_ladder_archs "$ENV{CUDAARCHS}")
    set(_ladder_origin "the CUDAARCHS environment variable")
    # CMake reads CUDAARCHS only when it first detects the compiler: pass it on every configure.
    set(CMAKE_CUDA_ARCHITECTURES "${_ladder_archs}")
  endif()
  ladder_check_cuda_architectures("${_ladder_archs}" "${_ladder_origin}")
  message(STATUS "CUDA architectures: ${_ladder_archs} (from ${_ladder_origin})")
else()
  execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
                  OUTPUT_VARIABLE _ladder_caps RESULT_VARIABLE _ladder_smi_rc ERROR_QUIET)
  string(REGEX MATCHALL "[0-9]+\\.[0-9]+" _ladder_caps "${_ladder_caps}")
  set(_ladder_archs "")
  if(_ladder_smi_rc EQUAL 0)
    foreach(_cap IN LISTS _ladder_caps)
      string(REPLACE "." "" _cap "${_cap}")
      list(APPEND _ladder_archs ${_cap})
    endforeach()
    list(REMOVE_DUPLICATES _ladder_archs)
  endif()
  # A node with an old display GPU beside a supported one: build for the supported ones.
  set(_ladder_usable "")
  set(_ladder_dropped "")
  foreach(_arch IN LISTS _ladder_archs)
    if(_arch LESS LADDER_MIN_CUDA_ARCH OR (_ladder_supported AND NOT _arch IN_LIST _ladder_supported))
      list(APPEND _ladder_dropped ${_arch})
    else()
      list(APPEND _ladder_usable ${_arch})
    endif()
  endforeach()
  if(_ladder_usable AND _ladder_dropped)
    message(WARNING "ignoring the GPU(s) of architecture ${_ladder_dropped}: older than sm_${LADDER_MIN_CUDA_ARCH} "
                    "or unknown to this nvcc; building for ${_ladder_usable}")
    set(_ladder_archs "${_ladder_usable}")
  endif()
  if(_ladder_archs)
    ladder_check_cuda_architectures("${_ladder_archs}" "the GPU nvidia-smi reports")
    message(STATUS "CUDA architectures: ${_ladder_archs} (the GPU(s) nvidia-smi reports here)")
  else()
    foreach(_arch IN LISTS LADDER_COURSE_CUDA_ARCHITECTURES)
      if(NOT _ladder_supported OR _arch IN_LIST _ladder_supported)
        list(APPEND _ladder_archs ${_arch})
      endif()
    endforeach()
    string(REPLACE ";" " " _shown "${_ladder_archs}")
    message(NOTICE "-- No GPU found (nvidia-smi lists none): building for the default list ${_shown}, every "
                   "course architecture this nvcc offers. To build for one GPU only (faster), pass "
                   "-DCMAKE_CUDA_ARCHITECTURES=75 (T4, RTX 2080), 80 (A100), 86, 89 (L4) or 90 (H100, H200).")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_ladder_archs}")
endif()
