#!/bin/sh
# cltrain predict on CSV with and without a label column. A checkpoint of 5 input features takes
# a file of 5 columns as inputs alone (even with --label-column 0, whose cells are then no
# labels) and one of 6 columns as inputs and a label; --no-labels forces inputs alone. Both
# give the same predictions; with labels a last line gives the accuracy (stderr when the
# predictions go to stdout, stdout with --output) or, regression, the mean squared error.
# Other column counts, --no-labels on a labelled file and eval on a file without labels are
# one-line errors naming the counts. Needs CLTRAIN_BIN (set by meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the test data"
make_tmp
write_csv "$tmp" 120 30
D="csv:$tmp/train.csv,$tmp/test.csv"
R="csv:$tmp/train_reg.csv,$tmp/test_reg.csv"
# the test files without their label column (the first), and with only 4 of the 5 features
cut -d, -f2- "$tmp/test.csv" >"$tmp/inputs.csv"
cut -d, -f2- "$tmp/test_reg.csv" >"$tmp/inputs_reg.csv"
cut -d, -f3- "$tmp/test.csv" >"$tmp/four.csv"

check_ok "train" -- "$CLTRAIN_BIN" train --data "$D" --label-column 0 \
    --model "linear 8, relu, linear 3" --epochs 2 --batch-size 16 --save "$tmp/c.ckpt"

# -- with labels: the predictions and the accuracy --------------------------------------------
check_ok "predict with labels" "accuracy" "(30 samples)" -- "$CLTRAIN_BIN" predict \
    --load "$tmp/c.ckpt" --input "$tmp/test.csv" --label-column 0 --output "$tmp/labelled.csv"
grep -q "^test split of .*: accuracy [0-9.]*% (30 samples)$" "$tmp/out" ||
    fail "predict with labels and --output: no accuracy line on stdout: $(cat "$tmp/out")"
check_ok "predict with labels to stdout" -- "$CLTRAIN_BIN" predict \
    --load "$tmp/c.ckpt" --input "$tmp/test.csv" --label-column 0
grep -q "accuracy [0-9.]*% (30 samples)" "$tmp/err" ||
    fail "predict with labels to stdout: no accuracy line on stderr: $(cat "$tmp/err")"
grep -q "accuracy" "$tmp/out" && fail "predict to stdout: the accuracy line is in the CSV"
[ "$(wc -l <"$tmp/out")" -eq 31 ] || fail "predict to stdout: $(wc -l <"$tmp/out") lines, not 31"

# -- without labels: detected from the column count, or forced ---------------------------------
check_ok "predict without labels (--label-column 0 given)" -- "$CLTRAIN_BIN" predict \
    --load "$tmp/c.ckpt" --input "$tmp/inputs.csv" --label-column 0 --output "$tmp/auto.csv"
grep -q "accuracy" "$tmp/out" "$tmp/err" && fail "predict without labels reports an accuracy"
cmp -s "$tmp/labelled.csv" "$tmp/auto.csv" ||
    fail "predict without labels: other predictions than with them: $(head -3 "$tmp/auto.csv")"
check_ok "predict --no-labels" -- "$CLTRAIN_BIN" predict --load "$tmp/c.ckpt" \
    --input "$tmp/inputs.csv" --no-labels --output "$tmp/forced.csv"
cmp -s "$tmp/labelled.csv" "$tmp/forced.csv" ||
    fail "predict --no-labels: other predictions: $(head -3 "$tmp/forced.csv")"
check_ok "predict --data csv: without labels" -- "$CLTRAIN_BIN" predict --load "$tmp/c.ckpt" \
    --data "csv:$tmp/inputs.csv,$tmp/inputs.csv" --output "$tmp/data.csv"
cmp -s "$tmp/labelled.csv" "$tmp/data.csv" || fail "predict --data csv: other predictions"

# -- errors --------------------------------------------------------------------------------------
check_bad "predict --no-labels on a labelled file" "c.ckpt" "5 input features" "6 columns" \
    "--no-labels" -- "$CLTRAIN_BIN" predict --load "$tmp/c.ckpt" --input "$tmp/test.csv" \
    --no-labels
check_bad "predict on 4 columns" "5 input features" "4 columns" "expected 5" "or 6" -- \
    "$CLTRAIN_BIN" predict --load "$tmp/c.ckpt" --input "$tmp/four.csv"
check_bad "eval without labels" "5 columns" "eval needs labels" "predict" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/c.ckpt" --data "csv:$tmp/inputs.csv,$tmp/inputs.csv"
# inputs whose every column would pass for a label (small non-negative integers, as pixels)
python3 - "$tmp" <<'PY'
import random, sys
r = random.Random(5)
with open(sys.argv[1] + "/ints.csv", "w") as f:
    for _ in range(20):
        f.write(",".join(str(r.randrange(3)) for _ in range(5)) + "\n")
PY
check_bad "eval on integer inputs without labels" "5 columns" "eval needs labels" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/c.ckpt" --data "csv:$tmp/ints.csv,$tmp/ints.csv"
check_ok "predict on integer inputs without labels" -- "$CLTRAIN_BIN" predict \
    --load "$tmp/c.ckpt" --input "$tmp/ints.csv" --output "$tmp/ints.out"
[ "$(wc -l <"$tmp/ints.out")" -eq 21 ] || fail "predict on integer inputs: not 20 predictions"

# -- regression: the values, and the mean squared error with targets -------------------------
check_ok "train regression" -- "$CLTRAIN_BIN" train --data "$R" --label-column 0 \
    --task regression --model "linear 8, tanh, linear 1" --epochs 2 --batch-size 16 \
    --save "$tmp/r.ckpt"
check_ok "predict regression with targets" "mean squared error" -- "$CLTRAIN_BIN" predict \
    --load "$tmp/r.ckpt" --input "$tmp/test_reg.csv" --label-column 0 --output "$tmp/rl.csv"
check_ok "predict regression without targets" -- "$CLTRAIN_BIN" predict \
    --load "$tmp/r.ckpt" --input "$tmp/inputs_reg.csv" --output "$tmp/ru.csv"
cmp -s "$tmp/rl.csv" "$tmp/ru.csv" || fail "regression: other values without targets"
echo "ok: predict with and without labels"
