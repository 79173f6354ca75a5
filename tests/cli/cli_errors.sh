#!/bin/sh
# The cltrain program's failures: bad data files (missing folder, IDX with a wrong magic, short
# data or mismatched counts, CSV with a non-numeric cell), bad model specs, bad flags and
# damaged checkpoints, a failing data loader each end with exit code 1 or 2 (never a crash: not >= 128), exactly ONE
# line on stderr naming the file or flag and what was expected, and no --save file (nor a
# temporary one; a run that fails during training writes its last complete step's). Tiny data
# sets are written by python3 into a temporary folder.
# Needs CLTRAIN_BIN (set by meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the test data"
make_tmp

# -- data: idx folders (gzipped, write_idx in tests/lib.sh), CSV files, checkpoints ---------------
# write_ckpt FILE [damage]: a cltrain checkpoint written by hand (struct + json) for the model
# "linear 8, relu, linear 3" on 16 features. damage: truncate (cut in the data), hlen (header
# length past the end), shapes (0.weight stored as (16, 8)), i64 (0.weight stored as I64),
# huge (one weight of 2.weight 1e38: finite), overflow (every weight 1e20: each below the
# load bound of 1e30, the two layers' product beyond float32).
write_ckpt() {
    python3 - "$@" <<'EOF'
import json, struct, sys
path = sys.argv[1]
damage = sys.argv[2] if len(sys.argv) > 2 else ""
shapes = [("0.weight", [8, 16]), ("0.bias", [8]), ("2.weight", [3, 8]), ("2.bias", [3])]
if damage == "shapes":
    shapes[0] = ("0.weight", [16, 8])
header, data = {}, b""
for name, shape in shapes:
    n = 1
    for s in shape:
        n *= s
    vals = [((k * 7919) % 13 - 6) / 40.0 for k in range(n)]
    if damage == "huge" and name == "2.weight":
        vals[5] = 1e38
    if damage == "overflow" and name.endswith("weight"):
        vals = [1e20] * n
    dtype = "F32"
    blob = struct.pack("<%df" % n, *vals)
    if damage == "i64" and name == "0.weight":
        dtype, blob = "I64", struct.pack("<%dq" % n, *range(n))
    header[name] = {"dtype": dtype, "shape": shape,
                    "data_offsets": [len(data), len(data) + len(blob)]}
    data += blob
header["__metadata__"] = {
    "format": "cltrain-1", "model": "linear 8, relu, linear 3", "task": "classification",
    "features": "16", "classes": "3", "input_scale": "0.00392156886", "input_mean": "0",
    "input_std": "1", "step": "0", "epoch": "0", "seed": "0"}
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
out = struct.pack("<Q", len(h)) + h + data
if damage == "truncate":
    out = out[:len(out) - 20]
if damage == "hlen":
    out = struct.pack("<Q", len(out)) + out[8:]
open(path, "wb").write(out)
EOF
}

write_idx "$tmp/good" 40 12
write_idx "$tmp/magic" 40 12 magic
write_idx "$tmp/short" 40 12 short
write_idx "$tmp/count" 40 12 count
printf 'a,b,label\n1,2,0\n3,4,1\n5,6,0\n' >"$tmp/good.csv"
printf 'a,b,label\n1,2,0\n3,x7,1\n5,6,0\n' >"$tmp/bad.csv"
write_ckpt "$tmp/good.ckpt"
write_ckpt "$tmp/truncated.ckpt" truncate
write_ckpt "$tmp/hlen.ckpt" hlen
write_ckpt "$tmp/shapes.ckpt" shapes
write_ckpt "$tmp/i64.ckpt" i64
write_ckpt "$tmp/huge.ckpt" huge
write_ckpt "$tmp/overflow.ckpt" overflow
save="$tmp/saves/model.safetensors"
mkdir "$tmp/saves"

# -- positive controls: the files above are fine when undamaged --------------------------------
"$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "linear 8, relu, linear 3" --steps 1 \
    --batch-size 8 --quiet >"$tmp/ok.out" 2>"$tmp/ok.err" ||
    fail "training on the undamaged idx data failed: $(cat "$tmp/ok.err")"
