#!/usr/bin/env bash
# GPU check of fp8 input generation: generated e4m3/e5m2 inputs, decoded by cuda_fp8.h on the GPU, agree bit
# for bit with PyTorch's decoding of the same bytes, and none is NaN or infinite. Needs a GPU and PyTorch;
# run from the source tree after a build: tools/gpu_fp8_check.sh
export NCCL_NVLS_ENABLE=0
rm -rf /tmp/fp8d
timeout 120 build/bin/pkb run 900 --problems-dir tests/gpu/problems --dtype fp32 --gpus 2 --oversubscribe --trials 2 --dump /tmp/fp8d --quiet
echo "pkb run 900 rc=$?"
timeout 200 build/bin/pkb eval 900 --problems-dir tests/gpu/problems --dtype fp32 --gpus 2 --oversubscribe --trials 2 --iters 20 --warmup 5 --solution reference --quiet
echo "pkb eval 900 rc=$?"
python3 - <<'PY'
import glob, sys, torch
sys.path.insert(0, "tools"); import pkb_safetensors as st
bad = 0
for f in sorted(glob.glob("/tmp/fp8d/**/*.safetensors", recursive=True)):
    t = st.read(f).tensors
    for src, dst, dt in (("input.a", "output.da", torch.float8_e4m3fn), ("input.b", "output.db", torch.float8_e5m2)):
        raw = torch.frombuffer(bytearray(t[src].data), dtype=torch.uint8)
        ref = raw.view(dt).to(torch.float32)
        got = torch.frombuffer(bytearray(t[dst].data), dtype=torch.float32)
        same = torch.equal(ref.view(torch.int32), got.view(torch.int32))
        nan = int(torch.isnan(ref).sum()); inf = int(torch.isinf(ref).sum())
        print(f"{f[10:]} {src}: n={ref.numel()} bitwise_equal={same} nan={nan} inf={inf} mean={ref.mean():.3f} std={ref.std():.2f} distinct={raw.unique().numel()}")
        bad += (not same) + nan + inf
print("FP8 CHECK", "ok" if bad == 0 else f"FAILED ({bad})")
sys.exit(1 if bad else 0)
PY
