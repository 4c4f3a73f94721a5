#!/usr/bin/env bash
# The MPI launcher against the local one: problems 1-8, baseline against itself, once with each
# launcher, on every visible GPU; prints both medians and their ratio per problem (should be 1 within
# noise). Needs OpenMPI's mpirun.   tools/bench_mpi_vs_local.sh [extra pkb eval flags]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/.gpu-check}
mkdir -p "$OUT"
J="$OUT/mpi_vs_local.jsonl"
rm -f "$J"
for p in 1 2 3 4 5 6 7 8; do
  build/bin/pkb eval $p --solution reference -q --json "$J" --label local "$@" >/dev/null 2>&1
  build/bin/pkb eval $p --solution reference -q --json "$J" --label mpi --launcher mpi "$@" >/dev/null 2>&1
done
python3 - "$J" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in recs:
    t = (r.get("timing") or {}).get("baseline") or {}
    by.setdefault(r["problem"]["stem"], {})[r["label"]] = (r["status"], t.get("median_us"))
print(f"{'problem':<18}{'local':>14}{'mpi':>14}{'mpi/local':>11}")
for stem, d in sorted(by.items()):
    (ls, lt), (ms, mt) = d.get("local", ("-", None)), d.get("mpi", ("-", None))
    ratio = f"{mt / lt:.3f}" if lt and mt else "-"
    print(f"{stem:<18}{ls + ' ' + (f'{lt:.2f}' if lt else '-'):>14}{ms + ' ' + (f'{mt:.2f}' if mt else '-'):>14}{ratio:>11}")
PY
