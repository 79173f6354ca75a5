#!/bin/sh
# The cltrain program end to end on tiny data written by this script: train on an IDX folder
# (200 train / 50 test gzipped 4x4 images, label a function of the pixels) with a checkpoint
# and JSON-lines metrics, the resident and streaming loaders (same results), Ctrl-C, eval with
# a confusion matrix, predict to CSV, resume, CSV classification and regression, --augment
# (both loaders alike), a layernorm model that trains, and bench. Needs CLTRAIN_BIN (set by
# meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the test data"
make_tmp

# -- data (tests/lib.sh) ---------------------------------------------------------------------------
# an IDX folder of 4x4 images, 200 train and 50 test, 3 classes about equal; CSV files with 5
# features, 120 train and 30 test rows, for classification and regression
write_idx "$tmp/idx" 200 50
write_csv "$tmp" 120 30

ck="$tmp/model.safetensors"
metrics="$tmp/metrics.jsonl"
M="linear 16, relu, linear 3"

# -- train: 2 epochs, epoch summaries with host waits, a checkpoint, JSON-lines metrics ----------
check_ok "train" -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 --batch-size 32 \
    --lr 0.01 --log-every 3 --save "$ck" --metrics "$metrics"
cp "$tmp/out" "$tmp/train.out"
[ "$(grep -c '^epoch [12]/2: train loss .*host waits' "$tmp/train.out")" -eq 2 ] ||
    fail "train: expected 2 epoch summaries with host waits: $(cat "$tmp/train.out")"
grep -q "test accuracy" "$tmp/train.out" || fail "train: no test accuracy: $(cat "$tmp/train.out")"
grep -q "saved $ck (step 14)" "$tmp/train.out" ||
    fail "train: no 'saved ... (step 14)' (7 steps per epoch): $(cat "$tmp/train.out")"
[ -s "$ck" ] || fail "train: no checkpoint $ck"
[ -s "$metrics" ] || fail "train: no metrics file"
python3 - "$metrics" <<'EOF' || fail "metrics: $(cat "$metrics")"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
kinds = [e["event"] for e in events]
assert kinds.count("epoch") == 2, kinds
assert kinds.count("eval") == 2, kinds
assert kinds.count("log") == 4, kinds  # steps 3, 6, 9, 12 of 14
for e in events:
    if e["event"] == "epoch":
        assert e["train_loss"] > 0 and e["epoch_s"] >= 0, e
    if e["event"] == "eval":
        assert 0 <= e["test_accuracy"] <= 1, e
EOF
ls "$tmp" | grep -q '\.tmp\.' && fail "train: a temporary file was left: $(ls "$tmp")"

# -- the loaders: auto picks resident for this tiny set; streaming (pageable, prefetch 2) gives
# the same epoch summaries as --data-on-device, up to the timings --------------------------------
grep -q "data resident on the device (auto: .* is within 25% of the" "$tmp/train.out" ||
    fail "train: header does not say resident (auto): $(head -1 "$tmp/train.out")"
summaries() { # the epoch summaries without the timings and wait counts
    sed -n 's/^\(epoch [0-9]*\/[0-9]*: train loss .*\), [0-9.]* s (.*/\1/p' "$1"
}
check_ok "resident" -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 --batch-size 32 \
    --lr 0.01 --log-every 3 --data-on-device
grep -q "data resident on the device (requested" "$tmp/out" || fail "resident: $(head -1 "$tmp/out")"
summaries "$tmp/out" >"$tmp/resident.sum"
[ "$(wc -l <"$tmp/resident.sum")" -eq 2 ] || fail "resident: summaries: $(cat "$tmp/out")"
check_ok "streaming" -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 --batch-size 32 \
    --lr 0.01 --log-every 3 --loader streaming --prefetch 2 --no-pin
grep -q "data streamed through 2 pageable staging buffers (requested" "$tmp/out" ||
    fail "streaming: header: $(head -1 "$tmp/out")"
