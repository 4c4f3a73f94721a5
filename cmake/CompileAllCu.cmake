# Build check: every .cu under problems/ and solutions/ must compile for the configured
# architectures (CI has nvcc but no GPU). Solutions that are expected not to compile (adversarial
# compile bombs) carry "pkb-expect: compile_error" on their first lines and are left out here, as
# is model output (`pkb generate` and `pkb agent` start every file with "pkb-generated:"), which
# may live under solutions/<run-name>/ and is judged by `pkb eval`, not by the build. Files that
# include a cuDNN header are left out where cuDNN was not found (top CMakeLists.txt), so that a
# machine without cuDNN still builds.
file(GLOB_RECURSE _all_cu CONFIGURE_DEPENDS
  "${CMAKE_SOURCE_DIR}/problems/*.cu" "${CMAKE_SOURCE_DIR}/solutions/*.cu")
set(_cu "")
set(_no_cudnn "")
foreach(f IN LISTS _all_cu)
  file(STRINGS "${f}" _head LIMIT_COUNT 5)
  string(FIND "${_head}" "pkb-expect: compile_error" _skip)
  string(FIND "${_head}" "pkb-generated:" _generated)
  if(NOT _skip EQUAL -1 OR NOT _generated EQUAL -1)
    continue()
  endif()
  # As solution_libraries() in src/build/compiler.cpp decides (block comments aside): an #include
  # of cudnn.h or cudnn_*.h.
  file(STRINGS "${f}" _cudnn_includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]*/)?cudnn(_[A-Za-z0-9_]+)?\\.h[>\"]")
  if(_cudnn_includes AND NOT PKB_CUDNN_INCLUDE_DIR)
    file(RELATIVE_PATH _rel "${CMAKE_SOURCE_DIR}" "${f}")
    list(APPEND _no_cudnn "${_rel}")
    continue()
  endif()
  list(APPEND _cu "${f}")
endforeach()
if(_no_cudnn)
  list(JOIN _no_cudnn ", " _no_cudnn_list)
  message(STATUS "pkb: cuDNN not found, so the compile check leaves out ${_no_cudnn_list}")
endif()
add_library(pkb_all_cu OBJECT ${_cu})
target_include_directories(pkb_all_cu PRIVATE "${CMAKE_SOURCE_DIR}/include")
# nvcc finds cuDNN by itself beside the toolkit or in the system directories (which must never be
# named with -I/-isystem: see nvcc_argv); elsewhere its directory is added.
if(PKB_CUDNN_INCLUDE_DIR AND NOT PKB_CUDNN_INCLUDE_DIR MATCHES "^/usr/(local/)?include(/[a-z0-9_]+-linux-gnu)?$"
   AND NOT PKB_CUDNN_INCLUDE_DIR IN_LIST CUDAToolkit_INCLUDE_DIRS)
  target_include_directories(pkb_all_cu PRIVATE "${PKB_CUDNN_INCLUDE_DIR}")
endif()
target_compile_options(pkb_all_cu PRIVATE -O3)
target_link_libraries(pkb_all_cu PRIVATE pkb_nccl CUDA::cudart CUDA::cublas)
list(LENGTH _cu _n)
message(STATUS "pkb: compile check covers ${_n} .cu files under problems/ and solutions/")
