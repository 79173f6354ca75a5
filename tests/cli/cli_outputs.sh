#!/bin/sh
# Outputs never destroy what they should not, and write errors are errors: --save, --metrics
# and predict --output refuse a FIFO, a directory or a device node up front, follow a symlink
# (the link survives, its target is replaced), report a missing directory before training,
# clean stale temporary files of dead runs; an output that is one of the run's inputs (also
# through a symlink or a hard link) or another output is refused before training; a run whose
# output a live run writes fails at once naming that process, and kill -9 frees the output;
# predict/eval > /dev/full and a file-size limit hit while writing fail naming the file; SIGTERM
# and SIGHUP stop like Ctrl-C (exit 143 and 129, checkpoint written). Tiny CSV data written
# here. Needs CLTRAIN_BIN (set by meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

# soft_fail MESSAGE...: a failed case; the script goes on (the /dev/full case runs only when
# none came before) and fails at its end. fail (tests/lib.sh) stops at once.
failures=0
soft_fail() {
    echo "cli_outputs: FAIL: $*" >&2
    failures=$((failures + 1))
}

need_exe CLTRAIN_BIN
need_python3 "to write the data and for the signal cases"
make_tmp

# run COMMAND...: sets $rc; stdout in $tmp/out, stderr in $tmp/err; a hung command (a FIFO
# opened for writing) is killed after 60 s
run() {
    set +e
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
}
# refused LABEL PATTERN: the last run failed before training, with a message matching PATTERN
refused() {
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
        soft_fail "$1: exit code $rc (expected a refusal): $(cat "$tmp/err") $(tail -3 "$tmp/out")"
    elif grep -q '^epoch\|^cltrain: training on' "$tmp/out"; then
        soft_fail "$1: reported only after training started (exit $rc): $(cat "$tmp/err")"
    elif ! grep -q -- "$2" "$tmp/err"; then
        soft_fail "$1: message does not match '$2': $(cat "$tmp/err")"
    fi
}

# 5 features, label 0/1/2 (tests/lib.sh); 96 train and 32 test rows
write_csv "$tmp" 96 32
D="csv:$tmp/train.csv,$tmp/test.csv"
M="linear 16, relu, linear 3"
train() { # train ARGS...: a short run on the tiny data
    run "$CLTRAIN_BIN" train --data "$D" --label-column 0 --model "$M" --batch-size 16 \
        --lr 0.01 "$@"
}

# a checkpoint to evaluate and predict from
train --epochs 1 --save "$tmp/base.safetensors"
[ "$rc" -eq 0 ] || fail "base training: exit $rc: $(cat "$tmp/err")"

# -- non-regular files are refused up front and left as they were ------------------------------
mkfifo "$tmp/fifo"
train --epochs 50 --save "$tmp/fifo"
refused "--save FIFO" "fifo.*FIFO"
[ -p "$tmp/fifo" ] || soft_fail "--save FIFO: the FIFO was replaced: $(ls -l "$tmp/fifo")"
rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
train --epochs 50 --metrics "$tmp/fifo"
refused "--metrics FIFO" "fifo.*FIFO"
[ -p "$tmp/fifo" ] || soft_fail "--metrics FIFO: the FIFO was replaced"
rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
run "$CLTRAIN_BIN" predict --load "$tmp/base.safetensors" --data "$D" --label-column 0 \
    --output "$tmp/fifo"
refused "predict --output FIFO" "fifo.*FIFO"
[ -p "$tmp/fifo" ] || soft_fail "predict --output FIFO: the FIFO was replaced"

mkdir "$tmp/dir"
train --epochs 50 --save "$tmp/dir"
refused "--save directory" "dir.*directory"
[ -d "$tmp/dir" ] || soft_fail "--save directory: the directory is gone"
run "$CLTRAIN_BIN" predict --load "$tmp/base.safetensors" --data "$D" --label-column 0 \
    --output "$tmp/dir"
