#!/bin/sh
# cltrain-tune from the command line: --shape times the shapes given instead of the presets'
# (one variant besides CLBlast, one repeat: seconds on PoCL), prints them in its table, checks
# each result against CLBlast's, and writes the tuning file with the choice; --dtype bf16 then
# tunes the 16-bit choice (a variant that takes 16-bit operands, its result checked the same
# way) into "gemm16" and keeps the file's f32 choice; a bad --shape, --repeats or --dtype,
# --dtype with --clblast or an unknown flag exits 2, its first line naming it, and writes no file.
# Needs CLTRAIN_TUNE_BIN (meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_TUNE_BIN
need_python3 "to read the tuning file"
make_tmp

variant="direct tm4 tn64 vw16 veck0 mdim0 wg1x1"
set +e
"$CLTRAIN_TUNE_BIN" --shape 33x7x5 --shape 127x1x33 --layout NN --variant "$variant" \
    --repeats 1 --output "$tmp/tune.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "--shape run: exit $rc: $(cat "$tmp/err")"
grep -q '33x7x5 *127x1x33 *total ms' "$tmp/out" || fail "the table has not the shapes given"
grep -q "^$variant " "$tmp/out" || fail "no row for $variant (a result off CLBlast's is dropped)"
grep -q "^-> NN small.*: $variant," "$tmp/out" || fail "the choice is not $variant"
[ -s "$tmp/tune.json" ] || fail "no tuning file written"
python3 - "$tmp/tune.json" <<'EOF' || fail "the tuning file does not hold the choice"
import json, sys
small = json.load(open(sys.argv[1]))["gemm"]["NN"]["small"]
assert (small["kernel"], small["tm"], small["tn"], small["vw"]) == ("direct", 4, 64, 16), small
EOF

# --dtype bf16: the variant above cannot take 16-bit operands (not a candidate); a packed one
variant16="direct tm4 tn16 vw4 veck0 mdim0 wg1x1 kb16 bm2 bn1"
set +e
"$CLTRAIN_TUNE_BIN" --shape 33x7x5 --shape 127x1x33 --layout NN --variant "$variant" \
    --variant "$variant16" --dtype bf16 --repeats 1 --output "$tmp/tune.json" >"$tmp/out" \
    2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "--dtype bf16 run: exit $rc: $(cat "$tmp/err")"
grep -q "keeping the f32 choices of $tmp/tune.json" "$tmp/out" || fail "--dtype: no note"
if grep -q "^$variant " "$tmp/out"; then fail "--dtype bf16 timed $variant (f32 only)"; fi
grep -q "^-> NN small 16-bit.*: $variant16," "$tmp/out" ||
    fail "the 16-bit choice is not $variant16"
python3 - "$tmp/tune.json" <<'EOF' || fail "the tuning file does not hold both choices"
import json, sys
t = json.load(open(sys.argv[1]))
small, s16 = t["gemm"]["NN"]["small"], t["gemm16"]["NN"]["small"]
assert (small["kernel"], small["tm"], small["tn"], small["kb"]) == ("direct", 4, 64, 0), small
assert (s16["kernel"], s16["tm"], s16["tn"], s16["kb"], s16["bm"]) == ("direct", 4, 16, 16, 2), s16
assert s16["gflops"] > 0, s16
EOF

# bad flags: exit 2, the first stderr line naming the flag (an unknown flag's is followed by the
# usage), no file
for args in "--shape 0x4x4" "--shape 4x4" "--shape 4x4x4x" "--shape 4x4x4q" "--shape 4x-4x4" \
    "--shape 2000000x1x1" "--shape 20000x20000x1" "--repeats 0" "--repeats 5x" "--dtype f64" \
    "--dtype bf16 --clblast" "--bogus"; do
    set +e
    # shellcheck disable=SC2086
    "$CLTRAIN_TUNE_BIN" $args --output "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    [ "$rc" -eq 2 ] || fail "$args: exit $rc, expected 2"
    flag=${args%% *}
    head -n 1 "$tmp/err" | grep -q -- "$flag" || fail "$args: the error does not name $flag"
    [ ! -e "$tmp/bad.json" ] || fail "$args: a file was written"
done
echo "tune_cli: ok"