# epoch 2: log points 9 and 12, the epoch end's read (14), one evaluation
grep -q "^epoch 2/2: .*host waits 4 (log 3, eval 1); loader thread waits [0-9]* (" "$tmp/out" ||
    fail "streaming: epoch 2 summary: $(cat "$tmp/out")"
summaries "$tmp/out" >"$tmp/streaming.sum"
cmp -s "$tmp/resident.sum" "$tmp/streaming.sum" ||
    fail "streaming and resident differ: $(cat "$tmp/resident.sum" "$tmp/streaming.sum")"
# --augment flip,shift=2: on the device, the same batches with either loader, no extra host
# wait (the same counts as above), and other losses than without augmentation
check_ok "augment resident" -- "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 \
    --batch-size 32 --lr 0.01 --log-every 3 --loader resident --augment flip,shift=2
grep -q "(requested; .*), augmented flip,shift=2; model" "$tmp/out" ||
    fail "augment resident: header: $(head -1 "$tmp/out")"
grep -q "^epoch 2/2: .*host waits 4 (log 3, eval 1)" "$tmp/out" ||
    fail "augment resident: epoch 2 summary: $(cat "$tmp/out")"
summaries "$tmp/out" >"$tmp/aug_resident.sum"
check_ok "augment streaming" -- "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 \
    --batch-size 32 --lr 0.01 --log-every 3 --loader streaming --augment shift=2,flip
grep -q "^epoch 2/2: .*host waits 4 (log 3, eval 1); loader thread waits [0-9]* (" "$tmp/out" ||
    fail "augment streaming: epoch 2 summary: $(cat "$tmp/out")"
summaries "$tmp/out" >"$tmp/aug_streaming.sum"
cmp -s "$tmp/aug_resident.sum" "$tmp/aug_streaming.sum" ||
    fail "augmented streaming and resident differ: $(cat "$tmp/aug_resident.sum" \
        "$tmp/aug_streaming.sum")"
! cmp -s "$tmp/aug_resident.sum" "$tmp/resident.sum" ||
    fail "--augment changed no loss: $(cat "$tmp/aug_resident.sum")"
# --profile with streaming: kernels, the loader's uploads, and the compute queue's wait for data
# (one per batch: 2 epochs x 7 batches), the same results as without profiling
check_ok "profile" -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 --batch-size 32 \
    --lr 0.01 --log-every 3 --loader streaming --prefetch 2 --no-pin --profile
grep -Eq "^  waiting for data \[compute idle\] +14 " "$tmp/out" ||
    fail "profile: no data-wait row: $(cat "$tmp/out")"
grep -Eq "^  loader upload \(inputs\) \[upload\] +14 " "$tmp/out" ||
    fail "profile: no upload row: $(cat "$tmp/out")"
summaries "$tmp/out" | cmp -s "$tmp/resident.sum" - ||
    fail "profile changes the results: $(cat "$tmp/out")"

# -- Ctrl-C: stops at a step boundary, saves the checkpoint, exit code 130 ----------------------
python3 - "$tmp/int.ckpt" "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" \
    --epochs 100000 --batch-size 32 --log-every 1 --loader streaming --save "$tmp/int.ckpt" \
    <<'EOF' || fail "Ctrl-C"
import os, signal, subprocess, sys
ck, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
for line in p.stdout:
    if line.startswith("epoch 1/100000 step 2/"):
        break
p.send_signal(signal.SIGINT)
out, err = p.communicate(timeout=300)
assert p.returncode == 130, (p.returncode, err)
lines = err.strip().splitlines()
assert len(lines) == 1 and "interrupted after step" in lines[0], err
assert "checkpoint written to " + ck in lines[0], err
assert os.path.getsize(ck) > 0
EOF
check_ok "eval after Ctrl-C" -- "$CLTRAIN_BIN" eval --load "$tmp/int.ckpt" --data "idx:$tmp/idx"
grep -q "accuracy" "$tmp/out" || fail "eval after Ctrl-C: $(cat "$tmp/out")"

