#!/usr/bin/env bash
# GPU check of fp8 input generation: generated e4m3/e5m2 inputs, decoded by cuda_fp8.h on the GPU, agree bit
# for bit with PyTorch's decoding of the same bytes, and none is NaN or infinite. Needs a GPU and PyTorch;
# run from the source tree after a build: tools/gpu_fp8_check.sh. Exits non-zero on any failure.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
dump=$(mktemp -d /tmp/pkb_fp8_check.XXXXXX)
trap 'rm -rf "$dump"' EXIT
common=(--problems-dir tests/gpu/problems --dtype fp32 --gpus 2 --oversubscribe --trials 2 --quiet)
timeout 120 build/bin/pkb run 900 "${common[@]}" --dump "$dump" || { echo "FP8 CHECK FAILED: pkb run 900 exited $?"; exit 1; }
timeout 200 build/bin/pkb eval 900 "${common[@]}" --iters 20 --warmup 5 --solution reference ||
  { echo "FP8 CHECK FAILED: pkb eval 900 exited $?"; exit 1; }
python3 - "$dump" <<'PY'
import glob, os, sys, torch
sys.path.insert(0, "tools"); import pkb_safetensors as st
root = sys.argv[1]
files = sorted(glob.glob(os.path.join(root, "**", "*.safetensors"), recursive=True))
if not files:
    sys.exit("FP8 CHECK FAILED: pkb run --dump wrote no files")
bad = 0
for f in files:
    t = st.read(f).tensors
    for src, dst, dt in (("input.a", "output.da", torch.float8_e4m3fn), ("input.b", "output.db", torch.float8_e5m2)):
        raw = torch.frombuffer(bytearray(t[src].data), dtype=torch.uint8)
        ref = raw.view(dt).to(torch.float32)
        got = torch.frombuffer(bytearray(t[dst].data), dtype=torch.float32)
        same = torch.equal(ref.view(torch.int32), got.view(torch.int32))
        nan = int(torch.isnan(ref).sum()); inf = int(torch.isinf(ref).sum())
        print(f"{os.path.relpath(f, root)} {src}: n={ref.numel()} bitwise_equal={same} nan={nan} inf={inf} "
              f"mean={ref.mean():.3f} std={ref.std():.2f} distinct={raw.unique().numel()}")
        bad += (not same) + nan + inf
print("FP8 CHECK", "ok" if bad == 0 else f"FAILED ({bad})")
sys.exit(1 if bad else 0)
PY
