#!/usr/bin/env bash
# The public headers need no OpenCL headers: cltrain/cltrain.h and every public header but
# cltrain/opencl.h compile alone (C11, -Wpedantic) with include/ on the include path ahead of a
# folder whose CL/cl.h and OpenCL/opencl.h stop the compiler with an #error. cltrain/opencl.h,
# which is meant to include <CL/cl.h>, must hit that #error: the check that the trap works.
# Usage: public_headers.sh INCLUDE_DIR [CC...]. Seen failing with <CL/cl.h> put back into
# cltrain/device.h: "cltrain/cltrain.h includes an OpenCL header".
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
[ $# -ge 1 ] || fail "usage: public_headers.sh INCLUDE_DIR [CC...]"
inc=$1
shift
cc=("$@")
[ ${#cc[@]} -gt 0 ] || cc=("${CC:-cc}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/CL" "$tmp/OpenCL"
for h in CL/cl.h CL/opencl.h CL/cl_platform.h OpenCL/opencl.h; do
    echo '#error "an OpenCL header was included"' > "$tmp/$h"
done

compile() { # compile HEADER: 0 when it compiles without reaching an OpenCL header
    printf '#include <cltrain/%s>\ntypedef int nonempty;\n' "$1" \
        | "${cc[@]}" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$tmp" -I"$inc/.." \
            -x c - > "$tmp/log" 2>&1
}

bad=0
n=0
for f in "$inc"/*.h; do
    h=${f##*/}
    [ "$h" = opencl.h ] && continue
    n=$((n + 1))
    if ! compile "$h"; then
        if grep -q "an OpenCL header was included" "$tmp/log"; then
            echo "cltrain/$h includes an OpenCL header"
        else
            echo "cltrain/$h does not compile alone:"; sed 's/^/  /' "$tmp/log"
        fi
        bad=1
    fi
done
if compile opencl.h || ! grep -q "an OpenCL header was included" "$tmp/log"; then
    echo "cltrain/opencl.h compiled without reaching <CL/cl.h>: the trap does not work"
    bad=1
fi
echo "public_headers: $n headers compiled without OpenCL headers"
[ "$bad" = 0 ] || fail "see above"
