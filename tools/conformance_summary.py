#!/usr/bin/env python3
"""The bookkeeping of tools/conformance.sh and conformance_all.sh (plain Python, no PyTorch):

  conformance_summary.py info RECORD.jsonl
      one tab-separated line from the last `pkb run --json` record: status, stem, world, size,
      dtype, atol, rtol, baseline median in microseconds ("-" when not timed)
  conformance_summary.py line --problem P [--record R] [--compare C --compare-rc N] [--timing T]
                              [--error TEXT] [--jsonl OUT]
      reads `pkb compare` output (per rank, trial and tensor), the run record and the PyTorch
      timing.json, prints one summary line and appends it as JSON to OUT
  conformance_summary.py table SUMMARY.jsonl
      a Markdown table of the summaries
"""

import argparse
import json
import re
import sys

KINDS = r"agree|DIFFER|only in A|only in B|shape differs|dtype differs|unreadable"
# One finding line of `pkb compare A B` (src/compare/artifacts.cpp format_artifact_comparison):
#   "  trial_0/rank_1.safetensors     output.out       bf16[1024, 1024]       agree         bitwise equal"
FINDING = re.compile(r"^\s+(?P<file>trial_(?P<trial>\d+)/rank_(?P<rank>\d+)\.safetensors)\s+(?P<tensor>[^\s\[]*)\s+"
                     r"(?P<type>\S+\[[^\]]*\])?\s*(?P<kind>" + KINDS + r")(?:\s+(?P<detail>.*))?$")


def last_record(path):
    rec = None
    with open(path) as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
    if rec is None:
        raise SystemExit(f"conformance_summary: {path} holds no record")
    return rec


def baseline_median_us(rec):
    t = (rec.get("timing") or {}).get("candidate")  # `pkb run` times its solution: here the baseline
    return t.get("median_us") if t else None


def cmd_info(a):
    rec = last_record(a.record)
    c = rec.get("config", {})
    med = baseline_median_us(rec)
    fields = [rec.get("status", "?"), rec.get("problem", {}).get("stem", "?"), c.get("world", "?"), c.get("size", "?"),
              c.get("dtype", "?"), repr(float(c.get("atol", 1e-2))), repr(float(c.get("rtol", 1e-2))),
              "-" if med is None else repr(float(med))]
    print("\t".join(str(f) for f in fields))
    return 0


def parse_compare(text):
    """[{trial, rank, tensor, kind, bitwise, detail}] for every finding line."""
    out = []
    for line in text.splitlines():
        m = FINDING.match(line)
        if m:
            detail = (m.group("detail") or "").strip()
            out.append({"trial": int(m.group("trial")), "rank": int(m.group("rank")), "tensor": m.group("tensor"),
                        "kind": m.group("kind"), "bitwise": detail == "bitwise equal", "detail": detail})
    return out


def judge(findings, compare_rc):
    """(agree "yes"/"no", inputs note, outputs note, failures[]) from the compare findings."""
    inputs = [f for f in findings if f["tensor"].startswith("input.")]
    outputs = [f for f in findings if f["tensor"].startswith("output.")]
    failures = [f for f in findings if f["kind"] != "agree"]
    agree = "yes" if compare_rc == 0 and findings and not failures and outputs else "no"
    if not inputs:
        in_note = "no inputs compared"
    elif all(f["kind"] == "agree" and f["bitwise"] for f in inputs):
        in_note = "inputs bitwise equal"
    else:
        in_note = "INPUTS DIFFER (the tool did not feed pkb's inputs)"
        agree = "no"
    bitwise = sum(1 for f in outputs if f["bitwise"])
    ranks = sorted({f["rank"] for f in outputs})
    names = sorted({f["tensor"][len("output."):] for f in outputs})
    trials = sorted({f["trial"] for f in outputs})
    out_note = (f"{len(ranks)} rank(s) x {len(names)} output(s) x {len(trials)} trial(s), "
                f"{bitwise}/{len(outputs)} bitwise equal")
    return agree, in_note, out_note, failures


def per_rank_output(findings):
    """"r0:out=yes r1:out=no": per rank and output, whether every trial agreed (a file missing
    for a rank counts against each of its outputs)."""
    names = sorted({f["tensor"][len("output."):] for f in findings if f["tensor"].startswith("output.")})
    ranks = sorted({f["rank"] for f in findings})
    ok = {(r, n): True for r in ranks for n in names}
    for f in findings:
        if f["kind"] == "agree":
            continue
        hit = [n for n in names if f["tensor"] in ("", "output." + n)]
        for n in hit:
            ok[(f["rank"], n)] = False
    return " ".join(f"r{r}:{n}={'yes' if ok[(r, n)] else 'no'}" for r in ranks for n in names)


