#!/usr/bin/env python3
"""Print a compact table of pkb JSON Lines records (one row per record)."""
import json
import sys


def main(paths):
    rows = []
    for p in paths:
        for line in open(p):
            if line.strip():
                rows.append(json.loads(line))
    print(f"{'problem':<18}{'W':>3} {'size':<8}{'dtype':<6}{'status':<14}{'base us':>10}{'cand us':>10}{'speedup':>9}{'wall s':>8}  solution")
    for r in rows:
        t = r.get("timing") or {}
        b = (t.get("baseline") or {}).get("median_us")
        c = (t.get("candidate") or {}).get("median_us")
        s = r.get("speedup")
        sol = (r.get("candidate") or {}).get("path", "")
        fmt = lambda x, f: (f % x) if isinstance(x, (int, float)) else "-"
        print(f"{r['problem']['stem']:<18}{r['config']['world']:>3} {r['config']['size']:<8}{r['config']['dtype']:<6}"
              f"{r['status']:<14}{fmt(b, '%10.2f'):>10}{fmt(c, '%10.2f'):>10}{fmt(s, '%8.3fx'):>9}{r['wall_s']:8.1f}  {sol.split('/')[-1]}")
        if r["status"] != "ok":
            print(f"    -> {r.get('message', '')[:160]}")


if __name__ == "__main__":
    main(sys.argv[1:])
