#!/usr/bin/env bash
# Sets up and builds pkb: installs the Debian/Ubuntu packages it needs (when missing and apt can
# reach a mirror), configures with the release preset and builds into build/ (binaries in
# build/bin). Safe to re-run. On a machine without a package mirror, header-only packages fetched
# beforehand with tools/fetch-offline-deps.sh are unpacked from .deps/ instead.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS="cmake ninja-build g++ libgtest-dev nlohmann-json3-dev libcli11-dev libfmt-dev libtomlplusplus-dev libssl-dev libcurl4-openssl-dev"
HEADERS="nlohmann/json.hpp CLI/CLI.hpp fmt/format.h toml++/toml.h openssl/evp.h gtest/gtest.h"

missing() {
  local out=""
  for h in $HEADERS; do
    [ -f "/usr/include/$h" ] || [ -f ".deps/root/usr/include/$h" ] || out="$out $h"
  done
  # libcurl's headers sit in a multiarch folder on Debian/Ubuntu (/usr/include/<triplet>/curl).
  # (ls fails when one of the two patterns matches nothing; pipefail must not count that.)
  { ls /usr/include/curl/curl.h /usr/include/*/curl/curl.h 2>/dev/null || true; } | grep -q . || out="$out curl/curl.h"
  command -v cmake >/dev/null || out="$out cmake"
  command -v ninja >/dev/null || out="$out ninja"
  echo "$out"
}

if [ -n "$(missing)" ] && command -v apt-get >/dev/null; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[bootstrap] installing:$(missing)"
  $SUDO apt-get update -qq >/dev/null 2>&1 || true
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PKGS >/dev/null 2>&1 ||
    echo "[bootstrap] apt-get could not install everything (no package mirror?); trying .deps/"
fi
if [ -n "$(missing)" ] && ls .deps/*.deb >/dev/null 2>&1; then
  mkdir -p .deps/root
  for f in .deps/*.deb; do dpkg -x "$f" .deps/root; done
fi
if [ -n "$(missing)" ]; then
  echo "[bootstrap] still missing:$(missing)" >&2
  echo "[bootstrap] install: apt-get install $PKGS" >&2
  exit 1
fi
NVCC=${PKB_NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x "$NVCC" ]; then
  echo "[bootstrap] nvcc not found at $NVCC: install the CUDA toolkit (13.0 or newer) or set PKB_NVCC" >&2
  exit 1
fi
if [ ! -f /usr/include/nccl.h ] && [ ! -f /usr/local/cuda/include/nccl.h ]; then
  echo "[bootstrap] NCCL 2.28+ headers not found: install libnccl-dev (NVIDIA's CUDA repository)" >&2
  exit 1
fi

PRESET=${PKB_PRESET:-release}  # tools/test.sh builds with "ci": warnings are errors
cmake --preset "$PRESET" -DCMAKE_CUDA_COMPILER="$NVCC" >/dev/null
cmake --build --preset "$PRESET" -j "$(nproc)"
echo "[bootstrap] built: build/bin/pkb, build/bin/pkb-worker"