def describe_failures(failures, limit=4):
    parts = [f"rank {f['rank']} trial {f['trial']} {f['tensor'] or '(file)'} {f['kind']}"
             + (f": {f['detail']}" if f["detail"] and f["kind"] != "agree" else "") for f in failures[:limit]]
    if len(failures) > limit:
        parts.append(f"... {len(failures) - limit} more")
    return "; ".join(parts)


def fmt_ms(x):
    return "-" if x is None else f"{x:.4f}"


def cmd_line(a):
    s = {"problem": a.problem, "world": None, "size": None, "dtype": None, "agree": "error", "inputs": "",
         "outputs": "", "failures": "", "pkb_ms": None, "torch_ms": None, "ratio": None, "error": a.error or ""}
    if a.record:
        try:
            rec = last_record(a.record)
            c = rec.get("config", {})
            s.update(problem=rec.get("problem", {}).get("stem", a.problem), world=c.get("world"), size=c.get("size"),
                     dtype=c.get("dtype"))
            med = baseline_median_us(rec)
            s["pkb_ms"] = None if med is None else med / 1000.0
        except (OSError, ValueError, SystemExit) as e:
            s["error"] = s["error"] or f"no run record: {e}"
    if a.compare and not a.error:
        with open(a.compare) as fh:
            findings = parse_compare(fh.read())
        agree, s["inputs"], s["outputs"], failures = judge(findings, a.compare_rc)
        s["agree"] = agree
        s["per_rank_output"] = per_rank_output(findings)
        s["failures"] = describe_failures(failures)
    if a.timing:
        try:
            with open(a.timing) as fh:
                s["torch_ms"] = json.load(fh)["slowest_rank_per_call"]["median_ms"]
        except (OSError, ValueError, KeyError):
            pass
    if s["pkb_ms"] and s["torch_ms"]:
        s["ratio"] = s["pkb_ms"] / s["torch_ms"]
    ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}"
    line = (f"{s['problem']}  W={s['world'] or '?'}  size={s['size'] or '?'}  {s['dtype'] or '?'}  agree={s['agree']}"
            f"  pkb baseline {fmt_ms(s['pkb_ms'])} ms  PyTorch {fmt_ms(s['torch_ms'])} ms  baseline/PyTorch {ratio}")
    detail = "; ".join(x for x in (s.get("per_rank_output"), s["inputs"], s["outputs"], s["failures"], s["error"]) if x)
    print(line + (f"  ({detail})" if detail else ""))
    if a.jsonl:
        with open(a.jsonl, "a") as fh:
            fh.write(json.dumps(s) + "\n")
    return 0


def cmd_table(a):
    rows = []
    with open(a.jsonl) as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
    print("| problem | W | size | dtype | agree | inputs | outputs | pkb baseline (ms) | PyTorch (ms) | baseline/PyTorch | notes |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in rows:
        ratio = "-" if s.get("ratio") is None else f"{s['ratio']:.2f}"
        notes = "; ".join(x for x in (s.get("failures"), s.get("error")) if x).replace("|", "/")
        print(f"| {s['problem']} | {s.get('world') or '?'} | {s.get('size') or '?'} | {s.get('dtype') or '?'} | "
              f"{s['agree']} | {s.get('inputs', '')} | {s.get('outputs', '')} | {fmt_ms(s.get('pkb_ms'))} | "
              f"{fmt_ms(s.get('torch_ms'))} | {ratio} | {notes} |")
    agreed = sum(1 for s in rows if s["agree"] == "yes")
    print(f"\n{agreed} of {len(rows)} problem(s) agree with PKB's PyTorch reference.")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="conformance_summary.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("info", help="fields of the last record of a `pkb run --json` file")
    i.add_argument("record")
    ln = sub.add_parser("line", help="one summary line from the run record, compare output and timing.json")
    ln.add_argument("--problem", required=True)
    ln.add_argument("--record")
    ln.add_argument("--compare")
    ln.add_argument("--compare-rc", type=int, default=1)
    ln.add_argument("--timing")
    ln.add_argument("--error")
    ln.add_argument("--jsonl")
    t = sub.add_parser("table", help="a Markdown table of the summary lines in a .jsonl file")
    t.add_argument("jsonl")
    a = p.parse_args(argv)
    return {"info": cmd_info, "line": cmd_line, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