# -- eval with a confusion matrix ------------------------------------------------------------
check_ok "eval" -- "$CLTRAIN_BIN" eval --load "$ck" --data "idx:$tmp/idx" --confusion
grep -q "accuracy [0-9.]*% (50 samples)" "$tmp/out" || fail "eval: no accuracy: $(cat "$tmp/out")"
grep -q "confusion matrix" "$tmp/out" || fail "eval: no confusion matrix: $(cat "$tmp/out")"
# three rows "i  n0  n1  n2" whose counts add up to the 50 test samples
total=$(awk '/confusion matrix/ {on = 1; next}
    on && NF == 4 && $1 ~ /^[0-2]$/ {s += $2 + $3 + $4; r++}
    END {print (r == 3 ? s : -1)}' "$tmp/out")
[ "$total" = 50 ] ||
    fail "eval: the confusion matrix is not 3 rows holding 50 samples: $(cat "$tmp/out")"

# -- predict ---------------------------------------------------------------------------------
check_ok "predict" -- \
    "$CLTRAIN_BIN" predict --load "$ck" --data "idx:$tmp/idx" --output "$tmp/pred.csv"
python3 - "$tmp/pred.csv" <<'EOF' || fail "predict: $(head -3 "$tmp/pred.csv")"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert rows[0] == ["index", "predicted", "p0", "p1", "p2"], rows[0]
assert len(rows) == 51, len(rows)
for i, r in enumerate(rows[1:]):
    assert int(r[0]) == i and 0 <= int(r[1]) < 3, r
    p = [float(v) for v in r[2:]]
    assert abs(sum(p) - 1) < 1e-4, r
    assert p.index(max(p)) == int(r[1]), r
EOF

# -- resume to 3 epochs ------------------------------------------------------------------------
check_ok "resume" -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 3 --batch-size 32 \
    --lr 0.01 --log-every 3 --resume "$ck" --save "$ck"
grep -q "resuming" "$tmp/out" || fail "resume: no 'resuming': $(cat "$tmp/out")"
grep -q "^epoch 3/3: train loss" "$tmp/out" || fail "resume: no epoch 3: $(cat "$tmp/out")"
grep -q "^epoch [12]/3: train loss" "$tmp/out" &&
    fail "resume: ran epochs 1-2 again: $(cat "$tmp/out")"
grep -q "saved $ck (step 21)" "$tmp/out" || fail "resume: no save at step 21: $(cat "$tmp/out")"

# -- CSV classification and regression -------------------------------------------------------
check_ok "csv train" -- \
    "$CLTRAIN_BIN" train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 \
    --model "linear 8, relu, linear 3" --epochs 2 --batch-size 16 --save "$tmp/csv.ckpt"
grep -q "5 features" "$tmp/out" || fail "csv: not 5 features: $(cat "$tmp/out")"
grep -q "test accuracy" "$tmp/out" || fail "csv: no test accuracy: $(cat "$tmp/out")"
check_ok "csv eval" -- "$CLTRAIN_BIN" eval --load "$tmp/csv.ckpt" \
    --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0
grep -q "accuracy [0-9.]*% (30 samples)" "$tmp/out" || fail "csv eval: $(cat "$tmp/out")"
# --input-shape makes CSV rows images for conv and pooling; eval takes the shape from the file
check_ok "csv conv" -- \
    "$CLTRAIN_BIN" train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 \
    --input-shape 1,1,5 --model "conv 4 k1, relu, avgpool 1, globalavgpool, linear 3" --epochs 1 \
    --batch-size 16 --save "$tmp/csvconv.ckpt"
grep -q "test accuracy" "$tmp/out" || fail "csv conv: no test accuracy: $(cat "$tmp/out")"
check_ok "csv conv eval" -- "$CLTRAIN_BIN" eval --load "$tmp/csvconv.ckpt" \
    --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0
grep -q "accuracy [0-9.]*% (30 samples)" "$tmp/out" || fail "csv conv eval: $(cat "$tmp/out")"

# a layernorm model trains: finite epoch losses, the last below the first
check_ok "csv layernorm" -- \
    "$CLTRAIN_BIN" train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 \
    --model "linear 16, layernorm, relu, linear 3" --epochs 4 --batch-size 16 --lr 0.01
sed -n 's/^epoch [0-9]*\/4: train loss \([0-9.]*\),.*/\1/p' "$tmp/out" >"$tmp/ln.loss"
awk 'NR == 1 { first = $1 } { last = $1; n++ } END { exit !(n == 4 && last < first) }' \
    "$tmp/ln.loss" ||
    fail "csv layernorm: losses $(tr '\n' ' ' <"$tmp/ln.loss"): $(cat "$tmp/out")"

check_ok "regression" -- "$CLTRAIN_BIN" train --data "csv:$tmp/train_reg.csv,$tmp/test_reg.csv" \
    --label-column 0 --task regression --model "linear 8, relu, linear 1" --epochs 3 \
    --batch-size 16 --lr 0.01 --save "$tmp/reg.ckpt"
grep -q "test loss" "$tmp/out" || fail "regression: no test loss: $(cat "$tmp/out")"
grep -q "test accuracy" "$tmp/out" && fail "regression: reports an accuracy: $(cat "$tmp/out")"
check_ok "regression eval" -- "$CLTRAIN_BIN" eval --load "$tmp/reg.ckpt" \
    --data "csv:$tmp/train_reg.csv,$tmp/test_reg.csv" --label-column 0
grep -q "mean squared error" "$tmp/out" || fail "regression eval: $(cat "$tmp/out")"
check_ok "regression predict" -- "$CLTRAIN_BIN" predict --load "$tmp/reg.ckpt" \
    --data "csv:$tmp/train_reg.csv,$tmp/test_reg.csv" --label-column 0 --output "$tmp/reg.csv"
[ "$(head -1 "$tmp/reg.csv")" = "index,value" ] ||
    fail "regression predict header: $(head -1 "$tmp/reg.csv")"
[ "$(wc -l <"$tmp/reg.csv")" -eq 31 ] || fail "regression predict: $(wc -l <"$tmp/reg.csv") lines"

# -- memory: --accumulate, --dry-run, --auto-batch under CLTRAIN_MAX_MEMORY ---------------------
numbers() { # the losses and accuracies of the epoch summaries, one per line
    summaries "$1" | tr ',' '\n' | sed -n 's/.* \([0-9][0-9.]*\)%*$/\1/p'
}
# 32 x 2 micro-batches against batch 64: 4 optimizer steps an epoch either way, the same
# summaries within printing and fp32 rounding (losses 2e-4; accuracy: one test sample, 2 points)
check_ok "accumulate" -- "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 \
    --batch-size 32 --accumulate 2 --lr 0.01 --log-every 2 --loader resident
grep -q "; batch 32 x 2 micro-batches (effective 64);" "$tmp/out" ||
    fail "accumulate: header: $(head -1 "$tmp/out")"
grep -q "^epoch 2/2 step 8/8 " "$tmp/out" || fail "accumulate: steps: $(cat "$tmp/out")"
numbers "$tmp/out" >"$tmp/acc.num"
check_ok "batch 64" -- "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 \
    --batch-size 64 --lr 0.01 --log-every 2 --loader resident
numbers "$tmp/out" >"$tmp/b64.num"
[ "$(wc -l <"$tmp/acc.num")" -eq 6 ] || fail "accumulate: summaries: $(cat "$tmp/acc.num")"
paste "$tmp/acc.num" "$tmp/b64.num" | awk '{ d = $1 - $2; if (d < 0) d = -d;
    if (d > (NR % 3 == 0 ? 2.0 : 2e-4)) { print "differ: " $0; exit 1 } }' ||
    fail "accumulate: 32 x 2 and 64 differ: $(paste "$tmp/acc.num" "$tmp/b64.num")"

