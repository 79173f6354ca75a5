#!/bin/sh
# Data-parallel training from the command line (issue 11) on tiny CSV data (150 train / 40 test,
# 5 features, 3 classes) and a tiny MLP, 20 steps of batch 16 (the 10th step of each epoch is a
# partial one of 6 samples): two replicas on the one device (--devices SEL,SEL) must train the
# model one device trains, in fp32 and bf16, with equal and 3:1 shares, resident and streaming,
# shuffled or not; bad --devices/--device-shares combinations fail with one line naming the
# flag. With the argument mpi (meson's cli_devices_mpi): under mpirun 2 ranks train the same
# model, and a rank that fails (bad --device, missing data, a loader failure mid-run, kill -9)
# ends every rank with a non-zero exit within 60 s; it skips (77) without mpirun, when mpirun
# cannot start a process here, or when cltrain has no MPI. Needs CLTRAIN_BIN (meson test) and
# python3.
set -eu
. "$(dirname "$0")/../lib.sh"

# The part to run: "replicas" (sections a-c, one process), or "mpi" (section d; meson's
# cli_devices_mpi), which skips (77) when mpirun is missing or cannot start a process here, or
# cltrain has no MPI.
part=${1:-replicas}
case $part in
replicas) ;;
mpi) command -v mpirun >/dev/null || skip "no mpirun (Open MPI: openmpi-bin)" ;;
*) fail "unknown part '$part' (replicas or mpi)" ;;
esac
need_exe CLTRAIN_BIN
need_python3 "to write the data and read checkpoints"
make_tmp

# -- data: label first, then 5 features; the class is a function of three of them -----------------
write_csv "$tmp" 150 40

# compare LABEL A B TOL [differ]: the model's tensors (not the optimizer's) of two checkpoints;
# for each, max |a - b| / max |a| must be <= TOL (with "differ": some tensor must exceed it,
# which shows that the comparison can fail). Plain Python: the safetensors layout is an 8-byte
# header length, a JSON header, then little-endian data.
compare() {
    python3 - "$@" <<'EOF'
import json, struct, sys
from array import array
label, pa, pb, tol = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
differ = len(sys.argv) > 5
def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        if t["dtype"] == "F32" and not name.startswith("optim."):
            b, e = t["data_offsets"]
            a = array("f")
            a.frombytes(raw[8 + n + b:8 + n + e])
            if sys.byteorder != "little":
                a.byteswap()
            out[name] = a
    return out
a, b = load(pa), load(pb)
if sorted(a) != sorted(b) or not a:
    sys.exit("%s: tensors differ: %s vs %s" % (label, sorted(a), sorted(b)))
worst = 0.0
for name in sorted(a):
    if len(a[name]) != len(b[name]):
        sys.exit("%s: %s has %d vs %d elements" % (label, name, len(a[name]), len(b[name])))
    diff = max(abs(x - y) for x, y in zip(a[name], b[name]))
    scale = max(abs(x) for x in a[name]) or 1.0
    worst = max(worst, diff / scale)
    print("%s: %-10s max |diff| %.3g, max |w| %.3g, ratio %.3g" % (label, name, diff, scale,
                                                                  diff / scale))
print("%s: worst ratio %.3g (tolerance %g%s)" % (label, worst, tol, ", must exceed" if differ else ""))
if differ and worst <= tol:
    sys.exit("%s: the checkpoints agree within %g, expected them to differ" % (label, tol))
if not differ and worst > tol:
    sys.exit("%s: worst ratio %.3g > %g" % (label, worst, tol))
EOF
}

# same_metrics LABEL A B: the JSON lines of two runs (replica 0 writes them) have the same
# events, and their losses and accuracies agree to 1e-4 relative (%.6g prints 6 digits).
same_metrics() {
    python3 - "$@" <<'EOF'
import json, sys
label, pa, pb = sys.argv[1:4]
a = [json.loads(l) for l in open(pa)]
b = [json.loads(l) for l in open(pb)]
if [(e["event"], e["step"]) for e in a] != [(e["event"], e["step"]) for e in b]:
    sys.exit("%s: other events: %s vs %s" % (label, a, b))
for x, y in zip(a, b):
    for k in ("loss", "train_loss", "test_loss", "test_accuracy"):
        if k in x and abs(x[k] - y[k]) > 1e-4 * max(1.0, abs(x[k])):
            sys.exit("%s: %s at step %d: %g vs %g" % (label, k, x["step"], x[k], y[k]))
print("%s: %d metrics lines agree" % (label, len(a)))
EOF
}

