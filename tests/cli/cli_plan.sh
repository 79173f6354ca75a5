#!/bin/sh
# What a training run's plan can tell is checked before its first step, with one line naming the
# flag, the numbers and a remedy, exit code 2 and no --save file: batchnorm against a last batch
# of one sample (512 = 7 x 73 + 1), a replica's empty slice of every batch (8 replicas, batch 4),
# a replica's slice of 1 against batchnorm, --augment shift/cutout larger than the images (4x4
# here). And a failure during training (the loader fails at batch 5) still writes the --save
# checkpoint of the last complete step, says so on its one line, and the run resumes from it.
# Needs CLTRAIN_BIN (meson test) and python3.
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the test data"
make_tmp

write_idx "$tmp/idx" 512 16
mkdir "$tmp/save"
sel=${CLTRAIN_DEVICE:-auto}
BN="linear 8, batchnorm, relu, linear 3"
train() {
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --quiet --log-every 0 "$@"
}

# -- batchnorm and the last batch of an epoch ------------------------------------------------------
check_bad_dir="$tmp/save"
check_bad --code 2 "batchnorm, last batch of 1" "--batch-size 73" "512 = 7 x 73 + 1" \
    "has 1 sample" "layer 2 (batchnorm)" "--drop-last" "e.g. 72" -- \
    train --model "$BN" --batch-size 73 --epochs 2 --save "$tmp/save/bn.st"
check_bad --code 2 "batchnorm, batch of 1" "--batch-size 1: every batch has 1 sample" \
    "layer 2 (batchnorm)" -- train --model "$BN" --batch-size 1 --steps 2
# a conv's batchnorm has H x W values per channel in a sample of one: trains
check_ok "conv batchnorm, last batch of 1" -- \
    train --model "conv 2 k3 p1, batchnorm, relu, flatten, linear 3" --batch-size 73 --steps 8
check_ok "batchnorm, last batch of 1 dropped" -- \
    train --model "$BN" --batch-size 73 --epochs 2 --drop-last

# -- replicas: slices of every batch ---------------------------------------------------------------
# nowarn COMMAND...: COMMAND without the warning for a device named twice (every replica here
# shares the one device), so that its error is the one line on stderr
cat >"$tmp/nowarn" <<'EOF'
#!/bin/sh
"$@" 2>"$0.err"
rc=$?
grep -v "^cltrain: warning: --devices names device [0-9]* twice" "$0.err" >&2
exit $rc
EOF
chmod +x "$tmp/nowarn"
check_bad --code 2 "8 replicas, batch 4" "--batch-size 4 over 8 replicas (4 split 0+1+0+1+0+1+0+1)" \
    "replica 0's slice of every batch is empty" "e.g. 8" "fewer replicas" -- \
    "$tmp/nowarn" "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --quiet \
    --model "linear 8, relu, linear 3" --batch-size 4 --steps 3 \
    --devices "$sel,$sel,$sel,$sel,$sel,$sel,$sel,$sel"
grep -q "^cltrain: --batch-size" "$tmp/err" || fail "8 replicas: a replica's prefix: $(cat "$tmp/err")"
check_bad --code 2 "shares 14,1,1 and batchnorm" "--batch-size 16 over 3 replicas (16 split 14+1+1)" \
    "replica 1's slice of every batch has 1 sample" "layer 2 (batchnorm)" -- \
    "$tmp/nowarn" "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --quiet --model "$BN" \
    --batch-size 16 --steps 3 --devices "$sel,$sel,$sel" --device-shares 14,1,1

# -- augmentation larger than the images -----------------------------------------------------------
check_bad --code 2 "shift past the image" "--augment shift=4" "4x4" "shift=0 to 3" -- \
    train --model "linear 8, relu, linear 3" --batch-size 8 --steps 2 --augment flip,shift=4
check_bad --code 2 "cutout larger than the image" "--augment cutout=5" "4x4" "cutout=0 to 4" -- \
    train --model "linear 8, relu, linear 3" --batch-size 8 --steps 2 --augment cutout=5
check_ok "shift and cutout that fit" -- \
    train --model "linear 8, relu, linear 3" --batch-size 8 --steps 2 --augment shift=3,cutout=4
check_bad_dir=""

# -- a failure during training keeps the last complete step ----------------------------------------
check_bad --code 1 "loader fails at batch 5" "injected failure" \
    "the checkpoint of step 5, the last complete one, was written to $tmp/save/late.st" -- \
    env CLTRAIN_LOADER_FAIL_AT=5 "$CLTRAIN_BIN" train --data "idx:$tmp/idx" \
    --model "linear 8, relu, linear 3" --batch-size 16 --steps 20 --loader streaming \
    --save "$tmp/save/late.st" --quiet
[ -s "$tmp/save/late.st" ] || fail "loader fails at batch 5: no checkpoint: $(ls -A "$tmp/save")"
check_ok "resume after the failure" "step 6/20" -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --resume "$tmp/save/late.st" --batch-size 16 \
    --steps 20 --log-every 1
echo "cli_plan: ok"
