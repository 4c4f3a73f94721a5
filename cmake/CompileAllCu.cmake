# Build check: every .cu under problems/ and solutions/ must compile for the configured
# architectures (CI has nvcc but no GPU). Solutions that are expected not to compile (adversarial
# compile bombs) carry "pkb-expect: compile_error" on their first lines and are left out here, as
# is model output (`pkb generate` and `pkb agent` start every file with "pkb-generated:"), which
# may live under solutions/<run-name>/ and is judged by `pkb eval`, not by the build.
file(GLOB_RECURSE _all_cu CONFIGURE_DEPENDS
  "${CMAKE_SOURCE_DIR}/problems/*.cu" "${CMAKE_SOURCE_DIR}/solutions/*.cu")
set(_cu "")
foreach(f IN LISTS _all_cu)
  file(STRINGS "${f}" _head LIMIT_COUNT 5)
  string(FIND "${_head}" "pkb-expect: compile_error" _skip)
  string(FIND "${_head}" "pkb-generated:" _generated)
  if(_skip EQUAL -1 AND _generated EQUAL -1)
    list(APPEND _cu "${f}")
  endif()
endforeach()
add_library(pkb_all_cu OBJECT ${_cu})
target_include_directories(pkb_all_cu PRIVATE "${CMAKE_SOURCE_DIR}/include")
target_compile_options(pkb_all_cu PRIVATE -O3)
target_link_libraries(pkb_all_cu PRIVATE pkb_nccl CUDA::cudart CUDA::cublas)
list(LENGTH _cu _n)
message(STATUS "pkb: compile check covers ${_n} .cu files under problems/ and solutions/")