sel=${CLTRAIN_DEVICE:-auto}
M="linear 16, relu, linear 3"
common() {
    "$CLTRAIN_BIN" train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 --model "$M" \
        --batch-size 16 --steps 20 --lr 0.01 --log-every 5 "$@"
}

# fp32 tolerance: the replicas' gradients are summed per replica, then across them, so the
# sums' rounding differs from one device's (about 1e-7 relative per step); 20 Adam steps keep
# that near 1e-7, far below 1e-5 of the largest weight of each tensor. A run with another seed
# must differ by more than that (the check can fail).
TOL32=1e-5
# bf16 stores activations and the weights the forward uses with 8-bit significands: a slice's
# GEMM may round one element the other way (2^-8 = 0.4% of it), and 20 steps carry a few such
# flips: 1e-2 of the largest weight.
TOL16=1e-2

# the one-device runs both parts compare against: fp32 with metrics, bf16
check_ok "one device" -- common --no-shuffle --seed 7 --save "$tmp/one.st" \
    --metrics "$tmp/one.jsonl"
check_ok "bf16 one device" -- common --no-shuffle --seed 7 --precision bf16 \
    --save "$tmp/one16.st" --quiet

if [ "$part" = replicas ]; then
    # -- (a) two replicas on one device train what one device trains ------------------------------
    check_ok "two replicas" -- \
        common --no-shuffle --seed 7 --save "$tmp/two.st" --metrics "$tmp/two.jsonl" \
        --devices "$sel,$sel"
    grep -q "^cltrain: training on 2 replicas: \[[0-9]*\] .* share 1, \[[0-9]*\] .* share 1; .*batch 16 split 8+8;" "$tmp/out" ||
        fail "two replicas: header does not list both devices, shares and the split: $(head -1 "$tmp/out")"
    grep -q "^reduce: 20 steps, [0-9.]* ms per step, 592 bytes per step per replica$" "$tmp/out" ||
        fail "two replicas: no reduce line (147 parameters + the stop flag = 592 bytes): $(tail -3 "$tmp/out")"
    grep -q "^saved $tmp/two.st (step 20)$" "$tmp/out" || fail "two replicas: no 'saved' line: $(cat "$tmp/out")"
    [ "$(grep -c '^epoch [0-9]/[0-9]: train loss' "$tmp/out")" -eq 2 ] ||
        fail "two replicas: expected replica 0's 2 epoch summaries: $(cat "$tmp/out")"
    grep -qx "cltrain: warning: --devices names device [0-9]* twice: two replicas share it" "$tmp/err" ||
        fail "two replicas: no warning for the device named twice: $(cat "$tmp/err")"
    compare "fp32, 2 replicas" "$tmp/one.st" "$tmp/two.st" "$TOL32" || fail "fp32, 2 replicas"
    same_metrics "fp32, 2 replicas" "$tmp/one.jsonl" "$tmp/two.jsonl" || fail "fp32 metrics"

    check_ok "another seed" -- common --no-shuffle --seed 8 --save "$tmp/seed8.st" --quiet
    compare "another seed" "$tmp/one.st" "$tmp/seed8.st" "$TOL32" differ || fail "another seed"

    check_ok "bf16 two replicas" -- \
        common --no-shuffle --seed 7 --precision bf16 --save "$tmp/two16.st" \
        --quiet --devices "$sel,$sel"
    compare "bf16, 2 replicas" "$tmp/one16.st" "$tmp/two16.st" "$TOL16" || fail "bf16, 2 replicas"

    # shuffled (the epoch's order from the seed, each replica its slice of every batch), and with
    # the streaming loader (each replica's thread gathers its slices)
    check_ok "shuffled one device" -- common --seed 7 --save "$tmp/shuf1.st" --quiet
    check_ok "shuffled two replicas" -- \
        common --seed 7 --save "$tmp/shuf2.st" --quiet --devices "$sel,$sel"
    compare "fp32 shuffled, 2 replicas" "$tmp/shuf1.st" "$tmp/shuf2.st" "$TOL32" || fail "shuffled"
    check_ok "streaming two replicas" -- \
        common --seed 7 --save "$tmp/stream2.st" --quiet --loader streaming \
        --devices "$sel,$sel"
    compare "fp32 streaming, 2 replicas" "$tmp/shuf1.st" "$tmp/stream2.st" "$TOL32" || fail "streaming"

    # -- (b) unequal shares: 12 + 4 of every batch of 16 (the partial step of 6: 4 + 2) ------------
    check_ok "shares 3,1" -- \
        common --no-shuffle --seed 7 --save "$tmp/shares.st" --devices "$sel,$sel" \
        --device-shares 3,1
    grep -q "share 3, .* share 1; .*batch 16 split 12+4;" "$tmp/out" ||
        fail "shares 3,1: header: $(head -1 "$tmp/out")"
    compare "fp32, shares 3,1" "$tmp/one.st" "$tmp/shares.st" "$TOL32" || fail "shares 3,1"

    # resuming one device's checkpoint on two replicas: allowed, with a line saying what changes
    check_ok "resume on 2 replicas" -- \
        common --no-shuffle --seed 7 --resume "$tmp/one.st" --steps 25 \
        --devices "$sel,$sel"
    grep -q "^resume: the checkpoint was trained by 1 replica, this run has 2: " "$tmp/out" ||
        fail "resume on 2 replicas: no line about the replicas: $(cat "$tmp/out")"

    # -- (c) bad input: one line naming the flag, non-zero exit -----------------------------------
    check_bad --code 1 "unmatched selector" "--devices $sel,99: " '"99"' -- \
        common --devices "$sel,99"
    check_bad --code 2 "share count" "--device-shares 1: 1 share for 2 devices" -- \
        common --devices "$sel,$sel" --device-shares 1
    check_bad --code 2 "share value" "--device-shares 3,0" -- \
        common --devices "$sel,$sel" --device-shares 3,0
    check_bad --code 2 "shares without devices" "--device-shares needs --devices" -- \
        common --device-shares 1,1
    check_bad --code 2 "devices and dry-run" "--devices and --dry-run" -- \
        common --devices "$sel,$sel" --dry-run
    check_bad --code 2 "devices and auto-batch" "--devices and --auto-batch" -- \
        common --devices "$sel,$sel" --auto-batch
    check_bad --code 2 "devices and device" "--devices and --device" -- \
        common --devices "$sel,$sel" --device "$sel"
    check_bad --code 2 "empty selector" "--devices $sel,,$sel" -- \
        common --devices "$sel,,$sel"
    check_bad --code 2 "share-devices alone" "--share-devices" -- \
        common --share-devices
    echo "cli_devices: replicas: ok"
    exit 0
