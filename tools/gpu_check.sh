#!/usr/bin/env bash
# One call on a GPU node: build, then the stages asked for (default: all). Key results stay in $OUT
# (default .gpu-check/): summary.txt, the JSON Lines records, calibration.json, report.html; every
# log is packed into logs.tgz. A short summary is printed last.
#   tools/gpu_check.sh [cpu] [smoke] [calibrate] [gputest] [agent] [batch] [self] [overhead] [sweeps] [mpi]
#                      [problems] [experts] [gemmfloor] [conformance] [onegpu]
#   onegpu (the one-GPU profile; not a default stage): every problem's oracle at W = 2, 4, 8 with
#   --oversubscribe (tools/oversubscribed_matrix.sh; ONEGPU_SIZES, default "tiny default"), an
#   oversubscribed eval; with `gputest agent` also the GPU and agent tests (whose worlds oversubscribe
#   by themselves; GPU_TEST_SHARDS below runs them in parts side by side)
#   conformance (not a default stage): tools/conformance_all.sh --time against the PKB checkout in
#   .pkb/ (docs/conformance.md); CONF_GPUS (default 2), CONF_SIZE, CONF_ARGS pass on to it;
#   CONF_TIME=0 leaves --time out (needed with CONF_ARGS=--oversubscribe)
#   GPU_TEST_FILTER=...  passes --gtest_filter to the GPU tests
#   GPU_TEST_SHARDS=N  the GPU tests' World/* tests (one per world and problem, or per world) run in N
#   gtest shards at once (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX; logs gpu_test_shard_<i>.log, one summary
#   line each), then the rest (the adversarial suite, which must run alone) in one process
#   (gpu_test_rest.log); GPU_TEST_FILTER narrows both parts. Unset: one process, as before
#   PROBLEMS="12 13"  SIZES="tiny default"  WORLDS="2"  what the problems/experts stages cover
#   (problems: oracle run and baseline-as-candidate eval per size; experts: eval of each
#   solutions/expert/<id>_*.cu per size)
#   SWEEP_END=1G SWEEP_FACTOR=4 SWEEP_WORLDS="2 4"  shape the results-table sweeps
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/.gpu-check}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export PKB_CACHE_DIR=${PKB_CACHE_DIR:-$PWD/.pkb-cache}
STAGES="${*:-cpu smoke calibrate gputest agent batch self overhead sweeps}"
has() { [[ " $STAGES " == *" $1 "* ]]; }
PKB=build/bin/pkb
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
SUMMARY="$OUT/summary.txt"
FAILED=""  # stages that failed: the exit status says so
failed() { FAILED="$FAILED $1"; }
: >"$SUMMARY"
LOGS="$OUT/logs"
mkdir -p "$LOGS"

pack_logs() { tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null && rm -rf "$LOGS"; }
trap pack_logs EXIT