"$CLTRAIN_BIN" eval --load "$tmp/good.ckpt" --data "idx:$tmp/good" >"$tmp/ok.out" \
    2>"$tmp/ok.err" || fail "eval of the hand-written checkpoint failed: $(cat "$tmp/ok.err")"
grep -q "accuracy" "$tmp/ok.out" || fail "eval printed no accuracy: $(cat "$tmp/ok.out")"

# check_bad (tests/lib.sh): exit 1 or 2, one stderr line holding every needle, and no --save
# output (nor a temporary file) in $check_bad_dir
check_bad_dir="$tmp/saves"

train() { # common flags of the failing training runs
    "$CLTRAIN_BIN" train --steps 1 --batch-size 8 --save "$save" "$@"
}
M="linear 8, relu, linear 3"

# data
check_bad "missing data folder" "/nonexistent" -- train --data idx:/nonexistent --model "$M"
check_bad "IDX wrong magic" "train-images-idx3-ubyte" "magic" "0x00000803" -- \
    train --data "idx:$tmp/magic" --model "$M"
check_bad "IDX truncated data" "train-images-idx3-ubyte" "truncated" -- \
    train --data "idx:$tmp/short" --model "$M"
check_bad "IDX count mismatch" "40 images" "39 labels" -- train --data "idx:$tmp/count" --model "$M"
check_bad "CSV non-numeric cell" "bad.csv" "line 3" "column 2" "x7" -- \
    train --data "csv:$tmp/bad.csv" --model "linear 4, linear 2"
# issue 12: 1-based labels (1..3) are refused (class 0 never appears) with a pointer to
# --classes, which sets the number of classes and trains; its value parses strictly
python3 - "$tmp/onebased.csv" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("a,b,label\n")
    for i in range(24):
        f.write("%d,%d,%d\n" % (i % 5, (i * 7) % 3, 1 + i % 3))
EOF
check_bad "1-based labels" "onebased.csv" "never appear in the training split (0)" \
    "--classes N" -- train --data "csv:$tmp/onebased.csv" --model "linear 4"
"$CLTRAIN_BIN" train --data "csv:$tmp/onebased.csv" --classes 4 --model "linear 8, relu, linear 4" \
    --steps 2 --batch-size 8 --quiet >"$tmp/ok.out" 2>"$tmp/ok.err" ||
    fail "--classes 4 on 1-based labels failed: $(cat "$tmp/ok.err")"
echo "ok: --classes 4 trains on 1-based labels"
check_bad "--classes below a label" "onebased.csv" "label 3" "3 classes" -- \
    train --data "csv:$tmp/onebased.csv" --classes 3 --model "linear 3"
check_bad "--input-shape 1,x" "--input-shape 1,x" "C,H,W" -- \
    train --data "idx:$tmp/good" --model "$M" --input-shape 1,x
check_bad "--input-shape against the data" "--input-shape 1,4,5" "20 elements" "16 features" -- \
    train --data "idx:$tmp/good" --model "$M" --input-shape 1,4,5
# on (T, C) inputs a linear layer acts on each position: a head without a flatten gives T rows
# of outputs per sample, which the loss does not take (a usage error before anything runs)
check_bad --code 2 "a per-position head on (T, C) inputs" "--model" "output per sample is 4x3" \
    "(T, C) = (4, 4)" "put a flatten before the last linear layer" -- \
    train --data "idx:$tmp/good" --model "$M" --input-shape 4,4
check_bad --code 2 "bench: a per-position head on (T, C) inputs" "output per sample is 4x3" \
    "flatten" -- "$CLTRAIN_BIN" bench --model "$M" --features 16 --classes 3 --input-shape 4,4 \
    --steps 1
# attention: H must divide D, and it needs a sequence
check_bad --code 2 "attention heads not dividing D" "layer 1 (attention 3 causal)" \
    "3 heads do not divide the width D = 4" -- \
    train --data "idx:$tmp/good" --model "attention 3 causal, flatten, linear 3" \
    --input-shape 4,4