fi

# -- (d) MPI: 2 ranks train what one process trains; a failing rank ends the run ------------------
mpi_env
# mpirun_ ARGS...: bounded; --oversubscribe for more ranks than cores (CI has 2)
mpirun_() {
    timeout -k 10 60 mpirun --oversubscribe --allow-run-as-root "$@"
}
set +e
mpirun_ -np 1 true >"$tmp/out" 2>&1
rc=$?
set -e
[ "$rc" -eq 0 ] || skip "mpirun cannot start a process here: $(head -3 "$tmp/out")"
# one PoCL device for both ranks: --share-devices
set +e
mpirun_ -np 2 "$CLTRAIN_BIN" train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 \
    --model "$M" --batch-size 16 --steps 20 --lr 0.01 --log-every 5 --no-shuffle --seed 7 \
    --save "$tmp/mpi.st" --metrics "$tmp/mpi.jsonl" --share-devices >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
if grep -q "built without MPI" "$tmp/err"; then
    skip "this cltrain was built without MPI"
fi
[ "$rc" -eq 0 ] || fail "mpirun 2 ranks: exit code $rc: $(cat "$tmp/err") $(tail -5 "$tmp/out")"
grep -q "rank 0 of 2 (MPI);.*batch 16 split 8+8;" "$tmp/out" ||
    fail "mpirun 2 ranks: header: $(cat "$tmp/out")"
[ "$(grep -c "^cltrain: training on" "$tmp/out")" -eq 1 ] ||
    fail "mpirun 2 ranks: only rank 0 prints the header: $(cat "$tmp/out")"
grep -q "^reduce: 20 steps, .* 592 bytes per step per replica" "$tmp/out" ||
    fail "mpirun 2 ranks: no reduce line: $(cat "$tmp/out")"
