#!/usr/bin/env bash
# Measurement-quality benchmark: the baseline evaluated against itself N times in a row. Every
# speedup should be 1 within noise; no run may end in harness_error.
#   tools/bench_self_speedup.sh N [extra pkb eval flags]   (e.g. 100 --no-perf --size tiny)
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-10}
shift || true
OUT=${OUT:-$PWD/.gpu-check}
mkdir -p "$OUT"
J="$OUT/self_speedup.jsonl"
rm -f "$J"
for i in $(seq 1 "$N"); do
  build/bin/pkb eval 1 --solution reference -q --json "$J" "$@" >/dev/null 2>&1
done
python3 - "$J" "$N" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
st = [r["status"] for r in recs]
sp = [r["speedup"] for r in recs if r.get("speedup")]
walls = [r["wall_s"] for r in recs]
print(f"runs {len(recs)}/{n}; statuses: " + ", ".join(f"{s}={st.count(s)}" for s in sorted(set(st))))
if sp:
    print(f"self-speedup min {min(sp):.4f} max {max(sp):.4f} (all within [0.97, 1.03]: {all(0.97 <= s <= 1.03 for s in sp)})")
print(f"wall per eval: min {min(walls):.2f} s, median {sorted(walls)[len(walls)//2]:.2f} s, max {max(walls):.2f} s")
PY
