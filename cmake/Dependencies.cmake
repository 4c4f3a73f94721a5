# Every dependency comes from a system package (Debian/Ubuntu). toml++ is used header-only, so a
# machine without a package manager can use the headers unpacked under PKB_DEPS_PREFIX
# (tools/bootstrap.sh does that from a carried .deb).
find_package(CUDAToolkit REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(Threads REQUIRED)
find_package(CURL REQUIRED)  # LLM endpoints (pkb generate, pkb agent)

find_path(TOMLPP_INCLUDE_DIR toml++/toml.h
  HINTS "${PKB_DEPS_PREFIX}/usr/include" /usr/include /usr/local/include)
if(NOT TOMLPP_INCLUDE_DIR)
  message(FATAL_ERROR "toml++ headers not found: install libtomlplusplus-dev, or unpack it under "
                      "${PKB_DEPS_PREFIX} (tools/bootstrap.sh does either)")
endif()
add_library(pkb_tomlpp INTERFACE)
target_include_directories(pkb_tomlpp SYSTEM INTERFACE "${TOMLPP_INCLUDE_DIR}")
target_compile_definitions(pkb_tomlpp INTERFACE TOML_HEADER_ONLY=1 TOML_EXCEPTIONS=1)

# NCCL 2.28+ (windows and the device API). Ubuntu's libnccl-dev puts it in /usr; CUDA images may
# put it beside the toolkit.
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(FATAL_ERROR "NCCL not found (need nccl.h and libnccl.so, version 2.28 or newer)")
endif()
file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "#define NCCL_(MAJOR|MINOR) ")
string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*" "\\1" NCCL_MAJOR "${_nccl_ver}")
string(REGEX REPLACE ".*NCCL_MINOR ([0-9]+).*" "\\1" NCCL_MINOR "${_nccl_ver}")
if(NCCL_MAJOR LESS 2 OR (NCCL_MAJOR EQUAL 2 AND NCCL_MINOR LESS 28))
  message(FATAL_ERROR "NCCL ${NCCL_MAJOR}.${NCCL_MINOR} found in ${NCCL_INCLUDE_DIR}; pkb needs 2.28+")
endif()
add_library(pkb_nccl INTERFACE)
target_include_directories(pkb_nccl SYSTEM INTERFACE "${NCCL_INCLUDE_DIR}")
target_link_libraries(pkb_nccl INTERFACE "${NCCL_LIBRARY}")
message(STATUS "pkb: NCCL ${NCCL_MAJOR}.${NCCL_MINOR} at ${NCCL_INCLUDE_DIR}, toml++ at ${TOMLPP_INCLUDE_DIR}")

if(PKB_BUILD_TESTS)
  find_package(GTest REQUIRED)
  enable_testing()
endif()
