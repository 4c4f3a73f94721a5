#!/usr/bin/env bash
# A stand-in for mpirun in CPU tests of pkb's MPI launcher: `-np N` then the command; `-x NAME=VALUE`
# is exported; each of the N copies gets OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK. Exits with the first
# failure, as mpirun does.
np=1
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -np) np=$2; shift 2 ;;
    -x) export "$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
pids=()
for ((r = 0; r < np; r++)); do
  OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$np OMPI_COMM_WORLD_LOCAL_RANK=$r "${args[@]}" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
  wait "$p" || { [ $rc = 0 ] && rc=$?; }
done
exit $rc