stamp "build"
if ! tools/bootstrap.sh >"$LOGS/build.log" 2>&1; then tail -40 "$LOGS/build.log"; exit 1; fi
{ nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv; mount | grep -i cgroup; } >"$LOGS/machine.txt" 2>&1
GPUS=$(nvidia-smi -L | wc -l)
echo "machine: $GPUS GPU(s), $(head -2 "$LOGS/machine.txt" | tail -1)" >>"$SUMMARY"
shopt -s nullglob
stamp "prebuild every solution (parallel nvcc; not the ones that must fail to compile)"
$PKB build -j 32 problems/*/reference.cu solutions/examples/*.cu solutions/expert/*.cu \
  $(grep -L 'pkb-expect: compile_error' solutions/adversarial/*.cu) >"$LOGS/prebuild.log" 2>&1
if has cpu; then
  stamp "cpu tests"
  ctest --test-dir build -L cpu -j 16 >"$LOGS/ctest_cpu.log" 2>&1
  echo "cpu tests: rc=$? ($(grep -E 'tests passed' "$LOGS/ctest_cpu.log"))" >>"$SUMMARY"
fi
SHARE=()
[ "$GPUS" -lt 2 ] && SHARE=(--oversubscribe)
if has smoke; then
  stamp "smoke: one run and one eval on 2 ranks ${SHARE[*]}"
  $PKB run 1 --gpus 2 "${SHARE[@]}" --size tiny --oracle --timeout 20 >"$LOGS/smoke.log" 2>&1 &&
    $PKB eval 1 --solution reference --gpus 2 "${SHARE[@]}" --size tiny --trials 1 --iters 10 --warmup 5 --timeout 20 >>"$LOGS/smoke.log" 2>&1
  if [ $? != 0 ]; then
    echo "smoke failed; skipping the rest"
    tail -60 "$LOGS/smoke.log"
    exit 1
  fi
fi
if has calibrate; then
  stamp "calibrate"
  $PKB calibrate --out "$OUT/calibration.json" >"$LOGS/calibrate.log" 2>&1
  echo "calibrate: rc=$?" >>"$SUMMARY"
fi
# "N ran in S s: P passed, K skipped, F failed" from a gtest log (gtest's closing lines).
gtest_counts() {
  local ran ms passed skipped failed
  ran=$(sed -nE 's/^\[==========\] ([0-9]+) tests? from .* ran\. \(([0-9]+) ms total\)/\1 \2/p' "$1" | tail -1)
  ms=${ran#* }; ran=${ran%% *}
  passed=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?\./\1/p' "$1" | tail -1)
  skipped=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?, listed below:/\1/p' "$1" | tail -1)
  failed=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) tests?, listed below:/\1/p' "$1" | tail -1)
  [ -z "$ran" ] && { echo "did not finish: $(tail -1 "$1")"; return; }
  echo "$ran ran in $(( ${ms:-0} / 1000 )) s: ${passed:-0} passed, ${skipped:-0} skipped, ${failed:-0} failed"
}
# How many tests a --gtest_filter selects.
gtest_selected() { build/bin/gpu_test --gtest_list_tests --gtest_filter="$1" | grep -c '^  '; }
# GPU_TEST_SHARDS=N: the World/* tests in N shards side by side, then every other test in one process.
gpu_tests_sharded() {
  local n=$GPU_TEST_SHARDS filter=${GPU_TEST_FILTER:-*} pos neg others world_filter rest_filter selected i rc
  local -a pids=()
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "gpu tests: GPU_TEST_SHARDS=$n is not a positive number" >>"$SUMMARY"
    failed gputest
    return
  fi
  # Each part adds its own negative patterns to the filter's (POSITIVE[-NEGATIVE], gtest's syntax).
  pos=${filter%%-*}
  neg=""
  [[ $filter == *-* ]] && neg=${filter#*-}
  # The suites outside World/ ("Adversarial."), as patterns the sharded part leaves out.
  others=$(build/bin/gpu_test --gtest_list_tests | grep -E '^[^ ]' | grep -v '^World/' | sed 's/$/*/' | paste -sd:)
  others=$neg${neg:+${others:+:}}$others
  world_filter="${pos:-*}${others:+-$others}"
  rest_filter="${pos:-*}-${neg:+$neg:}World/*"
  selected=$(gtest_selected "$world_filter")
  stamp "gpu tests: $selected World tests in $n shards at once (filter $world_filter)"
  [ "$selected" = 0 ] && n=0 && echo "gpu tests, World: none selected (filter $world_filter)" >>"$SUMMARY"
  trap 'kill "${pids[@]}" 2>/dev/null; exit 130' INT TERM
  for ((i = 0; i < n; i++)); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i build/bin/gpu_test --gtest_filter="$world_filter" \
      >"$LOGS/gpu_test_shard_$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < n; i++)); do
    wait "${pids[$i]}"
    rc=$?; [ $rc = 0 ] || failed "gputest-shard-$i"
    echo "gpu tests shard $i/$n: rc=$rc ($(gtest_counts "$LOGS/gpu_test_shard_$i.log"))" >>"$SUMMARY"
  done
  trap - INT TERM
  for ((i = 0; i < n; i++)); do
    grep -E '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$LOGS/gpu_test_shard_$i.log" >>"$SUMMARY"
    grep -E 'Failure$' -A4 "$LOGS/gpu_test_shard_$i.log" | head -20 >>"$SUMMARY"
  done
  if [ "$(gtest_selected "$rest_filter")" = 0 ]; then
    echo "gpu tests, the rest: none selected (filter $rest_filter)" >>"$SUMMARY"
    return
  fi
  stamp "gpu tests: the rest, alone (filter $rest_filter)"
  build/bin/gpu_test --gtest_filter="$rest_filter" >"$LOGS/gpu_test_rest.log" 2>&1
  rc=$?; [ $rc = 0 ] || failed gputest-rest
  echo "gpu tests, the rest: rc=$rc ($(gtest_counts "$LOGS/gpu_test_rest.log"))" >>"$SUMMARY"
  grep -E '^\[       OK \]|^\[  FAILED  \] .* \([0-9]+ ms\)$' "$LOGS/gpu_test_rest.log" >>"$SUMMARY"
  grep -E 'Failure$' -A4 "$LOGS/gpu_test_rest.log" | head -40 >>"$SUMMARY"
  grep -E '^  [a-z_0-9]+\.cu -> |containment' "$LOGS/gpu_test_rest.log" >>"$SUMMARY"
}
if has gputest && [ -n "${GPU_TEST_SHARDS:-}" ]; then
  gpu_tests_sharded
