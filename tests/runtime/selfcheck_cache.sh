#!/bin/sh
# The cltrain program end to end: `selfcheck` compiles on the first run and loads from the disk
# cache on the second (a fresh CLTRAIN_CACHE_DIR), `devices` marks the chosen device and emits
# valid JSON, a bad selector fails with one line naming what was found, and an unknown command
# exits 2. Needs CLTRAIN_BIN (set by meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to read devices --json"
make_tmp
cache="$tmp/cache"
mkdir "$cache"

# -- selfcheck twice: compiled, then cached --------------------------------------------------
CLTRAIN_CACHE_DIR="$cache" "$CLTRAIN_BIN" selfcheck >"$tmp/first" 2>"$tmp/first.err" ||
    fail "first selfcheck exited $?: $(cat "$tmp/first.err")"
CLTRAIN_CACHE_DIR="$cache" "$CLTRAIN_BIN" selfcheck >"$tmp/second" 2>"$tmp/second.err" ||
    fail "second selfcheck exited $?: $(cat "$tmp/second.err")"
first_n=$(sed -n 's/.*programs compiled \([0-9][0-9]*\).*/\1/p' "$tmp/first")
[ -n "$first_n" ] ||
    fail "first selfcheck does not say 'programs compiled N': $(cat "$tmp/first")"
[ "$first_n" -ge 1 ] || fail "first selfcheck compiled $first_n programs in an empty cache"
grep -q "programs compiled 0" "$tmp/second" ||
    fail "second selfcheck compiled again: $(cat "$tmp/second")"
grep -q "loaded from the disk cache [1-9]" "$tmp/second" ||
    fail "second selfcheck did not load from the disk cache: $(cat "$tmp/second")"
grep -qF "$cache" "$tmp/second" ||
    fail "selfcheck does not name the cache folder: $(cat "$tmp/second")"
ls "$cache"/*.clbin >/dev/null 2>&1 || fail "no .clbin file in $cache"

# -- bad selectors: non-zero exit, exactly one line on stderr naming the found device --------
# The name of the device `auto` picks, from the JSON listing.
"$CLTRAIN_BIN" devices --json >"$tmp/devices.json" 2>"$tmp/devices.err" ||
    fail "devices --json exited $?: $(cat "$tmp/devices.err")"
python3 -m json.tool "$tmp/devices.json" >/dev/null || fail "devices --json is not valid JSON"
name=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print([x for x in d["devices"] if x["index"] == d["selected"]][0]["name"])' "$tmp/devices.json") ||
    fail "devices --json has no selected device"
[ -n "$name" ] || fail "the selected device has no name"

# check_bad (tests/lib.sh): exit 1 or 2, one line on stderr, naming the found device
check_bad "CLTRAIN_DEVICE=nosuchdevice devices" "$name" -- \
    env CLTRAIN_DEVICE=nosuchdevice "$CLTRAIN_BIN" devices
check_bad "devices --device 9" "$name" -- "$CLTRAIN_BIN" devices --device 9
check_bad "selfcheck --device nosuchdevice" "$name" -- "$CLTRAIN_BIN" selfcheck --device nosuchdevice

# -- devices marks the chosen one ------------------------------------------------------------
"$CLTRAIN_BIN" devices >"$tmp/devices.txt" 2>"$tmp/devices.err" ||
    fail "devices exited $?: $(cat "$tmp/devices.err")"
marked=$(grep -c '^\* *[0-9]' "$tmp/devices.txt" || true)
[ "$marked" -eq 1 ] || fail "devices marks $marked devices with '*': $(cat "$tmp/devices.txt")"
grep '^\* *[0-9]' "$tmp/devices.txt" | grep -qF "$(printf '%.40s' "$name")" ||
    fail "the '*' line is not the selected device '$name'"

# -- usage errors exit 2 ---------------------------------------------------------------------
rc=0
"$CLTRAIN_BIN" bogus-command >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "bogus-command exited $rc, expected 2"
rc=0
"$CLTRAIN_BIN" devices --bogus-flag >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "devices --bogus-flag exited $rc, expected 2"

echo "selfcheck_cache: ok (first run compiled $first_n, the second loaded from the cache)"
