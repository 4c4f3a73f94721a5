#!/usr/bin/env bash
# Runs tools/conformance.sh for every problem with a torch_adapter.py (or the ones named), one after
# another, and prints a Markdown table: per problem whether pkb's baseline agrees with the original
# ParallelKernelBench PyTorch reference on the same inputs, and both median times (with --time).
# Logs, dumps and the table go under one directory, named at the start. Exit: 0 when every problem
# agrees, 1 otherwise, 2 bad usage.
set -uo pipefail

usage() {
  cat <<'USAGE'
usage: tools/conformance_all.sh [--pkb PATH] [--gpus W] [--size S] [--trials T] [--dtype D] [--time]
                                [--iters N] [--oversubscribe] [--logs DIR] [problems...]

  problems        ids, stems or names (default: every problems/*/torch_adapter.py, by id)
  --logs DIR      where logs and dumps go (default results-local/conformance-<time>)
  other options   as tools/conformance.sh (--pkb defaults to .pkb in the repository)
USAGE
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PASS=() PROBLEMS=() LOGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --pkb|--gpus|-g|--size|-s|--trials|--dtype|--iters)
      [ $# -ge 2 ] || { echo "conformance_all.sh: $1 needs a value" >&2; exit 2; }
      PASS+=("$1" "$2"); shift 2 ;;
    --time|--oversubscribe) PASS+=("$1"); shift ;;
    --logs) LOGS=${2:?--logs needs a directory}; shift 2 ;;
    -*) echo "conformance_all.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) PROBLEMS+=("$1"); shift ;;
  esac
done
if [ ${#PROBLEMS[@]} -eq 0 ]; then
  while IFS= read -r d; do PROBLEMS+=("$d"); done < <(
    for f in "$ROOT"/problems/*/torch_adapter.py; do [ -f "$f" ] && basename "$(dirname "$f")"; done | sort -n)
fi
[ ${#PROBLEMS[@]} -gt 0 ] || { echo "conformance_all.sh: no problem has a torch_adapter.py" >&2; exit 2; }

LOGS=${LOGS:-$ROOT/results-local/conformance-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$LOGS" || exit 2
LOGS=$(cd "$LOGS" && pwd)
SUMMARY=$LOGS/summary.jsonl
rm -f "$SUMMARY"
echo "[conformance_all] ${#PROBLEMS[@]} problem(s); logs in $LOGS"
failed=0
for p in "${PROBLEMS[@]}"; do
  "$ROOT/tools/conformance.sh" "$p" "${PASS[@]}" --work "$LOGS/$p" --summary "$SUMMARY" >"$LOGS/$p.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || failed=1
  if [ "$rc" = 2 ]; then  # bad usage: nothing ran, so no summary line was written
    echo "[conformance_all] $p: $(tail -n 1 "$LOGS/$p.log")"
    ${PYTHON:-python3} "$ROOT/tools/conformance_summary.py" line --problem "$p" --error "not run: see $LOGS/$p.log" \
      --jsonl "$SUMMARY" >/dev/null
  else
    echo "[conformance_all] $(tail -n 1 "$LOGS/$p.log")"
  fi
done
echo
${PYTHON:-python3} "$ROOT/tools/conformance_summary.py" table "$SUMMARY" | tee "$LOGS/table.md"
echo "[conformance_all] table: $LOGS/table.md"
exit $failed
