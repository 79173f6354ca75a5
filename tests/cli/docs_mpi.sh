#!/bin/sh
# The one-machine example of docs/distributed.md ("### Running on one machine": the first line
# of its ```sh block, read from there so that it cannot drift) runs as it stands, on this
# machine's devices (one PoCL device in CI), with two substitutions and one addition: the built
# program for build/src/cli/cltrain, a tiny IDX folder for --data fashion-mnist, and
# --steps 2 --log-every 0. Skips (77) without mpirun, when mpirun cannot start a process here,
# or when cltrain was built without MPI. Needs CLTRAIN_BIN.
set -eu
. "$(dirname "$0")/../lib.sh"

command -v mpirun >/dev/null || skip "no mpirun (Open MPI: openmpi-bin)"
need_exe CLTRAIN_BIN
docs="$(cd "$(dirname "$0")/../.." && pwd)/docs/distributed.md"
[ -f "$docs" ] || fail "$docs is missing"
make_tmp
mpi_env
# root in containers and more ranks than cores: the settings docs/distributed.md describes
export OMPI_MCA_rmaps_base_oversubscribe=1

cmd=$(awk '/^### Running on one machine/ { in_section = 1; next }
           /^#/ { in_section = 0 }
           in_section && /^```sh$/ { in_block = 1; next }
           in_block { print; exit }' "$docs")
case $cmd in
"mpirun -np 2 build/src/cli/cltrain train "*"--data fashion-mnist"*) ;;
*) fail "docs/distributed.md: the one-machine example is not an 'mpirun -np 2" \
    "build/src/cli/cltrain train ... --data fashion-mnist ...' line: '$cmd'" ;;
esac
set +e
timeout -k 10 60 mpirun -np 1 true >"$tmp/out" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || skip "mpirun cannot start a process here: $(head -3 "$tmp/out")"

write_idx "$tmp/idx" 600 50
# the docs' words, one by one (the example has no quoting), with the substitutions
set -- 
for word in $cmd; do
    case $word in
    build/src/cli/cltrain) set -- "$@" "$CLTRAIN_BIN" ;;
    fashion-mnist) set -- "$@" "idx:$tmp/idx" ;;
    *) set -- "$@" "$word" ;;
    esac
done
set +e
timeout -k 10 120 "$@" --steps 2 --log-every 0 >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
grep -q "built without MPI" "$tmp/err" && skip "this cltrain was built without MPI"
[ "$rc" -eq 0 ] || fail "docs/distributed.md's example: exit code $rc: $(cat "$tmp/err")" \
    "$(tail -5 "$tmp/out")"
grep -q "reduce: 2 steps" "$tmp/out" ||
    fail "docs/distributed.md's example: no 'reduce: 2 steps' line: $(cat "$tmp/out")"
echo "ok: docs/distributed.md's one-machine example: $cmd"
