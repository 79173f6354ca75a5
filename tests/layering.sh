#!/usr/bin/env bash
# The include-order test: no layer includes a header of a layer above it (docs/architecture.md).
# Usage: layering.sh [--self-test] [ROOT]; ROOT defaults to the repository this script is in.
#
# Layers by rank, lowest first: runtime 0, io 1, ops 2, data 3, nn 3, dist 3, train 4, cli 5. data,
# nn and dist are siblings: none may include another. A file's layer is its folder under src/;
# tools/*.c and examples/*.c count as cli; include/cltrain/X.h has the layer of the module that
# implements it (the table below). Every #include "..." (and #include <...> of a cltrain/ or layer
# path) in src/, include/cltrain/, tools/*.c and examples/*.c is resolved the same way: "ops/x.h"
# is ops, "cltrain/X.h" is X's layer from the table. Reported, one line each, exit 1:
#   - an include of a higher layer, or of a same-rank sibling;
#   - a bare #include "x.h" in src/ or include/ (private includes are folder-qualified);
#   - in src/cli/, an include of any layer's private header: the program includes only the
#     installed headers (cltrain/...), its own (cli/...) and system headers
#     (tools/install_check.sh builds it against an installed copy alone);
#   - a path whose first folder is no layer, a file outside a layer folder of src/;
#   - a public header that the table does not list.
# Table entries whose header does not exist are ignored (public headers move into src/).
# Lines are read as they stand: an include inside #if 0 or a /* */ block is checked too.
#
# --self-test copies src/ include/ tools/ examples/ to a temporary folder, injects a runtime file
# including "train/checkpoint_internal.h", a data file including "nn/x.h" (a sibling), a bare
# include into an ops file, a cli file including "runtime/internal.h" (a private header), and
# an allowed include into a train file, and fails unless the check reports exactly the four
# violations more than on the unchanged copy.
set -euo pipefail
export LC_ALL=C
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Public header (include/cltrain/<name>.h) -> the layer that implements it.
layer_map='
status runtime
errors runtime
export runtime
device runtime
tensor runtime
alloc runtime
profile runtime
opencl runtime
outfile io
loss ops
data data
loader data
text data
spec nn
model nn
dist dist
optim train
train train
checkpoint train
cltrain cli
'

