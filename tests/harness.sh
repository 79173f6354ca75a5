#!/bin/sh
# The tests' own conventions, so that none can pass having checked nothing: every check program
# under tests/ ends with tc_run (common.c: exit 77 when no test ran) and runs no SRunner of its
# own, and every shell test sources tests/lib.sh (its fail and skip) instead of defining fail.
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
[ "$nprog" -ge 1 ] && [ "$nsh" -ge 1 ] || fail "no test programs or scripts under $dir"
[ "$bad" -eq 0 ] || fail "the tests above break the conventions of tests/lib.sh and tc_run"
echo "harness: $nprog test programs end with tc_run, $nsh scripts source lib.sh"
