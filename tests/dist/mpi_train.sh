#!/bin/sh
# `cltrain train` under mpirun with ranks that disagree: every rank checks a digest of its run
# against rank 0's before any collective whose sizes depend on the run, and all stop with one
# line naming the first difference (rank 0's value and the other rank's), exit code 2, no
# checkpoint. Ranks are made to differ by a wrapper that adds $RANK1_ARGS to rank 1's flags.
# Also: 3 ranks with --batch-size 2 (a rank's slice of every batch is empty) stop with the
# plan's one line; and a SIGTERM during training (to one rank, twice, or to mpirun) ends every
# rank at one step with rank 0's line naming the signal and the checkpoint, as a single process
# does.
# Usage: mpi_train.sh MPIRUN (meson passes it; CLTRAIN_BIN from meson test). Skips (77) when
# mpirun cannot start a process here or cltrain has no MPI.
set -eu
. "$(dirname "$0")/../lib.sh"
[ $# -eq 1 ] || fail "usage: mpi_train.sh MPIRUN"
mpirun=$1
need_exe CLTRAIN_BIN
need_python3 "to write the test data"
make_tmp
mpi_env

# mpirun_ ARGS...: bounded; --oversubscribe for more ranks than cores (CI has 2)
mpirun_() {
    timeout -k 10 60 "$mpirun" --oversubscribe --allow-run-as-root "$@"
}
mpirun_ -np 1 true >"$tmp/out" 2>&1 || skip "mpirun cannot start a process here: $(head -3 "$tmp/out")"

write_csv "$tmp" 150 40
# the same number of samples, one value changed
sed '2s/^\([0-9]*\),[^,]*,/\1,0.5,/' "$tmp/train.csv" >"$tmp/other.csv"
cmp -s "$tmp/train.csv" "$tmp/other.csv" && fail "other.csv is train.csv"
write_idx "$tmp/idx" 64 16

# rank1: runs "$@" with $RANK1_ARGS appended on rank 1 (Open MPI's OMPI_COMM_WORLD_RANK)
cat >"$tmp/rank1" <<'EOF'
#!/bin/sh
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then
    # shellcheck disable=SC2086 # a list of words
    exec "$@" $RANK1_ARGS
fi
exec "$@"
EOF
chmod +x "$tmp/rank1"
csv="--data csv:$tmp/train.csv,$tmp/test.csv --label-column 0"
echo "linear 16, tanh, linear 3" >"$tmp/tanh.spec"

# disagree LABEL NEEDLE RANK1-ARGS [DATA-ARGS]: 2 ranks, rank 1 with RANK1-ARGS added, must end
# non-zero within the limit with exactly one cltrain line, holding NEEDLE, and no checkpoint
disagree() {
    label=$1 needle=$2
    data=${4:-$csv}
    rm -f "$tmp/save.st"
    set +e
    # shellcheck disable=SC2086 # $data is a list of words
    RANK1_ARGS=$3 mpirun_ -x RANK1_ARGS -np 2 "$tmp/rank1" "$CLTRAIN_BIN" train $data \
        --model "linear 16, relu, linear 3" --batch-size 16 --steps 6 --log-every 2 \
        --share-devices --quiet --save "$tmp/save.st" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    if grep -q "built without MPI" "$tmp/err"; then
        skip "this cltrain was built without MPI"
    fi
    [ "$rc" -ne 0 ] || fail "$label: mpirun exited 0 (the replicas diverge): $(cat "$tmp/err")"
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "$label: mpirun still running after 60 s"
    lines=$(grep -c "^cltrain: " "$tmp/err" || true)
    [ "$lines" -eq 1 ] || fail "$label: $lines cltrain lines, expected 1: $(cat "$tmp/err")"
    grep -qF -- "$needle" "$tmp/err" || fail "$label: no '$needle': $(cat "$tmp/err")"
    grep -q "MPI_ERR" "$tmp/err" && fail "$label: an MPI error: $(cat "$tmp/err")"
    [ ! -e "$tmp/save.st" ] || fail "$label: a checkpoint was written"
    echo "ok: $label: $(grep "^cltrain: " "$tmp/err")"
}

disagree "--batch-size" '--batch-size is "16" on rank 0, "8" on rank 1' "--batch-size 8"
disagree "--steps" '--steps is "6" on rank 0, "9" on rank 1' "--steps 9"
disagree "--lr" '--lr is "0.001" on rank 0, "0.01" on rank 1' "--lr 0.01"
disagree "--normalize" '--normalize is "off, scale 1" on rank 0, "on (statistics' "--normalize"
disagree "activation" '--model is "linear 16, relu, linear 3" on rank 0, "linear 16, tanh, linear 3" on rank 1' \
    "--model $tmp/tanh.spec"
disagree "data of the same size" '--data (training split) is "150 samples of 5 features, CRC-32C' \
    "--data csv:$tmp/other.csv,$tmp/test.csv"
disagree "--augment" '--augment is "none" on rank 0, "flip,cutout=2" on rank 1' \
    "--augment flip,cutout=2" "--data idx:$tmp/idx"
grep -q "rank 0: the ranks do not run the same thing" "$tmp/err" ||
    fail "--augment: the line is not rank 0's: $(cat "$tmp/err")"

# -- 3 ranks, a batch of 2: the plan's line, once ---------------------------------------------------
set +e
# shellcheck disable=SC2086
mpirun_ -np 3 "$CLTRAIN_BIN" train $csv --model "linear 16, relu, linear 3" --batch-size 2 \
    --steps 3 --share-devices --quiet >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "3 ranks, batch 2: mpirun exited 0"
[ "$(grep -c "^cltrain: " "$tmp/err")" -eq 1 ] || fail "3 ranks, batch 2: not one line: $(cat "$tmp/err")"
grep -qF "rank 0: --batch-size 2 over 3 ranks (2 split 0+1+1): rank 0's slice of every batch is empty" \
    "$tmp/err" || fail "3 ranks, batch 2: $(cat "$tmp/err")"
echo "ok: 3 ranks, batch 2: $(grep "^cltrain: " "$tmp/err")"

# -- stop signals: the signal's line from rank 0, as a single process prints it --------------------
# train_bg ARGS...: 2 ranks training "forever" in the background ($mp: mpirun's pid), rank R's
# pid in $tmp/pid.R; returns once rank 0 has printed a step (training has begun)
train_bg() {
    rm -f "$tmp/pid.0" "$tmp/pid.1" "$tmp/out" "$tmp/err"
    cat >"$tmp/pids.sh" <<'EOS'
#!/bin/sh
r=${OMPI_COMM_WORLD_RANK:-0}
echo $$ >"$PIDS.$r.tmp" && mv "$PIDS.$r.tmp" "$PIDS.$r"
exec "$@"
EOS
    chmod +x "$tmp/pids.sh"
    # not through mpirun_: $! must be a process that passes a signal on to mpirun (timeout
    # does), not a subshell
    # shellcheck disable=SC2086
    PIDS=$tmp/pid timeout -k 10 60 "$mpirun" --oversubscribe --allow-run-as-root -x PIDS \
        -np 2 "$tmp/pids.sh" "$CLTRAIN_BIN" train $csv \
        --model "linear 16, relu, linear 3" --batch-size 16 --epochs 100000 --log-every 50 \
        --share-devices "$@" >"$tmp/out" 2>"$tmp/err" &
    mp=$!
    i=0
    while ! grep -q "step" "$tmp/out" 2>/dev/null && [ "$i" -lt 300 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    grep -q "step" "$tmp/out" || fail "$label: training never started: $(cat "$tmp/err")"
}
# stopped LABEL RC: mpirun ended with RC (any non-zero: "any") and rank 0's one line names SIGTERM
stopped() {
    label=$1
    set +e
    wait "$mp"
    rc=$?
    set -e
    [ "$2" = any ] && [ "$rc" -ne 0 ] || [ "$rc" -eq "$2" ] ||
        fail "$label: mpirun exited $rc, expected $2: $(cat "$tmp/err")"
    [ "$(grep -c "^cltrain: " "$tmp/err")" -eq 1 ] || fail "$label: not one line: $(cat "$tmp/err")"
    grep -q "^cltrain: rank 0: SIGTERM: interrupted after step [0-9]* of " "$tmp/err" ||
        fail "$label: no SIGTERM line from rank 0: $(cat "$tmp/err")"
    echo "ok: $label: mpirun exited $rc: $(grep "^cltrain: " "$tmp/err")"
}

# SIGTERM to rank 1 alone: every rank stops at the same step, and rank 0, which saw no signal
# itself, names the one rank 1 saw and exits as it does (128 + 15), the checkpoint written
label="SIGTERM to rank 1"
train_bg --save "$tmp/term.st"
kill -TERM "$(cat "$tmp/pid.1")"
stopped "$label" 143
grep -qF "checkpoint written to $tmp/term.st" "$tmp/err" || fail "$label: $(cat "$tmp/err")"
[ -s "$tmp/term.st" ] || fail "$label: no checkpoint"

# the same signal twice (a launcher signals every process, then mpirun forwards its copy a
# second later): the second must not kill a rank that is still stopping. Rank 0 is held
# (SIGSTOP) so that rank 1 waits in a reduction with both signals delivered, then let go.
label="SIGTERM twice to rank 1"
train_bg
kill -STOP "$(cat "$tmp/pid.0")"
kill -TERM "$(cat "$tmp/pid.1")"
sleep 0.5
kill -TERM "$(cat "$tmp/pid.1")"
sleep 0.5
kill -CONT "$(cat "$tmp/pid.0")"
stopped "$label" 143