refused "predict --output directory" "dir.*directory"

# device nodes: a private one first (as root); /dev/full itself only once the FIFO and private
# cases showed that non-regular files are refused, so a build without the check cannot replace it
if [ "$(id -u)" -eq 0 ] && mknod "$tmp/null" c 1 3 2>/dev/null; then
    train --epochs 50 --save "$tmp/null"
    refused "--save device node" "null.*character device"
    [ -c "$tmp/null" ] || soft_fail "--save device node: the node was replaced: $(ls -l "$tmp/null")"
fi
if [ "$failures" -eq 0 ]; then
    train --epochs 50 --save /dev/full
    refused "--save /dev/full" "/dev/full.*character device"
    [ -c /dev/full ] || fail "--save /dev/full: /dev/full is no longer a character device"
else
    echo "cli_outputs: --save /dev/full skipped: non-regular outputs are not refused yet" >&2
fi
# --metrics to /dev/full (appending would not replace it, but every write would fail)
train --epochs 2 --metrics /dev/full
refused "--metrics /dev/full" "/dev/full.*character device"
[ -c /dev/full ] || fail "--metrics /dev/full: /dev/full is no longer a character device"

# -- a symlinked checkpoint: the link survives, its target is replaced -------------------------
mkdir "$tmp/real"
cp "$tmp/base.safetensors" "$tmp/real/target.safetensors"
ln -s real/target.safetensors "$tmp/link.safetensors"
train --epochs 2 --save "$tmp/link.safetensors"
[ "$rc" -eq 0 ] || soft_fail "symlink: exit $rc: $(cat "$tmp/err")"
if [ ! -L "$tmp/link.safetensors" ]; then
    soft_fail "symlink: the link was replaced by a regular file"
elif cmp -s "$tmp/base.safetensors" "$tmp/real/target.safetensors"; then
    soft_fail "symlink: the link's target was not updated"
fi
ls "$tmp" "$tmp/real" | grep -q '\.tmp\.' && soft_fail "symlink: a temporary file was left"
run "$CLTRAIN_BIN" eval --load "$tmp/real/target.safetensors" --data "$D" --label-column 0
[ "$rc" -eq 0 ] || soft_fail "symlink: eval of the target: $(cat "$tmp/err")"
# a dangling link: its target is created
ln -s real/new.safetensors "$tmp/dangling.safetensors"
train --epochs 1 --save "$tmp/dangling.safetensors"
[ "$rc" -eq 0 ] && [ -L "$tmp/dangling.safetensors" ] && [ -s "$tmp/real/new.safetensors" ] ||
    soft_fail "dangling symlink: exit $rc, $(ls -l "$tmp/dangling.safetensors" "$tmp/real"):" \
        "$(cat "$tmp/err")"

# -- a missing or read-only directory is reported before training ------------------------------
train --epochs 50 --save "$tmp/missing/model.safetensors"
refused "--save in a missing directory" "missing"
train --epochs 50 --metrics "$tmp/missing/metrics.jsonl"
refused "--metrics in a missing directory" "missing"
run "$CLTRAIN_BIN" predict --load "$tmp/base.safetensors" --data "$D" --label-column 0 \
    --output "$tmp/missing/pred.csv"
refused "predict --output in a missing directory" "missing"
mkdir "$tmp/ro"
chmod 555 "$tmp/ro"
if touch "$tmp/ro/probe" 2>/dev/null; then
    rm -f "$tmp/ro/probe"
    echo "cli_outputs: read-only directory case skipped: running as root, chmod does not" \
        "stop writes here" >&2
else
    train --epochs 50 --save "$tmp/ro/model.safetensors"
    refused "--save in a read-only directory" "ro"
fi
chmod 755 "$tmp/ro"

