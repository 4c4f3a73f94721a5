#!/usr/bin/env bash
# The GPU run that derived-inputs.patch needs before it can land (one GPU is enough: ranks share it).
# Apply the patch, build pkb, pkb-worker and gpu_test, then run this from the repository root; every
# RESULT line must say rc=0 / status=ok, and memcheck must report 0 errors beyond NCCL's init probes.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
f=""
for w in ${DERIVED_W:-2 4 8}; do f="$f${f:+:}World/Gpu.DerivedInputsAreTheSameOnHostAndDevice/W$w"; done
build/bin/gpu_test --gtest_filter="$f"
echo "RESULT derived gtest (W = ${DERIVED_W:-2 4 8}) rc=$?"
# Problem 80's arange (its only formula input before the patch) against its oracle.
for w in 2 4; do
  build/bin/pkb run 80 --gpus $w --oversubscribe --oracle --size tiny --trials 2 --quiet
  echo "RESULT run 80 --oracle tiny W=$w rc=$?"
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for d in bf16 fp32; do
  PKB_SANDBOX=off $CS --tool memcheck --target-processes all build/bin/pkb run 902 --problems-dir tests/gpu/problems \
    --dtype $d --gpus 2 --oversubscribe --trials 2 --oracle --perf --iters 5 --warmup 2 --timeout 300 --quiet
  echo "RESULT memcheck run 902 $d rc=$?"
done
# The worker's generation path changed for every input: the adversarial cases that check inputs and
# outputs, and the honest control.
PKB_ADVERSARIAL_ONLY=input_mutation,input_passthrough,lookahead_precompute,distribution_specialisation,unwritten_timed,wrong_values,honest_control \
  build/bin/gpu_test --gtest_filter='Adversarial.*'
echo "RESULT adversarial subset rc=$?"
