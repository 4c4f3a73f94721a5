#!/usr/bin/env bash
# Downloads the header-only packages a machine without a package mirror lacks (toml++) into
# .deps/, where tools/bootstrap.sh finds and unpacks them. Run it where apt reaches a mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps
(cd .deps && apt-get download libtomlplusplus-dev)
ls -l .deps/*.deb