# the dry run: builds, takes one step, reports (estimate = set-up = peak), trains nothing
dry() { # dry BATCH: the set-up's bytes
    check_ok "dry run $1" -- "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" \
        --batch-size "$1" --loader resident --dry-run --save "$tmp/dry.ckpt" >/dev/null
    line=$(grep "^dry run: " "$tmp/out") || fail "dry run: $(cat "$tmp/out")"
    set -- $(echo "$line" | sed 's/[^(]*(\([0-9]*\) bytes)[^(]*(\([0-9]*\) bytes)[^(]*([^)]*)[^(]*(\([0-9]*\) bytes).*/\1 \2 \3/')
    [ "$1" = "$2" ] && [ "$1" = "$3" ] || fail "dry run: set-up, peak, estimate differ: $line"
    grep -q "^estimate at micro-batch .*, the next larger: " "$tmp/out" ||
        fail "dry run: no next larger estimate: $(cat "$tmp/out")"
    grep -q "train loss" "$tmp/out" && fail "dry run trained: $(cat "$tmp/out")"
    [ -e "$tmp/dry.ckpt" ] && fail "dry run wrote a checkpoint"
    echo "$1"
}
e64=$(dry 64)
e128=$(dry 128)
[ "$e128" -gt "$e64" ] || fail "dry run: batch 128 needs $e128 bytes, 64 needs $e64"

