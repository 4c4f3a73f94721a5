#!/usr/bin/env bash
# Sets up, builds and runs every test. Without a GPU the GPU tests report "skipped", not failed.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/bootstrap.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
