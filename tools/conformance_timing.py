"""Times PKB's PyTorch solution() the way pkb times a baseline (src/worker/timing.cpp), for
tools/conformance.py --time. Per call, on the current CUDA stream:

    barrier over all ranks (all_reduce of one float) -> ~20 us GPU-side delay (torch.cuda._sleep)
    -> [start event] solution(*args) [stop event] -> restore this group's inputs from the dump

  - Input groups: G = clamp(floor(3 x L2 / input bytes of the largest rank) + 1, 2, 128) private
    copies, call c using group c % G, so the working set exceeds 3x L2 as in pkb. Group g holds the
    inputs of dumped trial g % T: pkb draws fresh inputs for every call, but only the dumped trials'
    inputs exist here, so they are rotated.
  - After each call (outside the events) the group's tensors are copied back from the dumped
    inputs, where pkb regenerates them: a solution that writes its inputs (PKB's mutable-input
    problems) sees pristine inputs every call. make_args runs once per group, before timing, so
    an adapter must hand pkb's tensors to solution() itself, not copies, where solution() writes.
  - Warm-up: 5 probe calls measure the per-call wall time (slowest rank), then as many calls as fit
    in --warmup-budget-ms, at most --warmup (500), as pkb does.
  - Reported: per rank the median of its per-call times; rank 0 gathers them, and also takes, per
    call, the slowest rank and then the median over calls: pkb's statistic (its "median_us").
"""

import json
import math
import os
import statistics
import time

import torch
import torch.distributed as dist


def percentile(values, q):
    """Linear interpolation between closest ranks, as src/core/stats.cpp."""
    v = sorted(values)
    if not v:
        return 0.0
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarize(per_rank_ms):
    """per_rank_ms: [rank][call] -> the dict timing.json holds (without the run's identity)."""
    medians = [statistics.median(r) for r in per_rank_ms]
    slowest = [max(r[i] for r in per_rank_ms) for i in range(len(per_rank_ms[0]))]
    return {
        "median_ms": medians,
        "max": max(medians),
        "slowest_rank_per_call": {
            "median_ms": percentile(slowest, 0.5), "mean_ms": sum(slowest) / len(slowest),
            "p10_ms": percentile(slowest, 0.1), "p90_ms": percentile(slowest, 0.9),
            "min_ms": min(slowest), "max_ms": max(slowest),
        },
        "per_call_ms": per_rank_ms,
    }


def l2_bytes(device):
    props = torch.cuda.get_device_properties(device)
    n = getattr(props, "L2_cache_size", 0) or getattr(props, "l2_cache_size", 0)
    return int(n) if n and n > 0 else 64 << 20  # pkb's fallback


def sleep_cycles(us):
    """torch.cuda._sleep cycles for about `us` microseconds, measured on this GPU (0 if absent)."""
    if us <= 0 or not hasattr(torch.cuda, "_sleep"):
        return 0
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 1 << 20
    for _ in range(2):  # the second reading, with the clocks up
        start.record()
        torch.cuda._sleep(cycles)
        stop.record()
        stop.synchronize()
    ms = start.elapsed_time(stop)
    return max(1, int(cycles * us / (ms * 1000.0))) if ms > 0 else 0


def all_reduce_max(value, device):
    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


class Timer:
    def __init__(self, r):
        self.r = r
        self.device = r.device
        trials = sorted(r.pristine)
        in_bytes = sum(v.numel() * v.element_size() for v in r.pristine[trials[0]].values())
        max_in = all_reduce_max(in_bytes, self.device)
        l2 = l2_bytes(self.device)
        self.n_groups = 2 if max_in <= 0 else int(min(max(math.floor(3.0 * l2 / max_in) + 1, 2), 128))
        self.groups = []  # (pristine inputs, private copies, args)
        for g in range(self.n_groups):
            t = trials[g % len(trials)]
            src = r.pristine[t]
            mine = {k: v.clone() for k, v in src.items()}
            ctx = r.contexts[t]
            self.groups.append((src, mine, r.call_adapter(f"timing: make_args (trial {t})", r.adapter.make_args, mine, ctx)))
        self.flag = torch.zeros(1, dtype=torch.float32, device=self.device)
        self.cycles = sleep_cycles(r.args.predelay_us)

    def call(self, c, events=None):
        src, mine, args = self.groups[c % self.n_groups]
        dist.all_reduce(self.flag)
        if self.cycles:
            torch.cuda._sleep(self.cycles)
        if events:
            events[0].record()
        self.r.solution(*args)
        if events:
            events[1].record()
        for k, v in mine.items():
            v.copy_(src[k])

    def warmup_count(self, probe):
        """pkb's rule: probe calls, per-call wall time of the slowest rank, then the budget."""
        a = self.r.args
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        for c in range(probe):
            self.call(c)
        torch.cuda.synchronize(self.device)
        per_call = all_reduce_max((time.perf_counter() - t0) * 1000.0 / probe if probe else 0.0, self.device)
        if per_call <= 0:
            return max(a.warmup, probe)
        return int(min(max(a.warmup_budget_ms / per_call, probe), max(a.warmup, probe)))

    def measure(self):
        a = self.r.args
        probe = min(a.warmup, 5)
        warmup = self.warmup_count(probe)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.iters)]
        torch.cuda.synchronize(self.device)
        for c in range(probe, warmup + a.iters):
            t = c - warmup
            self.call(c, events[t] if t >= 0 else None)
        torch.cuda.synchronize(self.device)
        return warmup, [s.elapsed_time(e) for s, e in events]


def run(r):
    """Times r.solution over r.pristine's inputs; rank 0 prints and writes <out>/timing.json."""
    timer = Timer(r)
    warmup, times = timer.measure()
    mine = torch.tensor(times, dtype=torch.float64, device=r.device)
    gathered = [torch.empty_like(mine) for _ in range(r.world)]
    dist.all_gather(gathered, mine)
    if r.rank != 0:
        return
    meta = r.contexts[sorted(r.contexts)[0]]
    per_rank = [g.cpu().tolist() for g in gathered]
    rec = {"problem": r.problem, "world": r.world, "size": meta.size, "dtype": r.plan[0][2].metadata.get("dtype", ""),
           "vars": meta.vars, "iters": len(times), "warmup": warmup, "input_groups": timer.n_groups,
           "predelay_us": r.args.predelay_us, "sleep_cycles": timer.cycles, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(r.device)}
    rec.update(summarize(per_rank))
    path = os.path.join(r.args.out, "timing.json")
    with open(path, "w") as fh:
        json.dump(rec, fh, indent=1)
        fh.write("\n")
    s = rec["slowest_rank_per_call"]
    print(f"conformance: {r.problem} W={r.world} size={meta.size}: PyTorch median {s['median_ms']:.4f} ms per call "
          f"(slowest rank per call; p10 {s['p10_ms']:.4f}, p90 {s['p90_ms']:.4f}); per-rank medians "
          f"{', '.join(f'{m:.4f}' for m in rec['median_ms'])} ms, max {rec['max']:.4f} ms; {len(times)} calls after "
          f"{warmup} warm-up, {timer.n_groups} input groups -> {path}", flush=True)
