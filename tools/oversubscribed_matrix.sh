#!/usr/bin/env bash
# Every problem's baseline against its CPU oracle with W ranks on the visible GPUs (pkb run
# --oversubscribe): verdicts only. Runs JOBS evaluations at once (ranks sharing a GPU leave it mostly
# idle) and prints one line per (problem, W, size) and a closing "N passed, N failed" line.
#   tools/oversubscribed_matrix.sh [problems...]
#   WORLDS="2 4 8"  SIZES="tiny default" (a class a problem lacks, or its constraints refuse at W, is
#   skipped and said so)  JOBS=4  MODE=oracle|self (self: pkb eval --solution reference)
#   OUT=dir (logs and records; default results-local/oversubscribed-<time>)
# Exit: 0 when every run passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
PKB=${PKB_BIN:-build/bin/pkb}
WORLDS=${WORLDS:-2 4 8}
SIZES=${SIZES:-tiny default}
JOBS=${JOBS:-4}
MODE=${MODE:-oracle}
OUT=${OUT:-results-local/oversubscribed-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
probs=("$@")
[ ${#probs[@]} -gt 0 ] || mapfile -t probs < <(ls problems | grep -E '^[0-9]+_' | sort -n)

one() {  # one PROBLEM W SIZE: a line "problem W size status message"
  local p=$1 w=$2 s=$3 j="$OUT/${MODE}_${1}_w${2}_${3}"
  if ! "$PKB" show "$p" --gpus "$w" --size "$s" >/dev/null 2>"$j.show"; then
    printf '%-44s W=%-2s %-8s %-8s %s\n' "$p" "$w" "$s" "skipped" "$(tail -1 "$j.show" | cut -c1-100)"
    return 0
  fi
  local args=(run "$p" --oracle)
  [ "$MODE" = self ] && args=(eval "$p" --solution reference --iters 10 --warmup 5)
  timeout 600 "$PKB" "${args[@]}" --gpus "$w" --oversubscribe --size "$s" --trials 2 --quiet --json "$j.jsonl" \
    >"$j.log" 2>&1
  local st msg
  st=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]; print(r["status"]); print((r.get("message") or "")[:120])' "$j.jsonl" 2>/dev/null)
  if [ "$(echo "$st" | head -1)" != ok ]; then  # the failing rank's last output, for the log
    python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]; t=(r.get("failure") or {}).get("log_tail") or ""; print("\n".join("    | " + l for l in t.strip().splitlines()[-8:]))' "$j.jsonl" >"$j.tail" 2>/dev/null
  fi
  [ -n "$st" ] || st="no-record"
  printf '%-44s W=%-2s %-8s %-8s %s\n' "$p" "$w" "$s" "$(echo "$st" | head -1)" "$(echo "$st" | sed -n 2p)"
  [ -s "$j.tail" ] && cat "$j.tail"
  return 0
}
export -f one
export PKB OUT MODE
for p in "${probs[@]}"; do for w in $WORLDS; do for s in $SIZES; do echo "$p $w $s"; done; done; done |
  xargs -P "$JOBS" -L 1 bash -c 'one $0 $1 $2' | tee "$OUT/matrix.txt"
pass=$(awk '$2 ~ /^W=/ && $4 == "ok"' "$OUT/matrix.txt" | wc -l)
fail=$(awk '$2 ~ /^W=/ && $4 != "ok" && $4 != "skipped"' "$OUT/matrix.txt" | wc -l)
skip=$(awk '$2 ~ /^W=/ && $4 == "skipped"' "$OUT/matrix.txt" | wc -l)
echo "oversubscribed $MODE: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