# -- an output may not be one of the run's inputs, nor share a file with another output ------
# same_refused LABEL FILE PATTERN: the last run was refused as a usage error (exit 2) before
# training, in one line matching PATTERN, and FILE is unchanged (its copy: $tmp/keep)
same_refused() {
    refused "$1" "$3"
    [ "$rc" -eq 2 ] || soft_fail "$1: exit code $rc, expected 2 (usage)"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || soft_fail "$1: not one line: $(cat "$tmp/err")"
    if ! cmp -s "$2" "$tmp/keep"; then
        soft_fail "$1: $2 was changed"
        cp "$tmp/keep" "$2" # for the cases after this one
    fi
}
cp "$tmp/train.csv" "$tmp/keep"
train --epochs 50 --save "$tmp/train.csv"
same_refused "--save over --data's training file" "$tmp/train.csv" \
    "^cltrain: --save .*train.csv and --data .*train.csv name the same file"
cp "$tmp/test.csv" "$tmp/keep"
ln -s test.csv "$tmp/test-link.csv"
train --epochs 50 --metrics "$tmp/test-link.csv"
same_refused "--metrics through a symlink to --data's test file" "$tmp/test.csv" \
    "--metrics .*test-link.csv and --data .*test.csv name the same file"
cp "$tmp/base.safetensors" "$tmp/keep"
run "$CLTRAIN_BIN" predict --load "$tmp/base.safetensors" --data "$D" --label-column 0 \
    --output "$tmp/base.safetensors"
same_refused "predict --output over --load" "$tmp/base.safetensors" \
    "--output .*base.safetensors and --load .*base.safetensors name the same file"
ln "$tmp/base.safetensors" "$tmp/hard.safetensors"
train --epochs 50 --init "$tmp/base.safetensors" --save "$tmp/hard.safetensors"
same_refused "--save to a hard link of --init" "$tmp/base.safetensors" \
    "--save .*hard.safetensors and --init .*base.safetensors name the same file"
train --epochs 50 --resume "$tmp/base.safetensors" --metrics "$tmp/base.safetensors"
same_refused "--metrics into --resume's checkpoint" "$tmp/base.safetensors" \
    "--metrics .*base.safetensors and --resume .*base.safetensors"
printf 'linear 16, relu, linear 3\n' >"$tmp/model.txt"
cp "$tmp/model.txt" "$tmp/keep"
run "$CLTRAIN_BIN" train --data "$D" --label-column 0 --model "$tmp/model.txt" --epochs 50 \
    --save "$tmp/model.txt"
same_refused "--save over --model's file" "$tmp/model.txt" \
    "--save .*model.txt and --model .*model.txt"
cp "$tmp/test.csv" "$tmp/keep"
run "$CLTRAIN_BIN" predict --load "$tmp/base.safetensors" --input "$tmp/test.csv" \
    --label-column 0 --output "$tmp/test.csv"
same_refused "predict --output over --input" "$tmp/test.csv" "--output .*and --input"
write_idx "$tmp/idx" 32 16
cp "$tmp/idx/t10k-labels-idx1-ubyte.gz" "$tmp/keep"
run "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --epochs 50 \
    --save "$tmp/idx/t10k-labels-idx1-ubyte.gz"
same_refused "--save over an IDX file of --data" "$tmp/idx/t10k-labels-idx1-ubyte.gz" \
    "--save .*t10k-labels-idx1-ubyte.gz and --data .*t10k-labels-idx1-ubyte.gz"
# two outputs, neither there yet: the same name in the same folder, one through a symlink
mkdir "$tmp/outdir"
ln -s outdir "$tmp/out-link"
cp "$tmp/base.safetensors" "$tmp/keep"
train --epochs 50 --save "$tmp/outdir/new.st" --metrics "$tmp/out-link/new.st"
same_refused "--save and --metrics to one new file" "$tmp/base.safetensors" \
    "--save .*new.st and --metrics .*new.st name the same file: each output needs its own"