# check ROOT: prints one line per violation and a summary; exit 1 on any violation.
check() (
    cd "$1"
    files=()
    if [ -d src ]; then
        while IFS= read -r f; do files+=("$f"); done \
            < <(find src -type f \( -name '*.c' -o -name '*.h' \) | sort)
    fi
    for f in include/cltrain/*.h tools/*.c examples/*.c; do
        [ -f "$f" ] && files+=("$f")
    done
    if [ "${#files[@]}" -eq 0 ]; then
        echo "layering: no sources under $1"
        exit 1
    fi
    pubs=''
    for f in include/cltrain/*.h; do
        [ -f "$f" ] && pubs="$pubs ${f#include/cltrain/}"
    done

    awk -v map="$layer_map" -v pubs="$pubs" -v nfiles="${#files[@]}" '
    function fail(msg) { print msg; errors++ }
    function file_layer(f,    p, n) {
        n = split(f, p, "/")
        if (p[1] == "src") {
            if (n < 3) { fail(f ": not in a layer folder (src/<layer>/)"); return "" }
            if (!(p[2] in rank)) { fail(f ": src/" p[2] "/ is not a layer folder"); return "" }
            return p[2]
        }
        if (p[1] == "include") {
            sub(/\.h$/, "", p[3])
            return (p[3] in pub) ? pub[p[3]] : "" # not in the map: reported in BEGIN
        }
        return "cli" # tools/*.c, examples/*.c
    }
    # The layer of an included path, or "" (reported, or a local header of a tool).
    function target_layer(path,    p, n, h) {
        n = split(path, p, "/")
        if (n == 1) {
            if (FILENAME ~ /^(src|include)\//)
                fail(FILENAME ":" FNR ": #include \"" path "\": use the folder-qualified path")
            return ""
        }
        if (p[1] == "cltrain") {
            h = path
            sub(/^cltrain\//, "", h)
            sub(/\.h$/, "", h)
            if (h in pub) return pub[h]
            if (!((h ".h") in present))
                fail(FILENAME ":" FNR ": #include \"" path "\": not in the layer map of tests/layering.sh")
            return "" # present but unmapped: reported in BEGIN
        }
        if (p[1] in rank) return p[1]
        fail(FILENAME ":" FNR ": #include \"" path "\": \"" p[1] "/\" is no layer folder")
        return ""
    }
    BEGIN {
        rank["runtime"] = 0; rank["io"] = 1; rank["ops"] = 2; rank["data"] = 3; rank["nn"] = 3; rank["dist"] = 3
        rank["train"] = 4; rank["cli"] = 5
        n = split(map, lines, "\n")
        for (i = 1; i <= n; i++)
            if (split(lines[i], kv, " ") == 2) pub[kv[1]] = kv[2]
        n = split(pubs, ps, " ")
        for (i = 1; i <= n; i++) {
            present[ps[i]] = 1
            h = ps[i]
            sub(/\.h$/, "", h)
            if (!(h in pub)) fail("include/cltrain/" ps[i] ": not in the layer map of tests/layering.sh")
        }
    }
    FNR == 1 { layer = file_layer(FILENAME) }
    /^[ \t]*#[ \t]*include[ \t]*[<"]/ {
        if (!match($0, /[<"][^<>"]*[>"]/)) next
        path = substr($0, RSTART + 1, RLENGTH - 2)
        if (substr($0, RSTART, 1) == "<" && path !~ /^(cltrain|runtime|io|ops|data|nn|train|cli)\//)
            next # a system or third-party header
        includes++
        t = target_layer(path)
        if (layer == "" || t == "") next
        if (FILENAME ~ /^src\/cli\// && t != "cli" && substr(path, 1, 8) != "cltrain/") {
            fail(FILENAME ":" FNR ": cli includes \"" path "\": the program uses only the installed headers (cltrain/...)")
            next
        }
        if (rank[t] > rank[layer])
            fail(FILENAME ":" FNR ": " layer " includes \"" path "\" (" t "): a lower layer must not include a higher one")
        else if (rank[t] == rank[layer] && t != layer)
            fail(FILENAME ":" FNR ": " layer " includes \"" path "\" (" t "): siblings of one rank must not include each other")
    }
    END {
        printf "layering: %d files, %d includes checked, ", nfiles, includes
        if (errors) { printf "%d violations\n", errors; exit 1 }
        print "no violations"
    }' "${files[@]}"
)

# self_test ROOT: the check must report exactly the violations injected into a copy of ROOT.
self_test() {
    local root=$1 tmp d rt da op tn cl before after expected
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064 # expand now: tmp is local
    trap "rm -rf '$tmp'" EXIT
    mkdir "$tmp/copy"
    for d in src include tools examples; do
        if [ -d "$root/$d" ]; then cp -R "$root/$d" "$tmp/copy/"; fi
    done
    check "$tmp/copy" > "$tmp/before" || true

    first() { (cd "$tmp/copy" && find "$1" -type f -name '*.c' 2> /dev/null | sort | head -n 1) || true; }
    rt=$(first src/runtime)
    da=$(first src/data)
    op=$(first src/ops)
    tn=$(first src/train)
    cl=$(first src/cli)
    if [ -z "$rt" ] || [ -z "$da" ] || [ -z "$op" ] || [ -z "$tn" ] || [ -z "$cl" ]; then
        fail "self-test: no .c file in one of src/runtime, src/data, src/ops, src/train, src/cli"
    fi
    inject() { # FILE LINE: appends LINE (on a line of its own), prints its line number
        if [ -n "$(tail -c 1 "$tmp/copy/$1")" ]; then echo >> "$tmp/copy/$1"; fi
        printf '%s\n' "$2" >> "$tmp/copy/$1"
        wc -l < "$tmp/copy/$1" | tr -d ' '
    }
    expected=$(
        n=$(inject "$rt" '#include "train/checkpoint_internal.h"')
        echo "$rt:$n: runtime includes \"train/checkpoint_internal.h\" (train): a lower layer must not include a higher one"
        n=$(inject "$da" '#include "nn/x.h"')
        echo "$da:$n: data includes \"nn/x.h\" (nn): siblings of one rank must not include each other"
        n=$(inject "$op" '#include "x.h"')
        echo "$op:$n: #include \"x.h\": use the folder-qualified path"
        n=$(inject "$cl" '#include "runtime/internal.h"')
        echo "$cl:$n: cli includes \"runtime/internal.h\": the program uses only the installed headers (cltrain/...)"
        inject "$tn" '#include "nn/x.h"' > /dev/null # allowed: train is above nn
    )

    if check "$tmp/copy" > "$tmp/after"; then
        cat "$tmp/after"
        fail "self-test: the check passed a tree with injected violations"
    fi
    grep -v '^layering: ' "$tmp/before" | sort > "$tmp/before.v" || true
    grep -v '^layering: ' "$tmp/after" | sort > "$tmp/after.v" || true
    after=$(comm -13 "$tmp/before.v" "$tmp/after.v")
    before=$(printf '%s\n' "$expected" | sort)
    if [ "$after" != "$before" ]; then
        echo "expected these new violations:"
        printf '%s\n' "$before"
        echo "got:"
        printf '%s\n' "$after"
        fail "self-test: other violations than the injected ones (above)"
    fi
    echo "layering self-test: the 4 injected violations were reported, the allowed include was not"
}

mode=check
if [ "${1:-}" = --self-test ]; then
    mode=self_test
    shift
fi
root=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
"$mode" "$root"
