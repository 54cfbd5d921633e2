# cmake/TbdHelpers.cmake: the warnings target and tbd_add_test().

# Warnings for our own code (not for the libraries' headers). TBD_WERROR makes every warning
# an error, in C++ and in CUDA (nvcc's own and the host compiler's): the presets turn it on
# when the environment has CI set (.ci/run does), so a warning cannot land.
option(TBD_WERROR "treat warnings as errors (C++ and CUDA)" OFF)
add_library(tbd_warnings INTERFACE)
target_compile_options(tbd_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
if(TBD_WERROR)
  message(STATUS "tbd: warnings are errors (TBD_WERROR)")
  target_compile_options(tbd_warnings INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Werror>)
endif()

# tbd_add_test(NAME src... [LABELS l...]): one GoogleTest executable; each TEST becomes a
# ctest test (discovered when ctest runs, so building stays fast). NO_PRETTY_VALUES: every
# parameterised suite names its instances (<case>_<target>), and CMake would otherwise append
# GoogleTest's dump of the parameter's bytes to those names.
function(tbd_add_test name)
  cmake_parse_arguments(T "" "" "LABELS;SOURCES" ${ARGN})
  add_executable(${name} ${T_SOURCES} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE tbd tbd_test_support GTest::gtest_main tbd_warnings)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
    PROPERTIES LABELS "${T_LABELS}")
endfunction()

# tbd_find_cuda_toolkit([QUIET|REQUIRED]): find_package(CUDAToolkit) that also works with the
# stock FindCUDAToolkit of CMake 3.25 (Debian 12) on CUDA >= 12.9. That module marks the target
# CUDA::nvToolsExt deprecated whenever the project requires CMake >= 3.25, without checking that
# the target exists; CUDA 13 ships no libnvToolsExt (NVTX 3 is header-only), so configure stops
# with "set_property could not find TARGET CUDA::nvToolsExt". CMake 3.26 checks the target
# first. The check reads only CMAKE_MINIMUM_REQUIRED_VERSION, so it is lowered for the call
# (policies are untouched: they come from cmake_minimum_required, not from this variable).
macro(tbd_find_cuda_toolkit)
  if(CMAKE_VERSION VERSION_LESS 3.26)
    set(_tbd_min_required ${CMAKE_MINIMUM_REQUIRED_VERSION})
    set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
    find_package(CUDAToolkit ${ARGN})
    set(CMAKE_MINIMUM_REQUIRED_VERSION ${_tbd_min_required})
    unset(_tbd_min_required)
  else()
    find_package(CUDAToolkit ${ARGN})
  endif()
endmacro()
