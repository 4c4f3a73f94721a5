#!/usr/bin/env bash
# One call on a GPU node: build, CPU tests, GPU tests, evaluations and the self-speedup benchmark.
# Logs and JSON records go to $OUT (default .gpu-check/); a short table is printed last.
#   tools/gpu_check.sh [--quick]        --quick: build + GPU tests only
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/.gpu-check}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
export PKB_CACHE_DIR=${PKB_CACHE_DIR:-$PWD/.pkb-cache}
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
PKB=build/bin/pkb
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

stamp "build"
if ! tools/bootstrap.sh >"$OUT/build.log" 2>&1; then tail -40 "$OUT/build.log"; exit 1; fi
nvidia-smi --query-gpu=index,name,driver_version,memory.used --format=csv >"$OUT/gpus.txt" 2>&1
GPUS=$(nvidia-smi -L | wc -l)
stamp "cpu tests"
ctest --test-dir build -L cpu -j 16 >"$OUT/ctest_cpu.log" 2>&1
cpu_rc=$?
stamp "prebuild every solution (parallel nvcc)"
shopt -s nullglob
$PKB build -j 32 problems/*/reference.cu solutions/examples/*.cu solutions/expert/*.cu solutions/adversarial/*.cu \
  >"$OUT/prebuild.log" 2>&1
stamp "smoke: one run and one eval on 2 GPUs"
$PKB run 1 --gpus 2 --size tiny --oracle --timeout 20 >"$OUT/smoke.log" 2>&1
smoke_run=$?
$PKB eval 1 --solution reference --gpus 2 --size tiny --trials 1 --iters 10 --warmup 5 --timeout 20 >>"$OUT/smoke.log" 2>&1
smoke_eval=$?
if [ $smoke_run != 0 ] || [ $smoke_eval != 0 ]; then
  echo "smoke failed (run rc=$smoke_run, eval rc=$smoke_eval); skipping the rest"
  cat "$OUT/smoke.log" | tail -60
  exit 1
fi
stamp "gpu tests"
build/bin/gpu_test --gtest_output=json:"$OUT/gpu_test.json" >"$OUT/gpu_test.log" 2>&1
gpu_rc=$?
if [ "$QUICK" = 0 ]; then
  stamp "evals at the default size, W=$GPUS"
  for p in 1 2 3 4 5 6 7 8; do
    $PKB eval $p --solution reference -q --json "$OUT/evals.jsonl" >>"$OUT/evals.log" 2>&1
  done
  /usr/bin/time -f "%e" -o "$OUT/eval1_wall.txt" $PKB eval 1 --solution solutions/examples/1_allreduce_oneshot.cu -q \
    --json "$OUT/evals.jsonl" >>"$OUT/evals.log" 2>&1
  stamp "self-speedup spread (10 consecutive evals of the baseline against itself)"
  tools/bench_self_speedup.sh 10 >"$OUT/self_speedup.log" 2>&1
fi
stamp "done"
echo
echo "cpu tests: rc=$cpu_rc ($(grep -E 'tests passed' "$OUT/ctest_cpu.log"))"
echo "gpu tests: rc=$gpu_rc ($(grep -E '^\[  (PASSED|FAILED)' "$OUT/gpu_test.log" | tr '\n' ' '))"
grep -E '^\[  FAILED  \]|Failure|Expected' "$OUT/gpu_test.log" | head -20
if [ -f "$OUT/evals.jsonl" ]; then
  echo "wall time of one eval (cached build): $(cat "$OUT/eval1_wall.txt" 2>/dev/null) s"
  python3 tools/records_table.py "$OUT/evals.jsonl"
fi
[ -f "$OUT/self_speedup.log" ] && tail -3 "$OUT/self_speedup.log"
