#!/usr/bin/env bash
# One call on a GPU node: build, then the stages asked for (default: all). Logs and JSON records
# go to $OUT (default .gpu-check/); a short summary is printed last.
#   tools/gpu_check.sh [build] [cpu] [smoke] [gputest] [agent] [evals] [self] [calibrate] [experts] [sweeps]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/.gpu-check}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export PKB_CACHE_DIR=${PKB_CACHE_DIR:-$PWD/.pkb-cache}
STAGES="${*:-build cpu smoke gputest agent evals self calibrate experts sweeps}"
has() { [[ " $STAGES " == *" $1 "* ]]; }
PKB=build/bin/pkb
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

stamp "build"
if ! tools/bootstrap.sh >"$OUT/build.log" 2>&1; then tail -40 "$OUT/build.log"; exit 1; fi
nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv >"$OUT/gpus.txt" 2>&1
GPUS=$(nvidia-smi -L | wc -l)
shopt -s nullglob
stamp "prebuild every solution (parallel nvcc)"
$PKB build -j 32 problems/*/reference.cu solutions/examples/*.cu solutions/expert/*.cu solutions/adversarial/*.cu \
  >"$OUT/prebuild.log" 2>&1
if has cpu; then
  stamp "cpu tests"
  ctest --test-dir build -L cpu -j 16 >"$OUT/ctest_cpu.log" 2>&1
  echo "cpu tests: rc=$? ($(grep -E 'tests passed' "$OUT/ctest_cpu.log"))" >>"$SUMMARY"
fi
if has smoke; then
  stamp "smoke: one run and one eval on 2 GPUs"
  $PKB run 1 --gpus 2 --size tiny --oracle --timeout 20 >"$OUT/smoke.log" 2>&1 &&
    $PKB eval 1 --solution reference --gpus 2 --size tiny --trials 1 --iters 10 --warmup 5 --timeout 20 >>"$OUT/smoke.log" 2>&1
  if [ $? != 0 ]; then
    echo "smoke failed; skipping the rest"
    tail -60 "$OUT/smoke.log"
    exit 1
  fi
fi
if has calibrate; then
  stamp "calibrate"
  $PKB calibrate --out "$OUT/calibration.json" >"$OUT/calibrate.log" 2>&1
  echo "calibrate: rc=$?" >>"$SUMMARY"
fi
if has gputest; then
  stamp "gpu tests"
  build/bin/gpu_test --gtest_output=json:"$OUT/gpu_test.json" >"$OUT/gpu_test.log" 2>&1
  echo "gpu tests: rc=$? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/gpu_test.log" | tr '\n' ' '))" >>"$SUMMARY"
  grep -E '^\[  FAILED  \]|Failure$' -A3 "$OUT/gpu_test.log" | head -30 >>"$SUMMARY"
fi
if has agent; then
  stamp "agent loop against the scripted fake endpoint, W=2"
  build/bin/agent_gpu_test --gtest_output=json:"$OUT/agent_gpu_test.json" >"$OUT/agent_gpu_test.log" 2>&1
  echo "agent gpu test: rc=$? ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/agent_gpu_test.log" | tr '\n' ' '))" >>"$SUMMARY"
  grep -E '^\[  FAILED  \]|Failure$' -A3 "$OUT/agent_gpu_test.log" | head -30 >>"$SUMMARY"
fi
if has evals; then
  stamp "evals at the default size, W=$GPUS"
  for p in 1 2 3 4 5 6 7 8; do
    $PKB eval $p --solution reference -q --json "$OUT/evals.jsonl" >>"$OUT/evals.log" 2>&1
    for f in solutions/expert/${p}_*.cu; do $PKB eval $p --solution "$f" -q --json "$OUT/evals.jsonl" >>"$OUT/evals.log" 2>&1; done
  done
  /usr/bin/time -f "%e" -o "$OUT/eval1_wall.txt" $PKB eval 1 --solution solutions/examples/1_allreduce_oneshot.cu -q \
    --json "$OUT/evals.jsonl" >>"$OUT/evals.log" 2>&1
  echo "wall time of one eval (cached build): $(cat "$OUT/eval1_wall.txt" 2>/dev/null) s" >>"$SUMMARY"
fi
if has self; then
  stamp "self-speedup spread (10 consecutive evals of the baseline against itself)"
  tools/bench_self_speedup.sh 10 >"$OUT/self_speedup.log" 2>&1
  tail -3 "$OUT/self_speedup.log" >>"$SUMMARY"
fi
if has experts; then
  stamp "experts: every size from 8 KiB to 64 MiB, checked, W=2 and W=$GPUS"
  for w in $(printf "2\n%s\n" "$GPUS" | sort -un); do
    for f in solutions/expert/[0-9]*.cu; do
      p=$(basename "$f" | cut -d_ -f1)
      $PKB sweep $p --solution "$f" --gpus $w -b 8K -e 64M -f 8 --iters 10 --warmup 5 -q --json "$OUT/experts.jsonl" \
        >>"$OUT/experts.log" 2>&1
    done
  done
  python3 tools/records_table.py "$OUT/experts.jsonl" | awk '$5 != "ok"' | head -20 >>"$SUMMARY"
fi
if has sweeps; then
  stamp "sweeps for the results table: 8 KiB .. 1 GiB, W=2 and W=$GPUS, with graph replay"
  for w in $(printf "2\n%s\n" "$GPUS" | sort -un); do
    for f in solutions/expert/[0-9]*.cu; do
      p=$(basename "$f" | cut -d_ -f1)
      $PKB sweep $p --solution "$f" --gpus $w -b 8K -e 1G -f 4 --graph -q --json "$OUT/sweeps.jsonl" >>"$OUT/sweeps.log" 2>&1
    done
  done
fi
stamp "done"
echo
cat "$SUMMARY"
[ -f "$OUT/evals.jsonl" ] && python3 tools/records_table.py "$OUT/evals.jsonl"
[ -f "$OUT/calibrate.log" ] && tail -14 "$OUT/calibrate.log"
[ -f "$OUT/sweeps.log" ] && grep -A12 'pkb sweep 1_allreduce' "$OUT/sweeps.log" | head -30
true