# a cap between them: --auto-batch turns 128 into 64 x 2, with the same results as asking for
# 64 x 2 uncapped (the same bits: the summaries are compared as text)
cap=$(((e64 + e128) / 2))
check_ok "auto-batch" -- env CLTRAIN_MAX_MEMORY=$cap "$CLTRAIN_BIN" train --data "idx:$tmp/idx" \
    --model "$M" --epochs 2 --batch-size 128 --auto-batch --lr 0.01 --loader resident
grep -q "^auto-batch: out of device memory: .*; retrying with micro-batch 64 x accumulate 2" \
    "$tmp/out" || fail "auto-batch: no retry line: $(cat "$tmp/out")"
grep -q "^auto-batch: chose micro-batch 64 x accumulate 2 (effective batch 128) after 1 " \
    "$tmp/out" || fail "auto-batch: no choice line: $(cat "$tmp/out")"
summaries "$tmp/out" >"$tmp/auto.sum"
check_ok "64 x 2" -- "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 2 \
    --batch-size 64 --accumulate 2 --lr 0.01 --loader resident
summaries "$tmp/out" >"$tmp/ref.sum"
[ "$(wc -l <"$tmp/auto.sum")" -eq 2 ] && cmp -s "$tmp/auto.sum" "$tmp/ref.sum" ||
    fail "auto-batch: $(cat "$tmp/auto.sum") against 64 x 2: $(cat "$tmp/ref.sum")"

# --memory: the report before and after, with the next larger batch's estimate
check_ok "memory" -- "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 1 \
    --batch-size 32 --memory
[ "$(grep -c "^device memory on " "$tmp/out")" -eq 2 ] || fail "--memory: $(cat "$tmp/out")"
grep -q "^estimate at micro-batch 64, the next larger: " "$tmp/out" || fail "--memory: $(cat "$tmp/out")"

# -- bench -------------------------------------------------------------------------------------
check_ok "bench" -- \
    "$CLTRAIN_BIN" bench --model "linear 32, relu, linear 10" --batch-size 16 --steps 5 \
    --warmup 1 --repeats 1
grep -q "[0-9.]* steps/s" "$tmp/out" || fail "bench: no steps/s: $(cat "$tmp/out")"
# mixed precision as training runs it (bf16; fp16 with the loss scaler)
for p in bf16 fp16; do
    check_ok "bench --precision $p" -- "$CLTRAIN_BIN" bench --model "linear 32, relu, linear 10" \
        --batch-size 16 --steps 5 --warmup 1 --repeats 1 --precision $p
    grep -q "precision $p: [0-9.]* steps/s" "$tmp/out" ||
        fail "bench --precision $p: $(cat "$tmp/out")"
done
# the loader benchmark runs every loader (its figures are not checked: no timed tests)
check_ok "bench --data" -- "$CLTRAIN_BIN" bench --data "idx:$tmp/idx" --model "$M" --batch-size 32 \
    --epochs 1 --warmup 2
for w in "resident " "streaming, pinned " "streaming, pageable " "upload bandwidth"; do
    grep -q "$w" "$tmp/out" || fail "bench --data: no '$w': $(cat "$tmp/out")"
done

echo "cli_train: all passed"
