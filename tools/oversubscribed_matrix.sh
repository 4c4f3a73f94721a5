#!/usr/bin/env bash
# Every problem's baseline against its CPU oracle with W ranks on the visible GPUs (pkb run
# --oversubscribe): verdicts only. Runs JOBS evaluations at once (ranks sharing a GPU leave it mostly
# idle) and prints one line per (problem, W, size) and a closing "N passed, N failed" line.
#   tools/oversubscribed_matrix.sh [problems...]
#   WORLDS="2 4 8"  SIZES="tiny default" (a class a problem lacks, or its constraints refuse at W, is
#   skipped and said so)  DTYPES="default" (the spec's default), a list ("fp16 fp32"; a dtype a
#   problem lacks is skipped) or "all" (every dtype the spec lists)  JOBS=4
#   MODE=oracle|self (self: pkb eval --solution reference)
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

one() {  # one PROBLEM W SIZE DTYPE: a line "problem W size [dtype] status message"
  local p=$1 w=$2 s=$3 d=$4 j="$OUT/${MODE}_${1}_w${2}_${3}_${4}" dt=() label=$3
  if [ "$d" != default ]; then dt=(--dtype "$d"); label="$s $d"; fi
  if ! "$PKB" show "$p" --gpus "$w" --size "$s" "${dt[@]}" >/dev/null 2>"$j.show"; then
    printf '%-44s W=%-2s %-13s %-8s %s\n' "$p" "$w" "$label" "skipped" "$(tail -1 "$j.show" | cut -c1-100)"
    return 0
  fi
  local args=(run "$p" --oracle)
  [ "$MODE" = self ] && args=(eval "$p" --solution reference --iters 10 --warmup 5)
  timeout 600 "$PKB" "${args[@]}" --gpus "$w" --oversubscribe --size "$s" "${dt[@]}" --trials 2 --quiet \
    --json "$j.jsonl" >"$j.log" 2>&1
  local st msg
  st=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]; print(r["status"]); print((r.get("message") or "")[:120])' "$j.jsonl" 2>/dev/null)
  if [ "$(echo "$st" | head -1)" != ok ]; then  # the failing rank's last output, for the log
    python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]; t=(r.get("failure") or {}).get("log_tail") or ""; print("\n".join("    | " + l for l in t.strip().splitlines()[-8:]))' "$j.jsonl" >"$j.tail" 2>/dev/null
  fi
  [ -n "$st" ] || st="no-record"
  printf '%-44s W=%-2s %-13s %-8s %s\n' "$p" "$w" "$label" "$(echo "$st" | head -1)" "$(echo "$st" | sed -n 2p)"
  [ -s "$j.tail" ] && cat "$j.tail"
  return 0
}
export -f one
export PKB OUT MODE
dtypes_of() {  # the dtypes to run for problem $1
  case "$DTYPES" in
    default) echo default ;;
    all) "$PKB" show "$1" 2>/dev/null | sed -n 's/.*dtypes: \([a-z0-9 ]*\).*/\1/p' | head -1 ;;
    *) echo "$DTYPES" ;;
  esac
}
DTYPES=${DTYPES:-default}
for p in "${probs[@]}"; do for d in $(dtypes_of "$p"); do for w in $WORLDS; do for s in $SIZES; do
  echo "$p $w $s $d"; done; done; done; done |
  xargs -P "$JOBS" -L 1 bash -c 'one $0 $1 $2 $3' | tee "$OUT/matrix.txt"
# the status is the word after the size, and after the dtype when one was named
read -r pass fail skip < <(awk '$2 ~ /^W=/ {
    st = ($4 ~ /^(bf16|fp16|fp32|fp64|fp8|e4m3|e5m2|i8|u8|i32|i64)$/) ? $5 : $4
    if (st == "ok") p++; else if (st == "skipped") k++; else f++ }
  END { print p + 0, f + 0, k + 0 }' "$OUT/matrix.txt")
echo "oversubscribed $MODE: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