compare "fp32, 2 MPI ranks" "$tmp/one.st" "$tmp/mpi.st" "$TOL32" || fail "2 MPI ranks"
same_metrics "fp32, 2 MPI ranks" "$tmp/one.jsonl" "$tmp/mpi.jsonl" || fail "MPI metrics"
mpirun_ -np 2 "$CLTRAIN_BIN" train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 \
    --model "$M" --batch-size 16 --steps 20 --lr 0.01 --log-every 5 --no-shuffle --seed 7 \
    --precision bf16 --save "$tmp/mpi16.st" --quiet --share-devices >"$tmp/out" 2>"$tmp/err" ||
    fail "mpirun 2 ranks, bf16: $(cat "$tmp/err")"
compare "bf16, 2 MPI ranks" "$tmp/one16.st" "$tmp/mpi16.st" "$TOL16" || fail "bf16, 2 MPI ranks"

# no_ranks_left LABEL: every rank has exited (none of this test's cltrain processes is left a
# few seconds after mpirun returned)
no_ranks_left() {
    i=0
    while pgrep -f -- "$tmp/train.csv" >/dev/null; do
        [ "$i" -lt 50 ] || fail "$1: ranks still running after mpirun exited: $(pgrep -a -f -- "$tmp/train.csv")"
        sleep 0.1
        i=$((i + 1))
    done
}

# mpmd_fail LABEL WORD RANK1-ARGS...: rank 0 trains normally, rank 1 gets other arguments and
# fails; mpirun must end non-zero within the limit with rank 1's line naming WORD
long="--data csv:$tmp/train.csv,$tmp/test.csv --label-column 0 --model logreg --batch-size 16 --epochs 100000 --log-every 0 --quiet --share-devices"
mpmd_fail() {
    label=$1 word=$2
    shift 2
    start=$(date +%s)
    set +e
    # shellcheck disable=SC2086 # $long is a list of words
    mpirun_ -np 1 "$CLTRAIN_BIN" train $long : -np 1 "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    # by the clock: mpirun's own exit code may be 137 when a rank died by SIGKILL
    [ $(($(date +%s) - start)) -lt 60 ] || fail "$label: mpirun still running after 60 s"
    [ "$rc" -ne 0 ] || fail "$label: mpirun exited 0"
    grep -q -e "$word" "$tmp/err" || fail "$label: no line with '$word': $(cat "$tmp/err")"
    no_ranks_left "$label"
}
# shellcheck disable=SC2086
mpmd_fail "rank 1 --device 99" "^cltrain: rank 1: --device 99: no OpenCL device matches" \
    "$CLTRAIN_BIN" train $long --device 99
# shellcheck disable=SC2086
mpmd_fail "rank 1 missing data" "^cltrain: rank 1: .*nosuch.csv" \
    "$CLTRAIN_BIN" train $long --data "csv:$tmp/nosuch.csv,$tmp/test.csv"
# shellcheck disable=SC2086 # mid-run: rank 1's loader fails at batch 5, rank 0 waits to reduce
mpmd_fail "rank 1 fails mid-run" "^cltrain: rank 1: data loader: injected failure" \
    env CLTRAIN_LOADER_FAIL_AT=5 "$CLTRAIN_BIN" train $long --loader streaming

# kill -9 of rank 1 once it trains: rank 0 waits in a reduction that never completes, and
# mpirun must notice the death and end the run (rank 1 runs through sh to learn its pid)
start=$(date +%s)
set +e
# shellcheck disable=SC2086,SC2016
mpirun_ -np 1 "$CLTRAIN_BIN" train $long : \
    -np 1 sh -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$tmp/pid1" \
    "$CLTRAIN_BIN" train $long >"$tmp/out" 2>"$tmp/err" &
mp=$!
set -e
i=0
while [ ! -s "$tmp/pid1" ] && [ "$i" -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
[ -s "$tmp/pid1" ] || fail "kill -9: rank 1 never started: $(cat "$tmp/err")"
sleep 2 # into training (a second on 2 cores)
kill -9 "$(cat "$tmp/pid1")" || fail "kill -9: rank 1 already gone: $(cat "$tmp/err")"
set +e
wait "$mp"
rc=$?
set -e
took=$(($(date +%s) - start))
[ "$took" -lt 60 ] || fail "kill -9: mpirun still running after 60 s"
[ "$rc" -ne 0 ] || fail "kill -9: mpirun exited 0"
no_ranks_left "kill -9"
echo "cli_devices: kill -9 of rank 1: mpirun exited $rc after $took s"
echo "cli_devices: mpi: ok"
