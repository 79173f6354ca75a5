#!/usr/bin/env bash
# The shared library exports exactly the public API: every function the public headers
# (include/cltrain/*.h) declare, and nothing else. Usage: exported_symbols.sh LIBCLTRAIN.so
# INCLUDE_DIR [API_DOC]. Fails on an exported symbol no public header declares (a clt__ internal, a
# helper missing `static`), on a declared function the library does not export (a declaration
# without CLT_API, or with no definition), on a declaration without CLT_API, and, given
# API_DOC (docs/api.md), on an exported function the page does not name as `clt_...` or a
# `clt_...` there that is neither exported nor a public type. Skips (77)
# without nm. Seen failing on deliberate violations: with CLT_API put on the internal
# clt__buffer_retain in src/runtime/alloc_internal.h it reported "exported but not in a public header:
# clt__buffer_retain"; with CLT_API taken off clt_status_str in status.h it reported "declared
# without CLT_API" and "declared but not exported" for clt_status_str.
set -euo pipefail
export LC_ALL=C # one collation for sort and comm
. "$(dirname "$0")/../lib.sh"
[ $# -eq 2 ] || [ $# -eq 3 ] || fail "usage: exported_symbols.sh LIBCLTRAIN.so INCLUDE_DIR [API_DOC]"
lib=$1
inc=$2
doc=${3:-}
command -v nm > /dev/null || skip "no nm (binutils)"
python=$(command -v python3) || skip "no python3"

# Every defined dynamic symbol but absolute ones (A: _end, _edata): functions (T, i) and data
# (D, B, R), so an accidentally exported global fails too (the headers declare no variables).
exported=$(nm -D --defined-only "$lib" | awk 'NF == 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' \
    | { grep -v -x -E '_init|_fini' || true; } | sort -u)

# Top-level function declarations in the headers: comments, string literals, preprocessor lines
# and extern "C" braces blanked; static/inline definitions and typedefs skipped. A declaration
# may span lines. Prints "name" or "name NOMARK" when it does not start with CLT_API.
declared=$("$python" - "$inc"/*.h <<'PY'
import re, sys
def blank(m): return re.sub(r'[^\n]', ' ', m.group(0))
for path in sys.argv[1:]:
    t = open(path).read()
    t = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\])*"', blank, t, flags=re.S)
    t = re.sub(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', blank, t, flags=re.M)
    t = re.sub(r'\bextern\s+\{', blank, t)  # extern "C" {, its string already blanked
    depth, start = 0, None
    for i, c in enumerate(t):
        if start is None and depth == 0 and not c.isspace() and c not in '};':
            start = i
        if c == '{':
            depth += 1
        elif c == '}':
            if depth == 0:
                continue  # the close of extern "C"
            depth -= 1
            if depth == 0 and start is not None:
                stmt = t[start:i]
                # a function definition (static inline) ends at its body's closing brace
                if re.match(r'\s*(static|inline)\b', stmt) and '(' in stmt.split('{', 1)[0]:
                    start = None
        elif c == ';' and depth == 0:
            stmt = t[start:i] if start is not None else ''
            start = None
            head = stmt.split('(', 1)[0]
            if '(' not in stmt or '{' in head or re.match(r'\s*(typedef|static|inline)\b', stmt):
                continue
            m = re.search(r'([A-Za-z_]\w*)\s*$', head)
            if m:
                mark = '' if re.match(r'\s*CLT_API\b', stmt) else ' NOMARK'
                print(m.group(1) + mark)
PY
)
[ -n "$declared" ] || fail "no declarations found in $inc"
[ -n "$exported" ] || fail "$lib exports no functions"

bad=0
nomark=$(printf '%s\n' "$declared" | awk '$2 == "NOMARK" { print $1 }')
if [ -n "$nomark" ]; then
    echo "declared without CLT_API:"; printf '%s\n' "$nomark" | sed 's/^/  /'; bad=1
fi
public=$(printf '%s\n' "$declared" | awk '{ print $1 }' | sort -u)
extra=$(comm -23 <(printf '%s\n' "$exported") <(printf '%s\n' "$public"))
missing=$(comm -13 <(printf '%s\n' "$exported") <(printf '%s\n' "$public"))
if [ -n "$extra" ]; then
    echo "exported but not in a public header:"; printf '%s\n' "$extra" | sed 's/^/  /'; bad=1
fi
if [ -n "$missing" ]; then
    echo "declared but not exported:"; printf '%s\n' "$missing" | sed 's/^/  /'; bad=1
fi
if [ -n "$doc" ]; then
    # whole `clt_...` terms of the page; public types (typedef names, struct and enum tags) may appear too
    named=$(grep -oE '`clt_[a-z0-9_]+`' "$doc" | tr -d '`' | sort -u)
    undocumented=$(comm -23 <(printf '%s\n' "$exported") <(printf '%s\n' "$named"))
    unknown=$(comm -13 <(printf '%s\n' "$exported") <(printf '%s\n' "$named") | while read -r w; do
        grep -qE "(typedef[^;]*[ *]$w;|^} $w;|(struct|enum) $w\b)" "$inc"/*.h || echo "$w"
    done)
    if [ -n "$undocumented" ]; then
        echo "exported but not named in $doc:"; printf '%s\n' "$undocumented" | sed 's/^/  /'; fail=1
    fi
    if [ -n "$unknown" ]; then
        echo "named in $doc but not exported:"; printf '%s\n' "$unknown" | sed 's/^/  /'; fail=1
    fi
fi
echo "exported_symbols: $(printf '%s\n' "$exported" | wc -l) exported, $(printf '%s\n' "$public" | wc -l) declared"
[ "$bad" -eq 0 ] || fail "the exports and the public headers differ (above)"
