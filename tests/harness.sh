#!/bin/sh
# The tests' own conventions, so that none can pass having checked nothing: every check program
# under tests/ ends with tc_run (common.c: exit 77 when no test ran) and runs no SRunner of its
# own, every shell test sources tests/lib.sh (its fail and skip) instead of defining fail, and
# every kernel family's test program is in tools/oclgrind.sh's list.
# One line per offending file. Usage: harness.sh [TESTS_DIR] (default: this script's folder).
set -eu
. "$(dirname "$0")/lib.sh"

dir=${1:-$(dirname "$0")}
bad=0
nprog=0
for f in "$dir"/*/test_*.c; do
    [ -f "$f" ] || continue
    nprog=$((nprog + 1))
    if ! grep -q "return tc_run(" "$f"; then
        echo "$f: main() does not end with tc_run (tests/common.h)"
        bad=1
    fi
    if grep -q "srunner_create" "$f"; then
        echo "$f: runs its own SRunner; use tc_run (tests/common.h)"
        bad=1
    fi
done
nsh=0
for f in "$dir"/*.sh "$dir"/*/*.sh; do
    [ -f "$f" ] || continue
    [ "$(basename "$f")" != lib.sh ] || continue
    nsh=$((nsh + 1))
    if ! grep -q '^\. "$(dirname "[^"]*")/\(\.\./\)\{0,1\}lib\.sh"' "$f"; then
        echo "$f: does not source tests/lib.sh"
        bad=1
    fi
    if grep -q '^[[:space:]]*fail()' "$f"; then
        echo "$f: defines its own fail(); tests/lib.sh has it"
        bad=1
    fi
done
# Every kernel family's test program also runs on Oclgrind's simulated GPU (CI's oclgrind stage):
# its name in tools/oclgrind.sh's list.
oclgrind=$dir/../tools/oclgrind.sh
if [ -f "$oclgrind" ]; then
    listed=$(sed -n '/^programs=(/,/)/p' "$oclgrind")
    for f in "$dir"/ops/test_*.c; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .c)
        name=${name#test_}
        if ! printf '%s\n' "$listed" | grep -qw -- "$name"; then
            echo "$f: not in tools/oclgrind.sh's programs (the simulated GPU never runs it)"
            bad=1
        fi
    done
fi
[ "$nprog" -ge 1 ] && [ "$nsh" -ge 1 ] || fail "no test programs or scripts under $dir"
[ "$bad" -eq 0 ] || fail "the tests above break the conventions of tests/lib.sh and tc_run"
echo "harness: $nprog test programs end with tc_run, $nsh scripts source lib.sh"