elif has gputest; then
  stamp "gpu tests ${GPU_TEST_FILTER:-}"
  build/bin/gpu_test ${GPU_TEST_FILTER:+"--gtest_filter=$GPU_TEST_FILTER"} >"$LOGS/gpu_test.log" 2>&1  # quoted: nullglob
  rc=$?; [ $rc = 0 ] || failed gputest
  echo "gpu tests: rc=$rc ($(grep -E '^\[  (PASSED|FAILED)' "$LOGS/gpu_test.log" | tr '\n' ' '))" >>"$SUMMARY"
  grep -E '^\[       OK \]|^\[  FAILED  \]' "$LOGS/gpu_test.log" >>"$SUMMARY"
  grep -E 'Failure$' -A4 "$LOGS/gpu_test.log" | head -40 >>"$SUMMARY"
  grep -E '^  [a-z_0-9]+\.cu -> |containment' "$LOGS/gpu_test.log" >>"$SUMMARY"
fi
if has agent; then
  stamp "agent loop against the fake endpoint"
  build/bin/agent_gpu_test >"$LOGS/agent.log" 2>&1
  rc=$?; [ $rc = 0 ] || failed agent
  echo "agent test: rc=$rc ($(grep -E '^\[  (PASSED|FAILED)' "$LOGS/agent.log" | tr '\n' ' '))" >>"$SUMMARY"
  grep -E 'Failure$' -A4 "$LOGS/agent.log" | head -20 >>"$SUMMARY"
fi
if has batch; then
  stamp "batch: every expert at the default size (W=$GPUS), resumed, reported, compared"
  $PKB eval --solutions solutions/expert --label expert -q --json "$OUT/evals.jsonl" >"$LOGS/batch.log" 2>&1
  echo "batch: rc=$? ($(wc -l <"$OUT/evals.jsonl") records)" >>"$SUMMARY"
  $PKB eval --solutions solutions/expert --label expert -q --json "$OUT/evals.jsonl" >>"$LOGS/batch.log" 2>&1
  echo "batch again (must skip all): rc=$? ($(wc -l <"$OUT/evals.jsonl") records)" >>"$SUMMARY"
  for p in 1 2 3 4 5 6 7 8; do
    $PKB eval $p --solution reference --label reference -q --json "$OUT/evals.jsonl" >>"$LOGS/evals.log" 2>&1
  done
  /usr/bin/time -f "%e" -o "$LOGS/eval1_wall.txt" $PKB eval 1 --solution solutions/examples/1_allreduce_oneshot.cu \
    --label examples -q --json "$OUT/evals.jsonl" >>"$LOGS/evals.log" 2>&1
  echo "wall time of one eval (cached build): $(cat "$LOGS/eval1_wall.txt" 2>/dev/null) s" >>"$SUMMARY"
  $PKB eval 1 --solution solutions/expert/1_allreduce.cu --size small --trials 1 --no-perf --dump "$LOGS/dump" -q \
    >>"$LOGS/evals.log" 2>&1
  $PKB compare "$LOGS/dump/baseline" "$LOGS/dump/candidate" >"$LOGS/compare.log" 2>&1
  echo "compare dumps: rc=$? $(tail -1 "$LOGS/compare.log")" >>"$SUMMARY"
  $PKB report "$OUT/evals.jsonl" --html "$OUT/report.html" >"$LOGS/report.txt" 2>&1
  echo "report: rc=$?" >>"$SUMMARY"