check_bad --code 2 "attention on images" "layer 1 (attention 2)" "(T, D), got 1x4x4" \
    "--input-shape T,D" -- train --data "idx:$tmp/good" --model "attention 2, flatten, linear 3"
check_bad "conv on flat CSV data" "conv 2 k1" "(C,H,W)" -- \
    train --data "csv:$tmp/good.csv" --model "conv 2 k1, flatten, linear 2"
check_bad "batchnorm, relu before the first weighted layer in bf16" "layer 2 (relu)" \
    "layer 1 (batchnorm)" "mixed precision (bf16)" -- \
    train --data "idx:$tmp/good" --model "batchnorm, relu, linear 3" --precision bf16
check_bad "CLTRAIN_GEMM=fast" 'CLTRAIN_GEMM="fast"' "expected own, clblast or auto" -- \
    env CLTRAIN_GEMM=fast "$CLTRAIN_BIN" train --steps 1 --batch-size 8 --save "$save" \
    --data "idx:$tmp/good" --model "$M"
check_bad "bench --precision int8" "--precision int8" "expected fp32, bf16 or fp16" -- \
    "$CLTRAIN_BIN" bench --precision int8 --steps 1
check_bad "--classes 4x" "--classes 4x" "positive integer" -- \
    train --data "csv:$tmp/onebased.csv" --classes 4x --model "linear 4"
check_bad "--classes 70000" "--classes 70000" "at most 65536" -- \
    train --data "csv:$tmp/onebased.csv" --classes 70000 --model "linear 4"
check_bad "--classes with regression" "--classes" "classification" -- \
    train --data "csv:$tmp/onebased.csv" --task regression --classes 4 --model "linear 1"

# model specs: a spec that does not parse or does not fit the data is a usage error (exit 2),
# as a bad flag value is
check_bad --code 2 "unknown layer" "model spec" "conv2" "linear, relu" -- \
    train --data "idx:$tmp/good" --model "linear 8, conv2 3, linear 3"
# optimizer flags: --betas B1,B2 each in [0, 1), --clip-grad a norm >= 0
for betas in 1,0.9 0.9,1 0.9 0.9, ,0.9 -0.1,0.9 0.9,0.99,0.5 0.9,x nan,0.9 0.9,inf; do
    check_bad --code 2 "--betas $betas" "--betas $betas" "B1,B2" "[0, 1)" -- \
        train --data "idx:$tmp/good" --model "$M" --optimizer adamw --betas "$betas"
done
check_bad --code 2 "--betas with --beta1" "--betas and --beta1 exclude each other" -- \
    train --data "idx:$tmp/good" --model "$M" --betas 0.9,0.95 --beta1 0.8
for clip in -1 x nan inf; do
    check_bad --code 2 "--clip-grad $clip" "--clip-grad" -- \
        train --data "idx:$tmp/good" --model "$M" --clip-grad "$clip"
done
check_bad --code 2 "misspelt layer" "model spec" 'unknown layer "linaer"' -- \
    train --data "idx:$tmp/good" --model "linaer 10"
check_bad --code 2 "missing width" "model spec" '"linear"' "width" -- \
    train --data "idx:$tmp/good" --model "linear"
check_bad --code 2 "width 0" "model spec" '"linear 0"' "positive" -- \
    train --data "idx:$tmp/good" --model "linear 0, relu, linear 3"
check_bad --code 2 "last layer != classes" "5" "3 classes" -- \
    train --data "idx:$tmp/good" --model "linear 8, relu, linear 5"
check_bad --code 2 "bench: misspelt layer" 'unknown layer "linaer"' -- \
    "$CLTRAIN_BIN" bench --model "linaer 3" --steps 1
# an argument with a '/', or one word with a dot, is a spec file's path: a missing one is named
check_bad --code 2 "--model ../nope.txt" "--model ../nope.txt: no such file" -- \
    train --data "idx:$tmp/good" --model ../nope.txt
check_bad --code 2 "--model nope.spec" "--model nope.spec: no such file" -- \
    train --data "idx:$tmp/good" --model nope.spec
