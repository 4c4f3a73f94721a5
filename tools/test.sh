#!/usr/bin/env bash
# Sets up, builds and runs every test. Without a GPU the GPU tests report "skipped", not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
PKB_PRESET=ci tools/bootstrap.sh  # warnings in pkb's own C++ are errors
ctest --test-dir build --output-on-failure -j "$(nproc)"
# The CPU tests again, with host code under AddressSanitizer and UndefinedBehaviorSanitizer
# (build-asan/, no GPU code compiled beyond the worker's); PKB_SKIP_SANITIZERS=1 leaves them out.
if [ "${PKB_SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake --preset asan -DCMAKE_CUDA_COMPILER="${PKB_NVCC:-/usr/local/cuda/bin/nvcc}" >/dev/null
  log=$(mktemp)
  cmake --build --preset asan -j "$(nproc)" >"$log" 2>&1 || { grep -E "FAILED|error" "$log" | head -40; exit 1; }
  rm -f "$log"
  ctest --preset asan -j "$(nproc)"
fi
