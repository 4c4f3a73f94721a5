#!/usr/bin/env bash
# Checks pkb's baseline for one problem against the original ParallelKernelBench PyTorch reference
# on the same inputs, and compares their speed (docs/conformance.md):
#   1. pkb run <problem> --dump A --trials T --json R [--perf]   the baseline, its inputs and outputs
#   2. torchrun tools/conformance.py --dump A --out B [--time]    PKB's solution() on those inputs
#   3. pkb compare A B (each output's rule from the spec, in A)   per rank, trial and tensor
# then prints one summary line: problem, W, size, agree yes/no, both median times and their ratio.
# Exit: 0 agree, 1 disagree or a step failed, 2 bad usage.
set -uo pipefail

usage() {
  cat <<'EOF'
usage: tools/conformance.sh <problem> [--pkb PATH] [--gpus W] [--size S] [--trials T] [--dtype D]
                            [--time] [--iters N] [--oversubscribe] [--work DIR] [--summary FILE]

  <problem>       id, stem or name (1, 1_allreduce, allreduce); needs problems/<stem>/torch_adapter.py
  --pkb PATH      a ParallelKernelBench checkout (default: .pkb in the repository, if present):
                  git clone https://github.com/togethercomputer/ParallelKernelBench .pkb
  --gpus W        world size (default: pkb's, i.e. every visible GPU)
  --size S        size class (default: the spec's)
  --trials T      dumped trials, each with fresh inputs (default 3)
  --dtype D       bf16 (default), fp16, fp32
  --time          time both sides: pkb run --perf, and conformance.py --time
  --iters N       timed calls per side (default 100)
  --oversubscribe W ranks on fewer GPUs, on both sides (pkb run --oversubscribe; every torch rank its
                  own NCCL host id, on GPU rank % visible): agreement is meaningful, times are not
  --work DIR      where dumps, records and logs go (default results-local/conformance/<time>-<problem>)
  --summary FILE  append the summary as one JSON line (conformance_all.sh collects them)

Environment: PKB_BIN (default build/bin/pkb), TORCHRUN (default: torchrun on PATH, then
/opt/torch/.venv/bin/torchrun, then python3 -m torch.distributed.run), PYTHON (default python3),
CONFORMANCE_ARGS (more options for tools/conformance.py, e.g. "--io builtin --predelay-us 50").
EOF
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROBLEM="" PKB_DIR="" GPUS="" SIZE="" TRIALS=3 DTYPE="" TIME=0 ITERS=100 WORK="" SUMMARY="" OVERSUB=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --pkb) PKB_DIR=${2:?--pkb needs a path}; shift 2 ;;
    --gpus|-g) GPUS=${2:?--gpus needs a number}; shift 2 ;;
    --size|-s) SIZE=${2:?--size needs a name}; shift 2 ;;
    --trials) TRIALS=${2:?--trials needs a number}; shift 2 ;;
    --dtype) DTYPE=${2:?--dtype needs a name}; shift 2 ;;
    --time) TIME=1; shift ;;
    --oversubscribe) OVERSUB=1; shift ;;
    --iters) ITERS=${2:?--iters needs a number}; shift 2 ;;
    --work) WORK=${2:?--work needs a directory}; shift 2 ;;
    --summary) SUMMARY=${2:?--summary needs a file}; shift 2 ;;
    -*) echo "conformance.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) if [ -n "$PROBLEM" ]; then echo "conformance.sh: one problem at a time (conformance_all.sh runs many)" >&2; exit 2; fi
       PROBLEM=$1; shift ;;
  esac
done
[ -n "$PROBLEM" ] || { usage >&2; exit 2; }
if [ "$TIME" = 1 ] && [ "$OVERSUB" = 1 ]; then
  echo "conformance.sh: --time with --oversubscribe would compare times of ranks sharing GPUs, which are not performance" >&2
  exit 2
fi
[ -n "$PKB_DIR" ] || PKB_DIR=$ROOT/.pkb
[ -d "$PKB_DIR/reference" ] || {
  echo "conformance.sh: $PKB_DIR is not a ParallelKernelBench checkout (no reference/); get one with" >&2
  echo "  git clone https://github.com/togethercomputer/ParallelKernelBench $ROOT/.pkb" >&2
  exit 2
}
for n in "$TRIALS" "$ITERS" ${GPUS:+"$GPUS"}; do
  case "$n" in ''|*[!0-9]*) echo "conformance.sh: '$n' is not a whole number" >&2; exit 2 ;; esac