fi
if has self; then
  stamp "self-speedup spread (10 consecutive evals of the baseline against itself)"
  OUT="$LOGS" tools/bench_self_speedup.sh 10 >"$LOGS/self_speedup.log" 2>&1
  tail -3 "$LOGS/self_speedup.log" >>"$SUMMARY"
fi
if has overhead; then
  stamp "what the checks cost"
  OUT="$LOGS" tools/bench_check_overhead.sh 3 >"$LOGS/overhead.log" 2>&1
  tail -1 "$LOGS/overhead.log" >>"$SUMMARY"
fi
if has sweeps; then
  worlds=${SWEEP_WORLDS:-$(printf "2\n%s\n" "$GPUS" | sort -un | tr '\n' ' ')}
  stamp "sweeps for the results table: 8K .. ${SWEEP_END:-1G} x${SWEEP_FACTOR:-4}, W = $worlds, with graph replay"
  for w in $worlds; do
    for f in solutions/expert/[0-9]*.cu; do
      p=$(basename "$f" | cut -d_ -f1)
      $PKB sweep $p --solution "$f" --gpus $w -b 8K -e "${SWEEP_END:-1G}" -f "${SWEEP_FACTOR:-4}" --graph -q \
        --json "$OUT/sweeps.jsonl" >>"$LOGS/sweeps.log" 2>&1
      echo "sweep $p W=$w: rc=$?" >>"$SUMMARY"
    done
  done
