#!/usr/bin/env bash
# Installs a configured build folder into a temporary directory (meson install --destdir) and
# checks what a user of the library gets: libcltrain.so -> .so.0 -> .so.0.1.0 (soname
# libcltrain.so.0), libcltrain.a, the public headers under include/cltrain/ (exactly those
# cltrain.h includes and opencl.h, each compiling alone), cltrain.pc, the programs cltrain and cltrain-tune.
# Then builds programs with nothing but `pkg-config --cflags --libs cltrain` and runs them: a ctx
# create/free; the cltrain program itself from a copy of src/cli/ alone (so an include of a private
# header, or a call the shared library does not export, fails here), which must pass its
# self-check and print the installed program's --help; and the examples: custom_loop.c (a loop of
# one's own on the public loss API; it exits 1 unless its loss falls) and train_mlp.c for 5 steps
# (needs Fashion-MNIST: $CLTRAIN_DATA_DIR or /usr/share/datasets).
# Seen failing with #include "runtime/program_internal.h" put into src/cli/devices.c: "src/cli/
# does not build against the installed headers alone".
# Usage: tools/install_check.sh BUILD_DIR (already configured; built here if it is not).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: tools/install_check.sh BUILD_DIR}
build=$(cd "$build" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CLTRAIN_CACHE_DIR=${CLTRAIN_CACHE_DIR:-$build/cltrain-cache} # reuse the built kernels

meson install -C "$build" --destdir "$tmp/root" --quiet
opt() { meson introspect "$build" --buildoptions \
    | python3 -c "import json,sys; print([o['value'] for o in json.load(sys.stdin) if o['name']=='$1'][0])"; }
prefix=$(opt prefix)
root=$tmp/root$prefix
libdir=$root/$(opt libdir)
incdir=$root/$(opt includedir)
bindir=$root/$(opt bindir)
version=$(meson introspect "$build" --projectinfo | python3 -c "import json,sys; print(json.load(sys.stdin)['version'])")

fail=0
check() { # check DESCRIPTION TEST-ARGS...
    local what=$1; shift
    if test "$@"; then echo "  ok   $what"; else echo "  FAIL $what"; fail=1; fi
}
echo "install_check: installed into $tmp/root (prefix $prefix)"
check "libcltrain.so -> libcltrain.so.0" "$(readlink "$libdir/libcltrain.so" 2>/dev/null)" = libcltrain.so.0
check "libcltrain.so.0 -> libcltrain.so.$version" \
    "$(readlink "$libdir/libcltrain.so.0" 2>/dev/null)" = "libcltrain.so.$version"
check "libcltrain.so.$version" -f "$libdir/libcltrain.so.$version"
soname=$(objdump -p "$libdir/libcltrain.so.$version" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
check "soname libcltrain.so.0" "$soname" = libcltrain.so.0
check "libcltrain.a" -f "$libdir/libcltrain.a"
# The public headers are cltrain.h, the headers it includes, and opencl.h (raw OpenCL access,
# kept out of cltrain.h); exactly those are installed (include/cltrain/ may still hold a
# private header on its way to src/).
public=$( {
    echo cltrain.h
    echo opencl.h
    sed -n 's|^#include "cltrain/\(.*\.h\)"$|\1|p' include/cltrain/cltrain.h
} | sort -u)
for h in $public; do
    check "include/cltrain/$h" -f "$incdir/cltrain/$h"
done
installed=$(find "$incdir/cltrain" -mindepth 1 -printf '%f\n' | sort)
check "nothing else in include/cltrain/ ($(echo "$installed" | tr '\n' ' '))" \
    "$installed" = "$public"
check "pkgconfig/cltrain.pc" -f "$libdir/pkgconfig/cltrain.pc"
check "bin/cltrain" -x "$bindir/cltrain"
check "bin/cltrain-tune" -x "$bindir/cltrain-tune"
mandir=$root/$(opt mandir)
for page in cltrain cltrain-tune; do
    if [ -f "docs/$page.1" ]; then check "man1/$page.1" -f "$mandir/man1/$page.1"; fi
done
((fail == 0)) || { echo "install_check: files missing"; exit 1; }

# Build against the installed copy only: the .pc says prefix=$prefix, the sysroot maps its
# -I and -L paths into the temporary root. The library is found at run time through
# LD_LIBRARY_PATH, and ldd must show it is the installed one.
export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$tmp/root
flags=$(pkg-config --cflags --libs cltrain)
echo "install_check: pkg-config --cflags --libs cltrain: $flags"
cc=${CC:-cc}
cat > "$tmp/ctx.c" <<'C'
#include <cltrain/cltrain.h>
#include <stdio.h>
int main(void)
{
    struct clt_ctx_params p = clt_ctx_default_params();
    clt_ctx *ctx = NULL;
    clt_status st = clt_ctx_create(&ctx, &p);
    if (st != CLT_OK) {
        fprintf(stderr, "clt_ctx_create: %s: %s\n", clt_status_name(st), clt_last_errmsg());
        return 1;
    }
    printf("ctx created and freed: %s\n", clt_status_str(st));
    clt_ctx_free(ctx);
    return 0;
}
C
# shellcheck disable=SC2086 # the flags are words
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/ctx" "$tmp/ctx.c" $flags
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# (ldd's output captured first: `ldd | grep -q` under pipefail failed when grep, done at the
# first match, closed the pipe while ldd still wrote: SIGPIPE, a flaky failure)
libs=$(ldd "$tmp/ctx")
grep -q "libcltrain.so.0 => $libdir/" <<<"$libs" \
    || { echo "install_check: ctx does not load the installed libcltrain"; echo "$libs"; exit 1; }
"$tmp/ctx"
# Each installed header compiles alone, so it includes only installed (public) headers.
cflags=$(pkg-config --cflags cltrain)
for h in $public; do
    # shellcheck disable=SC2086
    printf '#include <cltrain/%s>\ntypedef int nonempty;\n' "$h" \
        | "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -x c - $cflags \
        || { echo "install_check: cltrain/$h does not compile alone"; fail=1; }
done
((fail == 0)) || exit 1
# The program is the public API's first user: its sources, copied apart from the rest of src/
# (their own headers are "cli/..."), build against the installed headers and link the shared
# library, which exports the public API only. It uses raw OpenCL (cltrain/opencl.h), so it
# links the OpenCL library too, as any user of that header does.
mkdir -p "$tmp/clisrc/cli"
cp src/cli/*.c src/cli/*.h "$tmp/clisrc/cli/"
opencl_libs=$(pkg-config --libs OpenCL 2>/dev/null || echo -lOpenCL)
# shellcheck disable=SC2086
"$cc" -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wpedantic -Werror -I"$tmp/clisrc" \
    -o "$tmp/cltrain" "$tmp"/clisrc/cli/*.c $flags $opencl_libs -lm \
    || { echo "install_check: src/cli/ does not build against the installed headers alone"; exit 1; }
"$tmp/cltrain" selfcheck \
    || { echo "install_check: the cltrain built from the installed headers failed its self-check"; exit 1; }
check "the cltrain built from the installed headers prints the installed cltrain's --help" \
    "$("$tmp/cltrain" --help 2>&1)" = "$("$bindir/cltrain" --help 2>&1)"
((fail == 0)) || exit 1
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/custom_loop" examples/custom_loop.c $flags
(cd "$tmp" && ./custom_loop) \
    || { echo "install_check: examples/custom_loop.c failed against the installed library"; exit 1; }
if [ -f examples/train_mlp.c ]; then
    # shellcheck disable=SC2086
    "$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/train_mlp" examples/train_mlp.c $flags
    (cd "$tmp" && ./train_mlp 5 "$tmp/train_mlp.safetensors")
    check "train_mlp wrote its checkpoint" -s "$tmp/train_mlp.safetensors"
    ((fail == 0)) || exit 1
fi
echo "install_check: ok"