check_bad --code 2 "bench --model a/b" "--model a/b: no such file" -- \
    "$CLTRAIN_BIN" bench --model a/b --steps 1
printf 'linear 8, relu\nlinear 3\n' >"$tmp/net.spec"
"$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "$tmp/net.spec" --steps 1 --batch-size 8 \
    --quiet >"$tmp/ok.out" 2>"$tmp/ok.err" || fail "--model FILE failed: $(cat "$tmp/ok.err")"
echo "ok: --model FILE reads the file"
# unknown data sets: usage errors in every command that reads --data
check_bad --code 2 "train: unknown data set" "unknown data set 'nosuchset'" -- \
    train --data nosuchset --model "$M"
check_bad --code 2 "eval: unknown data set" "unknown data set 'nosuchset'" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/good.ckpt" --data nosuchset
check_bad --code 2 "bench: unknown data set" "unknown data set 'nosuchset'" -- \
    "$CLTRAIN_BIN" bench --data nosuchset --epochs 1
# issue 12: empty layers were skipped; an activation after the last linear layer was trained
check_bad "empty layer" "model spec" "layer 2" "empty layer" -- \
    train --data "idx:$tmp/good" --model "linear 8,,relu, linear 3"
check_bad "relu after the last linear" "layer 4 (relu)" "after the last linear layer" -- \
    train --data "idx:$tmp/good" --model "linear 8, relu, linear 3, relu"

# flags
check_bad "--lr 0" "--lr 0" "positive" -- train --data "idx:$tmp/good" --model "$M" --lr 0
check_bad "--batch-size 0" "--batch-size 0" "positive" -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "$M" --batch-size 0 --save "$save"
check_bad "unknown flag" "--frobnicate" -- train --data "idx:$tmp/good" --frobnicate 3
check_bad "flag without value" "--epochs" -- train --data "idx:$tmp/good" --model "$M" --epochs
check_bad "--prefetch 1" "--prefetch 1" "2 to 64" -- \
    train --data "idx:$tmp/good" --model "$M" --loader streaming --prefetch 1
# issue 12: --prefetch 1000000 allocated 7 GiB before failing; numbers parse strictly
# (--label-column 4294967296 trained on column 0, eval --label-column abc meant 0)
check_bad "--prefetch 1000000" "--prefetch 1000000" "2 to 64" -- \
    train --data "idx:$tmp/good" --model "$M" --loader streaming --prefetch 1000000
check_bad "--label-column 2^32" "--label-column 4294967296" "[-1, 2147483647]" -- \
    train --data "idx:$tmp/good" --model "$M" --label-column 4294967296
check_bad "eval --label-column abc" "--label-column abc" "[-1, 2147483647]" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/nothere.ckpt" --data "idx:$tmp/good" --label-column abc
check_bad "predict --label-column 1x" "--label-column 1x" "integer" -- \
    "$CLTRAIN_BIN" predict --load "$tmp/nothere.ckpt" --data "idx:$tmp/good" --label-column 1x
check_bad "--epochs +3" "--epochs +3" "positive integer" -- \
    train --data "idx:$tmp/good" --model "$M" --epochs +3
check_bad "--lr with a space" "--lr  0.1" "positive number" -- \
    train --data "idx:$tmp/good" --model "$M" --lr " 0.1"
check_bad "unknown loader" "--loader sometimes" "streaming" -- \
    train --data "idx:$tmp/good" --model "$M" --loader sometimes
check_bad "--augment shift=x" '--augment "flip,shift=x"' "shift needs a whole number of pixels" \
    "shift=2" -- train --data "idx:$tmp/good" --model "$M" --augment flip,shift=x
check_bad "--augment rotate" '--augment "rotate"' 'unknown augmentation "rotate"' -- \
    train --data "idx:$tmp/good" --model "$M" --augment rotate
check_bad "--augment cutout=-2" "cutout=-2" "expected 0 to 65536" -- \
    train --data "idx:$tmp/good" --model "$M" --augment cutout=-2
check_bad "--augment flip,flip" "flip is given twice" -- \
    train --data "idx:$tmp/good" --model "$M" --augment flip,flip
