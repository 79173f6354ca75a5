#!/usr/bin/env bash
# A checkpoint saved through the C API with clt_train_default_params() (tests/cli/api_checkpoint.c:
# nothing about the model or the data repeated in the trainer's parameters) loads in
# `cltrain eval` and `cltrain predict`, and eval's loss on the test split is the one the
# program measured in-process: the spec, task, classes and input scaling (standardisation whose
# arrays the program freed before saving) came from the model and the loader. Classification
# and regression.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
need_exe CLTRAIN_BIN
prog=${1:-}
[ -x "$prog" ] || fail "usage: api_checkpoint.sh API_CHECKPOINT_PROGRAM"
make_tmp
write_csv "$tmp" 160 60
D="csv:$tmp/train.csv,$tmp/test.csv"
R="csv:$tmp/train_reg.csv,$tmp/test_reg.csv"

# round TASK DATA MODEL WHAT: trains and saves through the API, then evaluates with the CLI
round() {
    check_ok "$1: train and save through the C API" "loss " -- \
        "$prog" "$2" 0 "$1" "$3" "$tmp/$1.safetensors"
    want=$(sed -n 's/^loss //p' "$tmp/out")
    check_ok "$1: cltrain eval loads the API's checkpoint" "$4" -- \
        "$CLTRAIN_BIN" eval --load "$tmp/$1.safetensors" --data "$2" --label-column 0
    got=$(sed -n 's/.*: \(loss\|mean squared error\) \([0-9.e+-]*\)[ ,].*/\2/p' "$tmp/out")
    python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); \
sys.exit(0 if abs(a - b) <= 1e-3 * max(1.0, abs(a)) else 1)" "$want" "${got:-nan}" ||
        fail "$1: cltrain eval's loss ${got:-?} differs from the API's $want: $(cat "$tmp/out")"
    check_ok "$1: cltrain predict loads the API's checkpoint" -- \
        "$CLTRAIN_BIN" predict --load "$tmp/$1.safetensors" --data "$2" --label-column 0 \
        --output "$tmp/$1.csv"
    [ "$(wc -l <"$tmp/$1.csv")" -eq 61 ] || fail "$1: predict wrote $(wc -l <"$tmp/$1.csv") lines"
}
round classification "$D" "linear 16, relu, linear 3" "accuracy"
round regression "$R" "linear 8, tanh, linear 1" "mean squared error"
