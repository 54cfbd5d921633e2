# cmake/TbdHelpers.cmake: the warnings target and tbd_add_test().

add_library(tbd_warnings INTERFACE)
target_compile_options(tbd_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter --Werror all-warnings>)

# tbd_add_test(NAME src... [LABELS l...]): one GoogleTest executable; each TEST becomes a
# ctest test (discovered when ctest runs, so building stays fast).
function(tbd_add_test name)
  cmake_parse_arguments(T "" "" "LABELS;SOURCES" ${ARGN})
  add_executable(${name} ${T_SOURCES} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE tbd tbd_test_support GTest::gtest_main tbd_warnings)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}")
endfunction()