check_bad "--augment with flat CSV data" "--augment flip" "good.csv" "flat samples" -- \
    train --data "csv:$tmp/good.csv" --model "linear 4, linear 2" --augment flip
check_bad "--no-pin with a resident loader" "--no-pin" "resident" -- \
    train --data "idx:$tmp/good" --model "$M" --data-on-device --no-pin
check_bad "--data-on-device against --loader streaming" "--data-on-device" "--loader streaming" -- \
    train --data "idx:$tmp/good" --model "$M" --data-on-device --loader streaming
# a loader failure (injected in the streaming thread at batch 1) ends the run with its message,
# and the checkpoint of the one complete step is written (tests/cli/cli_plan.sh resumes one)
check_bad_dir_was=$check_bad_dir
check_bad_dir=""
check_bad "loader failure" "data loader" "injected" "batch 1" \
    "the checkpoint of step 1, the last complete one, was written to $save" -- \
    env CLTRAIN_LOADER_FAIL_AT=1 "$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "$M" \
    --loader streaming --steps 4 --batch-size 8 --save "$save"
[ -s "$save" ] || fail "loader failure: no checkpoint $save"
rm -f "$save"
check_bad_dir=$check_bad_dir_was
# issue 12: the hook's number parses strictly ("+1" was batch 1; 2^64 saturated and never fired)
check_bad "CLTRAIN_LOADER_FAIL_AT=+1" "CLTRAIN_LOADER_FAIL_AT=+1" "batch number" -- \
    env CLTRAIN_LOADER_FAIL_AT=+1 "$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "$M" \
    --loader streaming --steps 4 --batch-size 8 --save "$save"
check_bad "CLTRAIN_LOADER_FAIL_AT=2^64" "CLTRAIN_LOADER_FAIL_AT=18446744073709551616" \
    "batch number" -- env CLTRAIN_LOADER_FAIL_AT=18446744073709551616 "$CLTRAIN_BIN" train \
    --data "idx:$tmp/good" --model "$M" --loader streaming --steps 4 --batch-size 8 --save "$save"

# checkpoints
check_bad "eval of a truncated checkpoint" "truncated.ckpt" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/truncated.ckpt" --data "idx:$tmp/good"
check_bad "eval, header length past the end" "hlen.ckpt" "header length" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/hlen.ckpt" --data "idx:$tmp/good"
check_bad "eval, wrong shapes" "shapes.ckpt" "0.weight" "f32 [16, 8]" "needs f32 [8, 16]" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/shapes.ckpt" --data "idx:$tmp/good"
check_bad "eval, an I64 weight" "i64.ckpt" '"0.weight" is i64 [8, 16]' "needs f32 [8, 16]" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/i64.ckpt" --data "idx:$tmp/good"
# a finite but huge weight is refused on load, naming the file and the tensor (not trained into
# a NaN blamed on --lr); weights below the bound that still overflow together: the NaN of the
# run's first steps names the file it started from
check_bad "--init with a weight of 1e38" "huge.ckpt" '"2.weight"' "1e+38" "overflows float32" -- \
    train --data "idx:$tmp/good" --init "$tmp/huge.ckpt"
check_bad "--resume with a weight of 1e38" "huge.ckpt" '"2.weight"' "1e+38" -- \
    train --data "idx:$tmp/good" --resume "$tmp/huge.ckpt"
check_bad "eval with a weight of 1e38" "huge.ckpt" '"2.weight"' "1e+38" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/huge.ckpt" --data "idx:$tmp/good"
# (the file has no checksums: its note comes first on stderr, then the one error line)
rc=0
"$CLTRAIN_BIN" train --data "idx:$tmp/good" --init "$tmp/overflow.ckpt" --steps 2 \
    --batch-size 8 --log-every 1 --save "$save" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
