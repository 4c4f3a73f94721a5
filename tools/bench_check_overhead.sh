#!/usr/bin/env bash
# What the evaluator's own checks cost: N evals of problem 1's baseline against itself with every
# check, and N with the per-call checks of timed calls switched off (--unchecked-timing); prints the
# median wall time of each and the overhead of the checks as a share of a full eval.
#   tools/bench_check_overhead.sh [N] [extra pkb eval flags]
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-3}
shift || true
OUT=${OUT:-$PWD/.gpu-check}
mkdir -p "$OUT"
J="$OUT/check_overhead.jsonl"
rm -f "$J"
for i in $(seq 1 "$N"); do
  build/bin/pkb eval 1 --solution reference -q --json "$J" --label checked "$@" >/dev/null 2>&1
  build/bin/pkb eval 1 --solution reference -q --json "$J" --label unchecked --unchecked-timing "$@" >/dev/null 2>&1
done
python3 - "$J" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
def walls(label):
    return [r["wall_s"] for r in recs if r.get("label") == label]
c, u = walls("checked"), walls("unchecked")
if c and u:
    mc, mu = statistics.median(c), statistics.median(u)
    print(f"eval wall: with checks {mc:.2f} s, timed-call checks off {mu:.2f} s; the checks cost {100 * (mc - mu) / mc:.1f}% of an eval")
PY