fi
if has problems || has experts; then
  probs=${PROBLEMS:-$(ls problems | grep -E '^[0-9]+_' | cut -d_ -f1 | sort -n | tr '\n' ' ')}
  worlds=${WORLDS:-2}
  size_classes() { $PKB show "$1" 2>/dev/null | sed -n 's/^  sizes: //p' | grep -oE '[a-z0-9_]+\(' | tr -d '(' | tr '\n' ' '; }
  line() { printf '%-8s %-4s %-8s %-10s %s\n' "$@" >>"$SUMMARY"; }
  result_of() { python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r=rows[-1] if rows else {}
ratio=r.get("speedup")
t=r.get("timing") or {}
us=lambda side: ("%.1fus" % t[side]["median_us"]) if (t.get(side) or {}).get("median_us") else ""
print(r.get("status","?"), "" if ratio is None else "%.2fx" % ratio, us("baseline"), us("candidate"),
      (r.get("message") or "")[:150])' "$1" 2>/dev/null || echo "no-record"; }
fi
if has problems; then
  stamp "problems: oracle run + baseline as candidate (W = $worlds; problems $probs)"
  for w in $worlds; do
    for p in $probs; do
      sizes=${SIZES:-$(size_classes $p)}
      for sz in ${sizes:-default}; do
        j="$LOGS/problem_${p}_w${w}_${sz}"
        timeout 300 $PKB run $p --gpus $w --size $sz --oracle --trials 2 --json "$j.oracle.jsonl" >"$j.oracle.log" 2>&1
        line "$p" "W=$w" "$sz" "oracle" "$(result_of "$j.oracle.jsonl")"
        timeout 300 $PKB eval $p --solution reference --gpus $w --size $sz --trials 2 --json "$j.self.jsonl" \
          --label reference >"$j.self.log" 2>&1
        line "$p" "W=$w" "$sz" "self" "$(result_of "$j.self.jsonl")"
        cat "$j.self.jsonl" >>"$OUT/evals.jsonl" 2>/dev/null
      done
    done
  done
fi
if has experts; then
  stamp "experts: eval per size (W = $worlds)"
  for w in $worlds; do
    for p in $probs; do
      for f in solutions/expert/${p}_*.cu; do
        sizes=${SIZES:-$(size_classes $p)}
        for sz in ${sizes:-default}; do
          j="$LOGS/expert_${p}_w${w}_${sz}"
          timeout 300 $PKB eval $p --solution "$f" --gpus $w --size $sz --json "$j.jsonl" --label expert >"$j.log" 2>&1
          line "$p" "W=$w" "$sz" "expert" "$(result_of "$j.jsonl")"
          cat "$j.jsonl" >>"$OUT/evals.jsonl" 2>/dev/null
        done
      done
    done
  done
fi
if has mpi; then
  stamp "mpirun launcher against the local one"
  OUT="$LOGS" tools/bench_mpi_vs_local.sh >"$LOGS/mpi_vs_local.log" 2>&1
  cat "$LOGS/mpi_vs_local.log" >>"$SUMMARY"
fi
if has gemmfloor; then
  stamp "overlapped GEMM experts against max(GEMM only, communication floor)"
  w1=${WORLDS:-2}
  OUT="$LOGS" tools/bench_gemm_floor.sh --gpus "${w1%% *}" --sizes "${SIZES:-default large}" >"$OUT/gemm_floor.md" \
    2>"$LOGS/gemm_floor.log"
  echo "gemm floor: rc=$?" >>"$SUMMARY"
  cat "$OUT/gemm_floor.md" >>"$SUMMARY"
fi
if has conformance; then
  stamp "conformance with PKB's PyTorch references (.pkb/), W=${CONF_GPUS:-2}"
  conf="$PWD/results-local/conformance-gpu-check"  # dumps stay here: too large for logs.tgz
  rm -rf "$conf"
  # shellcheck disable=SC2086
  conf_time=(--time)
  [ "${CONF_TIME:-1}" = 0 ] && conf_time=()
  tools/conformance_all.sh --gpus "${CONF_GPUS:-2}" ${CONF_SIZE:+--size "$CONF_SIZE"} "${conf_time[@]}" --logs "$conf" \
    ${CONF_ARGS:-} >"$LOGS/conformance.log" 2>&1
  rc=$?; [ $rc = 0 ] || failed conformance
  echo "conformance: rc=$rc ($(tail -2 "$conf/table.md" 2>/dev/null | tr -d '\n'))" >>"$SUMMARY"
  mkdir -p "$LOGS/conformance"
  cp "$conf"/*.log "$conf"/table.md "$LOGS/conformance/" 2>/dev/null
  cp "$conf/table.md" "$OUT/conformance.md" 2>/dev/null
  for d in "$conf"/*/; do
    [ -f "$d/pytorch/timing.json" ] && cp "$d/pytorch/timing.json" "$LOGS/conformance/$(basename "$d")-timing.json"
  done
fi
if has onegpu; then
  stamp "one-GPU profile: oracles at W = 2, 4, 8 oversubscribed, an oversubscribed eval"
  WORLDS="2 4 8" SIZES="${ONEGPU_SIZES:-tiny default}" JOBS="${ONEGPU_JOBS:-4}" OUT="$LOGS/onegpu" \
    tools/oversubscribed_matrix.sh >"$LOGS/onegpu.log" 2>&1 || failed onegpu
  grep -vE ' ok +$| skipped ' "$LOGS/onegpu.log" | head -40 >>"$SUMMARY"
  tail -1 "$LOGS/onegpu.log" >>"$SUMMARY"
  $PKB eval 1 --solution reference --gpus 4 --oversubscribe -q --json "$OUT/oversubscribed.jsonl" >"$LOGS/onegpu_eval.log" 2>&1
  rc=$?; [ $rc = 0 ] || failed onegpu-eval
  echo "eval 1 reference W=4 oversubscribed: rc=$rc $(grep -E 'status|speedup|placement' "$LOGS/onegpu_eval.log" | tr -s ' ' | tr '\n' ';')" >>"$SUMMARY"
fi
stamp "done"
echo
[ -n "$FAILED" ] && echo "FAILED stages:$FAILED" >>"$SUMMARY"
cat "$SUMMARY"
[ -f "$OUT/evals.jsonl" ] && python3 tools/records_table.py "$OUT/evals.jsonl"
[ -f "$LOGS/calibrate.log" ] && tail -13 "$LOGS/calibrate.log"
[ -f "$OUT/conformance.md" ] && cat "$OUT/conformance.md"
[ -z "$FAILED" ]