done

PKB_BIN=${PKB_BIN:-$ROOT/build/bin/pkb}
PYTHON=${PYTHON:-python3}
[ -x "$PKB_BIN" ] || { echo "conformance.sh: $PKB_BIN is not built (tools/bootstrap.sh builds it)" >&2; exit 2; }
if [ -n "${TORCHRUN:-}" ]; then read -r -a TR <<<"$TORCHRUN"
elif command -v torchrun >/dev/null 2>&1; then TR=(torchrun)
elif [ -x /opt/torch/.venv/bin/torchrun ]; then TR=(/opt/torch/.venv/bin/torchrun)
else TR=("$PYTHON" -m torch.distributed.run)
fi

WORK=${WORK:-$ROOT/results-local/conformance/$(date +%Y%m%d-%H%M%S)-$PROBLEM}
mkdir -p "$WORK" || exit 2
WORK=$(cd "$WORK" && pwd)
A=$WORK/pkb B=$WORK/pytorch REC=$WORK/run.jsonl CMP=$WORK/compare.txt
rm -rf "$A" "$B" "$REC" "$CMP"
S=("$PYTHON" "$ROOT/tools/conformance_summary.py")

summary() {  # summary [--error TEXT] [...]: the final line; exit status as given by the caller
  "${S[@]}" line --problem "$PROBLEM" ${SUMMARY:+--jsonl "$SUMMARY"} "$@"
}

# 1. The baseline on fresh inputs, dumped (and timed with --time).
run_args=(run "$PROBLEM" --dump "$A" --trials "$TRIALS" --json "$REC" --iters "$ITERS")
[ -n "$GPUS" ] && run_args+=(--gpus "$GPUS")
[ -n "$SIZE" ] && run_args+=(--size "$SIZE")
[ -n "$DTYPE" ] && run_args+=(--dtype "$DTYPE")
[ "$TIME" = 1 ] && run_args+=(--perf)
[ "$OVERSUB" = 1 ] && run_args+=(--oversubscribe)
echo "[conformance] $PKB_BIN ${run_args[*]}"
"$PKB_BIN" "${run_args[@]}" 2>&1 | tee "$WORK/pkb-run.log"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ] || [ ! -s "$REC" ]; then
  summary --record "$REC" --error "pkb run failed (exit $rc; $WORK/pkb-run.log)"
  exit 1
fi
IFS=$'\t' read -r _status stem world _size _dtype atol rtol _base_us < <("${S[@]}" info "$REC")
if [ ! -f "$ROOT/problems/$stem/torch_adapter.py" ]; then
  summary --record "$REC" --error "problems/$stem has no torch_adapter.py"
  exit 1
fi

# 2. PKB's PyTorch reference on the same inputs, one process per rank.
conf_args=(--pkb "$PKB_DIR" --problem-dir "$ROOT/problems/$stem" --dump "$A" --out "$B" --iters "$ITERS")
[ "$TIME" = 1 ] && conf_args+=(--time)
[ "$OVERSUB" = 1 ] && conf_args+=(--oversubscribe)
if [ -n "${CONFORMANCE_ARGS:-}" ]; then read -r -a extra <<<"$CONFORMANCE_ARGS"; conf_args+=("${extra[@]}"); fi
echo "[conformance] ${TR[*]} --standalone --nproc_per_node $world tools/conformance.py ${conf_args[*]}"
"${TR[@]}" --standalone --nproc_per_node "$world" "$ROOT/tools/conformance.py" "${conf_args[@]}" 2>&1 | tee "$WORK/torchrun.log"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
  summary --record "$REC" --error "conformance.py failed (exit $rc; $WORK/torchrun.log)"
  exit 1
fi

# 3. Tensor by tensor, each output under its own rule from the spec (exact, or its atol and rtol),
#    which pkb's dump states; inputs must be bitwise equal.
echo "[conformance] $PKB_BIN compare $A $B"
"$PKB_BIN" compare "$A" "$B" >"$CMP" 2>&1
crc=$?
cat "$CMP"
timing=()
[ -f "$B/timing.json" ] && timing=(--timing "$B/timing.json")
echo
summary --record "$REC" --compare "$CMP" --compare-rc "$crc" "${timing[@]}" | tee "$WORK/summary.txt"
grep -q "agree=yes" "$WORK/summary.txt"
