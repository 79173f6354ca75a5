#!/usr/bin/env bash
# The MPI communicator under mpirun on this machine (mpi_probe.c): 2 and 3 ranks (3 is not a
# power of two: another allreduce algorithm, uneven slices), MPI initialised by the caller, a
# caller's MPI_THREAD_SINGLE refused, and an abort on rank 1 that must end the run with a
# failure within the time limit, not leave rank 0 waiting forever.
# Usage: mpi_allreduce.sh MPIRUN PROBE
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
[ $# -eq 2 ] || fail "usage: mpi_allreduce.sh MPIRUN PROBE"
mpirun=$1
probe=$2
mpi_env
limit=60

fails=0
# run NAME NP WANT [PROBE ARGS]: WANT is ok (exit 0 and "rank R ok" from every rank) or abort
# (a non-zero exit and rank 1's line). Either way mpirun must end within $limit s.
run() {
    local name=$1 np=$2 want=$3 out rc=0 start
    shift 3
    start=$(date +%s)
    # --oversubscribe: more ranks than cores (CI machines have 2)
    out=$(timeout -k 10 "$limit" "$mpirun" -np "$np" --oversubscribe "$probe" "$@" 2>&1) || rc=$?
    local bad=""
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        bad="mpirun still running after $limit s"
    elif [ "$want" = ok ]; then
        if [ "$rc" -ne 0 ]; then
            bad="mpirun exited with $rc"
        else
            for ((r = 0; r < np; r++)); do
                grep -qx "rank $r ok" <<<"$out" || bad="no 'rank $r ok'"
            done
        fi
    else
        if [ "$rc" -eq 0 ]; then
            bad="mpirun exited with 0 after an abort"
        elif grep -q "rank 1: FAIL" <<<"$out"; then
            bad="rank 1 failed otherwise"
        elif ! grep -q "rank 1: failing on purpose" <<<"$out"; then
            bad="rank 1's line before the abort is missing (stdout not flushed)"
        fi
    fi
    if [ -n "$bad" ]; then
        echo "FAIL $name: $bad; output:"
        sed 's/^/    /' <<<"$out"
        fails=$((fails + 1))
    else
        echo "ok   $name ($(($(date +%s) - start)) s)"
    fi
}

run "2 ranks" 2 ok
run "3 ranks" 3 ok
run "caller initialises MPI" 2 ok caller-init
run "caller's MPI_THREAD_SINGLE" 2 ok thread-single
run "abort on rank 1" 2 abort abort

[ "$fails" -eq 0 ] || fail "$fails of 5 cases failed"