[ "$rc" -eq 1 ] || fail "--init whose weights overflow: exit code $rc: $(cat "$tmp/bad.err")"
grep -v "^cltrain: note: " "$tmp/bad.err" >"$tmp/bad.line" || true
[ "$(wc -l <"$tmp/bad.line")" -eq 1 ] &&
    grep -q "^cltrain: the training loss became .* between steps 1 and 1 .*started from" \
        "$tmp/bad.line" && grep -qF "$tmp/overflow.ckpt: its weights likely overflow the forward" \
        "$tmp/bad.line" ||
    fail "--init whose weights overflow: $(cat "$tmp/bad.err")"
[ -z "$(ls -A "$tmp/saves")" ] || fail "--init whose weights overflow: left $(ls -A "$tmp/saves")"
echo "ok: --init whose weights overflow: $(cat "$tmp/bad.line")"
check_bad "eval, missing checkpoint" "nothere.ckpt" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/nothere.ckpt" --data "idx:$tmp/good"
check_bad "resume from a damaged checkpoint" "truncated.ckpt" -- \
    train --data "idx:$tmp/good" --resume "$tmp/truncated.ckpt"

# out of device memory (a cap of 16 KiB): exit 1, the message, then the memory report with the
# estimates for the batch and the next larger one, then the three remedies in order; no file
set +e
CLTRAIN_MAX_MEMORY=16k "$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "$M" --batch-size 128 \
    --loader resident --save "$save" >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "out of memory: exit code $rc: $(cat "$tmp/bad.err")"
head -1 "$tmp/bad.err" | grep -q "^cltrain: out of device memory: .*over the cap" ||
    fail "out of memory: first line: $(cat "$tmp/bad.err")"
for n in "device memory on " "cap 16.0 KiB (CLTRAIN_MAX_MEMORY)" "peak" \
    "estimate at micro-batch 128: " "(exceeds the 16.0 KiB cap)" \
    "estimate at micro-batch 256, the next larger: " \
    "remedies, in this order: a smaller --batch-size; then mixed precision" \
    "then --accumulate N with a smaller --batch-size" "--auto-batch"; do
    grep -qF -- "$n" "$tmp/bad.err" || fail "out of memory: stderr lacks '$n': $(cat "$tmp/bad.err")"
done
[ -z "$(ls -A "$tmp/saves")" ] || fail "out of memory: left files behind: $(ls -A "$tmp/saves")"
echo "ok: out of memory: $(head -1 "$tmp/bad.err")"
# out of memory in the streaming loader's staging ring: the remedies start with --prefetch
set +e
CLTRAIN_MAX_MEMORY=8k "$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "$M" --batch-size 8 \
    --steps 1 --loader streaming --prefetch 64 --save "$save" >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "staging out of memory: exit code $rc: $(cat "$tmp/bad.err")"
head -1 "$tmp/bad.err" | grep -q "requested for staging" ||
    fail "staging out of memory: first line: $(cat "$tmp/bad.err")"
grep -qF "remedies, in this order: fewer staging buffers (--prefetch 2 or 3, now 64); a smaller" \
    "$tmp/bad.err" || fail "staging out of memory: remedies: $(cat "$tmp/bad.err")"
echo "ok: staging out of memory names --prefetch"
# --auto-batch with a cap that not even micro-batch 1 fits: backs off to 1, then the same report
set +e
CLTRAIN_MAX_MEMORY=4k "$CLTRAIN_BIN" train --data "idx:$tmp/good" --model "$M" --batch-size 4 \
    --loader resident --auto-batch >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
set -e
[ "$rc" -eq 1 ] || fail "auto-batch, nothing fits: exit code $rc: $(cat "$tmp/bad.err")"
[ "$(grep -c "^auto-batch: .*retrying with micro-batch" "$tmp/bad.out")" -eq 2 ] ||
    fail "auto-batch, nothing fits: retries: $(cat "$tmp/bad.out")"
grep -q "retrying with micro-batch 1 x accumulate 4" "$tmp/bad.out" ||
    fail "auto-batch, nothing fits: $(cat "$tmp/bad.out")"
grep -qF "estimate at micro-batch 1: " "$tmp/bad.err" ||
    fail "auto-batch, nothing fits: report: $(cat "$tmp/bad.err")"
echo "ok: auto-batch down to 1"

echo "cli_errors: all passed"
