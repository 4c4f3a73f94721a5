#!/usr/bin/env bash
# How close the overlapped GEMM + communication experts (12, 13, 16) come to the ideal of hiding one
# behind the other: per problem and size, the expert's median time against max(GEMM-only time,
# communication floor). GEMM-only = tools/bench/gemm_only.cu (the rank's local GEMM, no
# communication) timed by `pkb run --perf`; the communication floor = the record's link_bytes over
# the link bandwidth (calibrated if `pkb calibrate` ran, else the datasheet). Same GPUs, one run.
#   tools/bench_gemm_floor.sh [--gpus W] [--sizes "default large"] [--stages C] [problems...]
#   (default: 12 13 16). --stages C sets PKBX_STAGES=C for the expert and the GEMM-only stand-in
#   alike (12, 13: both split M into the same C row chunks), to separate the cost of chunking the
#   GEMM from that of running it beside the transfers.
# Prints a Markdown table; records go to $OUT/gemm_floor.jsonl (OUT defaults to results-local/).
set -euo pipefail
cd "$(dirname "$0")/.."
W=2 SIZES="large" PROBS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) W=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --stages) export PKBX_STAGES=$2; shift 2 ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) PROBS+=("$1"); shift ;;
  esac
done
[ ${#PROBS[@]} -gt 0 ] || PROBS=(12 13 16)
OUT=${OUT:-results-local}
mkdir -p "$OUT"
J="$OUT/gemm_floor.jsonl"
: >"$J"
export NCCL_NVLS_ENABLE=0
for p in "${PROBS[@]}"; do
  for s in $SIZES; do
    expert=$(ls solutions/expert/${p}_*.cu)
    build/bin/pkb eval "$p" --solution "$expert" --gpus "$W" --size "$s" -q --label expert --json "$J" >&2 || true
    build/bin/pkb run "$p" --solution tools/bench/gemm_only.cu --gpus "$W" --size "$s" --perf -q --json "$J" >&2 || true
  done
done
python3 - "$J" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(r, side):
    t = (r.get("timing") or {}).get(side) or {}
    return t.get("median_us")
by = {}
for r in rows:
    key = (r["problem"]["stem"], r["config"]["size"], r["config"]["world"])
    by.setdefault(key, {})["gemm_only" if r.get("kind") == "run" else "expert"] = r
print("| problem | W | size | NCCL baseline (us) | expert (us) | GEMM only (us) | comm floor (us) | expert / max(GEMM, comm) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for (stem, size, w), d in sorted(by.items()):
    e, g = d.get("expert"), d.get("gemm_only")
    if not e or not g:
        continue
    base, ex = med(e, "baseline"), med(e, "candidate")
    go = med(g, "candidate")
    link = (e.get("roofline") or {}).get("link_us")
    if None in (base, ex, go, link):
        print(f"| {stem} | {w} | {size} | missing data: status {e.get('status')} / {g.get('status')} |")
        continue
    print(f"| {stem} | {w} | {size} | {base:.1f} | {ex:.1f} | {go:.1f} | {link:.1f} | {ex / max(go, link):.3f} |")
PY
