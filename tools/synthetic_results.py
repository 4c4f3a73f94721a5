#!/usr/bin/env python3
"""Write SYNTHETIC pkb eval records (JSON Lines) for the report example in docs/report-example/.

Nothing here was measured: the statuses, times and roofline floors are drawn from a fixed seed so
that the example page shows every part of a report (several samples per problem, failures of each
kind, speedups above and below 1, roofline points). Every record says so in its label
("synthetic-..."), its warnings and its system.gpu field. Real records live in docs/results/.

Usage: tools/synthetic_results.py > docs/report-example/synthetic.jsonl
"""
import json
import random

PROBLEMS = ["1_allreduce", "2_allgather", "3_broadcast", "4_reduce", "5_scatter", "6_gather",
            "7_reducescatter", "8_alltoall"]
# Baseline medians measured on 4x H200 (README, "Measured"), us per call; used as the scale only.
BASELINE_US = [33.3, 46.6, 45.3, 45.8, 39.6, 39.7, 42.7, 40.0]
FAILURES = ["compile_error", "load_error", "runtime_error", "mismatch", "crash", "timeout"]
MODELS = {  # name: (probability a sample is correct, typical log2 speedup of a correct one)
    "synthetic-model-a": (0.55, 0.35),
    "synthetic-model-b": (0.30, -0.10),
}
SAMPLES = 3


def record(rng, model, pid, stem, sample, p_ok, mu):
    base = BASELINE_US[pid - 1] * rng.uniform(0.97, 1.03)
    ok = rng.random() < p_ok
    status = "ok" if ok else rng.choice(FAILURES)
    timing = {"baseline": {"median_us": base}, "candidate": None}
    speedup = roofline = None
    if ok:
        cand = base / (2 ** rng.gauss(mu, 0.45))
        speedup = base / cand
        timing["candidate"] = {"median_us": cand}
        floor = base * rng.uniform(0.15, 0.35)
        roofline = {"floor_us": min(floor, cand), "synthetic": True}
    return {
        "schema_version": 1, "harness_version": "0.1.0", "kind": "eval",
        "timestamp": "2026-12-01T00:00:00Z", "argv": [],
        "problem": {"id": pid, "stem": stem, "name": stem.split("_", 1)[1], "spec_hash": ""},
        "baseline": {"path": f"problems/{stem}/reference.cu", "sha256": ""},
        "candidate": {"path": f"solutions/{model}/{stem}_s{sample}.cu", "sha256": f"{model}-{stem}-{sample}"},
        "label": model, "sample": sample,
        "config": {"world": 4, "dtype": "bf16", "size": "default", "params": {}, "trials": 5,
                   "atol": 0.01, "rtol": 0.01, "seed": ""},
        "system": {"gpu": "SYNTHETIC (not measured)", "gpu_count": 4},
        "status": status, "message": "" if ok else f"synthetic {status}",
        "failed_checks": [], "timing": timing, "speedup": speedup, "roofline": roofline,
        "bitwise_identical": None,
        "warnings": ["synthetic record for the report example; not a measurement"], "wall_s": 0.0,
    }


def main():
    rng = random.Random(20261201)
    for model, (p_ok, mu) in MODELS.items():
        for pid, stem in enumerate(PROBLEMS, start=1):
            for sample in range(SAMPLES):
                print(json.dumps(record(rng, model, pid, stem, sample, p_ok, mu), sort_keys=True))


if __name__ == "__main__":
    main()
