#!/usr/bin/env bash
# Regenerates the report example in docs/: docs/report-example/synthetic.jsonl (SYNTHETIC records,
# see tools/synthetic_results.py), docs/report-example/report.html (pkb report over those and the
# real records in docs/results/), and docs/report-example.png (that page in headless Chromium).
# Needs build/bin/pkb and chromium; Chromium gets no network (no proxy, no name resolution).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/synthetic_results.py > docs/report-example/synthetic.jsonl
build/bin/pkb report docs/results/*.jsonl docs/report-example/synthetic.jsonl \
  --format markdown --out docs/report-example/report.md --html docs/report-example/report.html
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"${PKB_CHROMIUM:-chromium}" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --no-proxy-server \
  "--host-resolver-rules=MAP * ~NOTFOUND" --user-data-dir="$profile" \
  --screenshot="$PWD/docs/report-example.png" --window-size=1280,2360 \
  "file://$PWD/docs/report-example/report.html" 2>/dev/null
echo "[report_example] wrote docs/report-example/{synthetic.jsonl,report.html,report.md} and docs/report-example.png"