[ -e "$tmp/outdir/new.st" ] && soft_fail "--save and --metrics to one new file: it was created"
# the same name in different folders is two files
train --epochs 1 --save "$tmp/outdir/m.st" --metrics "$tmp/real/m.st"
[ "$rc" -eq 0 ] || soft_fail "outputs of one name in two folders: exit $rc: $(cat "$tmp/err")"

# -- one writer per output: a second run fails at once naming the first; kill -9 frees it ------
lk="$tmp/locked.safetensors"
"$CLTRAIN_BIN" train --data "$D" --label-column 0 --model "$M" --batch-size 16 \
    --epochs 100000 --log-every 0 --save-every 1 --save "$lk" --metrics "$tmp/locked.jsonl" \
    >/dev/null 2>"$tmp/bg.err" &
bg=$!
trap 'kill -9 "$bg" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
i=0 # until it has saved (its lock is taken before training), at most 60 s
while [ ! -s "$lk" ] && [ "$i" -lt 600 ] && kill -0 "$bg" 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
if [ ! -s "$lk" ]; then
    soft_fail "lock: the first run did not save: $(cat "$tmp/bg.err")"
else
    for out in "--save $lk" "--metrics $tmp/locked.jsonl"; do
        t0=$(date +%s)
        train --epochs 1 $out
        t1=$(date +%s)
        want="^cltrain: ${out%% *} .*locked.* is being written by process $bg "
        [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err" ||
            soft_fail "lock: a second run with $out: exit $rc: $(cat "$tmp/err")" \
                "$(tail -2 "$tmp/out")"
        [ $((t1 - t0)) -le 10 ] || soft_fail "lock: the second run took $((t1 - t0)) s to fail"
    done
    run "$CLTRAIN_BIN" predict --load "$tmp/base.safetensors" --data "$D" --label-column 0 \
        --output "$lk"
    [ "$rc" -eq 1 ] && grep -q "process $bg " "$tmp/err" ||
        soft_fail "lock: predict --output to a locked path: exit $rc: $(cat "$tmp/err")"
    kill -0 "$bg" 2>/dev/null || soft_fail "lock: the first run ended: $(cat "$tmp/bg.err")"
fi
kill -9 "$bg" 2>/dev/null
wait "$bg" 2>/dev/null || true
[ -e "$lk.lock" ] || soft_fail "lock: no lock file $lk.lock was left by kill -9 (the case is moot)"
train --epochs 1 --save "$lk" --metrics "$tmp/locked.jsonl"
[ "$rc" -eq 0 ] || soft_fail "lock: a run after kill -9 of the holder: exit $rc: $(cat "$tmp/err")"
[ -e "$lk.lock" ] && soft_fail "lock: $lk.lock was left after a run that ended normally"
trap 'rm -rf "$tmp"' EXIT INT TERM

# -- write errors are errors ---------------------------------------------------------------------
set +e
"$CLTRAIN_BIN" eval --load "$tmp/base.safetensors" --data "$D" --label-column 0 \
    >/dev/full 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "stdout" "$tmp/err" ||
    soft_fail "eval > /dev/full: exit $rc: $(cat "$tmp/err")"
set +e
"$CLTRAIN_BIN" predict --load "$tmp/base.safetensors" --data "$D" --label-column 0 \
    >/dev/full 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "stdout" "$tmp/err" ||
    soft_fail "predict > /dev/full: exit $rc: $(cat "$tmp/err")"
[ -c /dev/full ] || fail "/dev/full is no longer a character device"

# a full disk, imitated by a file-size limit (SIGXFSZ ignored: writes fail with EFBIG): the
# metrics log (80 lines, about 10 KB) and a checkpoint of about 40 KB pass 4 blocks
set +e
(ulimit -f 4 && trap '' XFSZ && exec "$CLTRAIN_BIN" train --data "$D" --label-column 0 \
    --model "$M" --batch-size 16 --epochs 20 --log-every 1 --metrics "$tmp/full.jsonl") \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "full.jsonl" "$tmp/err" ||
    soft_fail "--metrics past the file-size limit: exit $rc: $(cat "$tmp/err")"
# (the kernels for the wide model are compiled and cached first: PoCL's own files need room)
run "$CLTRAIN_BIN" train --data "$D" --label-column 0 --model "linear 2048, relu, linear 3" \
    --batch-size 16 --epochs 1
[ "$rc" -eq 0 ] || soft_fail "wide model: exit $rc: $(cat "$tmp/err")"
set +e
(ulimit -f 4 && trap '' XFSZ && exec "$CLTRAIN_BIN" train --data "$D" --label-column 0 \
    --model "linear 2048, relu, linear 3" --batch-size 16 --epochs 1 \
    --save "$tmp/big.safetensors") >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "big.safetensors" "$tmp/err" ||
    soft_fail "--save past the file-size limit: exit $rc: $(cat "$tmp/err")"
[ -e "$tmp/big.safetensors" ] && soft_fail "--save past the file-size limit: a file was left"
ls "$tmp" | grep -q 'big.*\.tmp\.' && soft_fail "--save past the file-size limit: a temporary was left"

# -- stale temporary files of dead runs are removed by the next save to the same path ----------
: >"$tmp/s.safetensors.tmp.999999.0" # pid_max is at most 4194304: no such process
: >"$tmp/s.safetensors.tmp.999999"
: >"$tmp/s.safetensors.tmp.$$.0" # this shell: alive
: >"$tmp/s.safetensors.tmp.notapid"
train --epochs 1 --save "$tmp/s.safetensors"
[ "$rc" -eq 0 ] || soft_fail "stale temporaries: exit $rc: $(cat "$tmp/err")"
[ -e "$tmp/s.safetensors.tmp.999999.0" ] && soft_fail "stale temporary .tmp.999999.0 was not removed"
[ -e "$tmp/s.safetensors.tmp.999999" ] && soft_fail "stale temporary .tmp.999999 was not removed"
[ -e "$tmp/s.safetensors.tmp.$$.0" ] || soft_fail "a live process's temporary was removed"
[ -e "$tmp/s.safetensors.tmp.notapid" ] || soft_fail "a file not named like a temporary was removed"

# -- SIGTERM and SIGHUP stop like Ctrl-C: the step ends, the checkpoint is written ---------------
for sig in TERM HUP; do
    ck="$tmp/sig$sig.safetensors"
    set +e
    python3 - "$sig" "$ck" "$CLTRAIN_BIN" train --data "$D" --label-column 0 --model "$M" \
        --epochs 100000 --batch-size 16 --log-every 1 --save "$ck" >"$tmp/out" 2>&1 <<'EOF'
import os, signal, subprocess, sys
name, ck, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
sig = getattr(signal, "SIG" + name)
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
for line in p.stdout:
    if line.startswith("epoch 1/100000 step 2/"):
        break
p.send_signal(sig)
out, err = p.communicate(timeout=300)
assert p.returncode == 128 + sig, ("exit code", p.returncode, err)
lines = err.strip().splitlines()
assert len(lines) == 1 and "interrupted after step" in lines[0], err
assert "SIG" + name in lines[0], ("the signal is not named", err)
assert "checkpoint written to " + ck in lines[0], err
assert os.path.getsize(ck) > 0
EOF
    prc=$?
    set -e
    if [ "$prc" -ne 0 ]; then
        soft_fail "SIG$sig: $(tail -3 "$tmp/out")"
    else
        run "$CLTRAIN_BIN" eval --load "$ck" --data "$D" --label-column 0
        [ "$rc" -eq 0 ] && grep -q accuracy "$tmp/out" ||
            soft_fail "eval after SIG$sig: $(cat "$tmp/err")"
    fi
done

[ "$failures" -eq 0 ] || fail "$failures case(s) failed"
echo "cli_outputs: all passed"
