#!/bin/sh
# The manual pages against the code: the generated regions of docs/cltrain.1 and
# docs/cltrain-tune.1 (layer kinds, presets, every command's options) are what the programs'
# tables write now (tools/gen_man.sh --check: a flag, layer kind or preset added to a table and
# not to the page fails, naming the command that regenerates the page), the hand-written text
# names no option that no command has, and both pages render with groff without a warning.
# First, on copies, the check is seen failing: a page missing the batchnorm layer entry, and one
# naming an option that does not exist.
# Usage: man_pages.sh SOURCE_ROOT BUILD_DIR (meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

[ $# -eq 2 ] || fail "usage: man_pages.sh SOURCE_ROOT BUILD_DIR"
root=$1
build=$2
gen=$root/tools/gen_man.sh
make_tmp

# the check fails on stale copies, naming the command that regenerates them
cp "$root/docs/cltrain.1" "$root/docs/cltrain-tune.1" "$tmp/"
awk '/^\\fBbatchnorm\\fR$/ || /^\\%\\fBbatchnorm\\fR$/ { getline; next } { print }' \
    "$root/docs/cltrain.1" > "$tmp/cltrain.1"
if cmp -s "$root/docs/cltrain.1" "$tmp/cltrain.1"; then fail "no batchnorm entry to remove"; fi
if MAN_DIR=$tmp "$gen" --check "$build" > "$tmp/out" 2> "$tmp/err"; then
    fail "--check passed on a page without the batchnorm entry"
fi
grep -q "regenerate it with: tools/gen_man.sh $build" "$tmp/err" ||
    fail "the failure does not name the command to run: $(cat "$tmp/err")"
grep -q '^+.*batchnorm' "$tmp/out" || fail "the difference does not show the missing entry"
cp "$root/docs/cltrain.1" "$tmp/cltrain.1"
printf '.SH BUGS\nSee \\fB\\-\\-no\\-such\\-flag\\fP.\n' >> "$tmp/cltrain.1"
if MAN_DIR=$tmp "$gen" --check "$build" > "$tmp/out" 2> "$tmp/err"; then
    fail "--check passed on a page naming --no-such-flag"
fi
grep -q 'no\\-such\\-flag' "$tmp/err" || fail "the failure does not name the unknown option"

# the pages themselves
"$gen" --check "$build" || fail "the manual pages lag the code (see above)"
command -v groff > /dev/null || skip "no groff to render the pages (their contents check passed)"
for page in cltrain cltrain-tune; do
    groff -man -Tutf8 -ww -z "$root/docs/$page.1" > "$tmp/groff" 2>&1 ||
        fail "groff failed on docs/$page.1: $(cat "$tmp/groff")"
    [ ! -s "$tmp/groff" ] || fail "groff warns on docs/$page.1: $(cat "$tmp/groff")"
done
echo "man_pages: ok"
