#!/bin/sh
# The OpenCL 1.2 host floor, checked on the built binaries: every `cl[A-Z]*` function that
# cltrain, cltrain-tune and the test programs import (`nm -D --undefined-only`) must be in
# tests/opencl12_functions.txt (OpenCL 1.0-1.2 core). One line per offending binary and symbol.
# Seen failing on the tree before the fix (src/runtime/device.c called the 2.0 entry point when the
# platform reported 2.0+):
#   cl_symbols: FAIL: build-a/src/cli/cltrain imports clCreateCommandQueueWithProperties, not in OpenCL 1.2
# Arguments: the build root (the binaries are found in it) or the binaries themselves.
set -u
export LC_ALL=C # one sort order for sort and comm

. "$(dirname "$0")/../lib.sh"

here=$(dirname "$0")
list="$here/opencl12_functions.txt"
[ -r "$list" ] || fail "cannot read the OpenCL 1.2 function list $list"
command -v nm >/dev/null 2>&1 || skip "nm (binutils) is not installed"
[ $# -ge 1 ] || fail "usage: cl_symbols.sh BUILD_ROOT | BINARY..."

make_tmp
grep -v '^#' "$list" | grep -v '^$' | sort -u >"$tmp/allowed"

# The binaries: a build root expands to the CLI, the tuner and every test program.
: >"$tmp/bins"
for arg in "$@"; do
    if [ -d "$arg" ]; then
        for b in "$arg/src/cli/cltrain" "$arg/tools/cltrain-tune"; do
            [ -x "$b" ] || fail "$b is missing (build first)"
            echo "1 $b" >>"$tmp/bins"
        done
        ntests=0
        for b in "$arg"/tests/test_*; do
            if [ -f "$b" ] && [ -x "$b" ]; then
                echo "0 $b" >>"$tmp/bins"
                ntests=$((ntests + 1))
            fi
        done
        [ "$ntests" -ge 1 ] || fail "no test programs under $arg/tests"
    else
        [ -f "$arg" ] || fail "$arg is not a file"
        echo "0 $arg" >>"$tmp/bins"
    fi
done

bad=0
while read -r must b; do
    nm -D --undefined-only "$b" >"$tmp/nm" 2>"$tmp/nm.err" || fail "nm $b: $(cat "$tmp/nm.err")"
    # Last field is NAME or NAME@VERSION; CLBlast's own functions (CLBlast*) are not OpenCL's.
    awk '{print $NF}' "$tmp/nm" | sed 's/@.*//' | grep '^cl[A-Z]' | sort -u >"$tmp/used"
    # The CLI and the tuner must import OpenCL, else the check proves nothing (a static link,
    # a changed nm format); a test program may use none (test_data, test_spec).
    [ "$must" -eq 0 ] || grep -qx clGetPlatformIDs "$tmp/used" ||
        fail "$b imports no clGetPlatformIDs; the check would prove nothing"
    for s in $(comm -23 "$tmp/used" "$tmp/allowed"); do
        echo "cl_symbols: FAIL: $b imports $s, not in OpenCL 1.2"
        bad=1
    done
done <"$tmp/bins"

[ "$bad" -eq 0 ] || exit 1
echo "cl_symbols: ok: $(wc -l <"$tmp/bins") binaries import only OpenCL 1.2 host functions"
