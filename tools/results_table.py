#!/usr/bin/env python3
"""Markdown results table from `pkb sweep --json` records: per problem, world size and size, the
baseline (NCCL) and candidate medians (eager, checked calls), speedup, busbw, % of the link (the
calibrated rate where `pkb calibrate` ran on that machine, else the datasheet's 450 GB/s; the table says
which), and the CUDA-graph replay times when the sweep used --graph.

  tools/results_table.py sweeps.jsonl [more.jsonl ...] > docs/results/experts.md
"""
import json
import sys
from collections import defaultdict


def size_label(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            v = b / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{b} B"


def main(paths):
    rows = defaultdict(list)
    system = None
    sources = set()
    for p in paths:
        for line in open(p):
            if not line.strip():
                continue
            r = json.loads(line)
            if r.get("kind") != "sweep":
                continue
            system = system or r.get("system")
            sources.add((r.get("roofline") or {}).get("source", "?"))
            rows[(r["problem"]["id"], r["problem"]["stem"], r["config"]["world"])].append(r)
    if system:
        print(f"Measured on {system.get('gpu_count')}x {system.get('gpu')} (driver {system.get('nvidia_driver')}, "
              f"NCCL {system.get('nccl')}, CUDA {system.get('cuda_runtime')}). Times are medians in µs of the slowest "
              "rank per call (eager, every call checked); *graph* columns time a CUDA-graph replay of the same calls. "
              f"% link = busbw over the link rate from: {', '.join(sorted(sources))} "
              "(calibrated = `pkb calibrate` on that machine; datasheet = 450 GB/s per direction).\n")
    for (pid, stem, world), recs in sorted(rows.items()):
        sol = (recs[0].get("candidate") or {}).get("path", "").split("/")[-1]
        print(f"### {stem}, W={world} — {sol}\n")
        print("| size | NCCL µs | expert µs | speedup | busbw GB/s | % link | NCCL graph µs | expert graph µs | graph speedup | status |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|")
        for r in sorted(recs, key=lambda r: (r.get("roofline") or {}).get("algbw_bytes", 0)):
            t = r.get("timing") or {}
            b = (t.get("baseline") or {}).get("median_us")
            c = (t.get("candidate") or {}).get("median_us")
            rf = r.get("roofline") or {}
            g = r.get("graph_timing") or {}
            gb, gc = g.get("baseline_us"), g.get("candidate_us")
            f = lambda x, fmt="%.2f": (fmt % x) if isinstance(x, (int, float)) and x else "-"
            speed = f(b / c, "%.2fx") if b and c else "-"
            gspeed = f(gb / gc, "%.2fx") if gb and gc else "-"
            print(f"| {size_label(rf.get('algbw_bytes', 0))} | {f(b)} | {f(c)} | {speed} | {f(rf.get('busbw_gbps'), '%.0f')} | "
                  f"{f(rf.get('link_pct'), '%.0f%%')} | {f(gb)} | {f(gc)} | {gspeed} | {r['status']} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
