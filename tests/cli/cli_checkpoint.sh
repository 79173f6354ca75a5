#!/bin/sh
# Checkpoints say what run they belong to and are verified: --resume with another
# geometry (batch size, seed, data) is refused naming each difference, a split of the same
# effective batch is re-planned and printed, an older file without geometry resumes with a note;
# --resume continues the checkpoint's recipe (optimizer, lr, schedule, precision, smoothing,
# augmentation, ...) when its options are not given, refuses values given differently (every
# one named) unless --change-recipe, which the header and --metrics record, and refuses another
# --model naming both specs; an older file without a recipe resumes with a note;
# a tensor whose bytes changed fails its CRC-32C on eval, predict, --resume and --init, naming
# it, a file without checksums loads with a note; NaN/inf weights are refused; metadata that
# contradicts itself or the data (classes, task, format version, shapes written as 8.0,
# amp.scaler_state on an fp32 run) is an error with a message; --init takes a plain PyTorch
# state dict written by tools/checkpoint_numpy.py --state-dict. Failures: exit 1 or 2 and ONE
# stderr line. Needs CLTRAIN_BIN (meson test); the state-dict cases run apart (the argument
# state-dict, meson's cli_checkpoint_state_dict) and skip (77) without numpy.
set -eu
. "$(dirname "$0")/../lib.sh"

# The part to run: "main" (sections 1-4), or "state-dict" (section 5, which needs numpy and skips
# without it; meson registers it as cli_checkpoint_state_dict).
part=${1:-main}
case $part in
main) ;;
state-dict) need_numpy ;;
*) fail "unknown part '$part' (main or state-dict)" ;;
esac
need_exe CLTRAIN_BIN
need_python3 "to write the test data"
here=$(cd "$(dirname "$0")" && pwd)
make_tmp

# ck_edit IN OUT OP [ARGS]: rewrites a checkpoint. Ops: drop-meta KEY..., set-meta KEY VALUE,
# flip TENSOR N (invert N bytes of its data, checksums kept), set TENSOR INDEX VALUE (f32, the
# checksum recomputed), add-amp (an I32 amp.scaler_state, checksummed), float-shape TENSOR
# (its shape written as 8.0), poke-meta KEY VALUE (set-meta with "crc32c_metadata" kept as it
# was: an edit after cltrain wrote the file). Every other op recomputes "crc32c_metadata" (when
# present) as cltrain does, so that the checks behind it are reached.
ck_edit() {
    python3 - "$@" <<'PY'
import json, struct, sys
src, dst, op, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    T.append(c)
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = (c >> 8) ^ T[(c ^ x) & 0xFF]
    return c ^ 0xFFFFFFFF
assert crc32c(b"123456789") == 0xE3069283
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
meta = h.pop("__metadata__", {})
data = raw[8 + n:]
t = {k: bytearray(data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}
info = {k: (v["dtype"], v["shape"]) for k, v in h.items()}
rehash = True
if op == "drop-meta":
    for k in args:
        meta.pop(k, None)
elif op in ("set-meta", "poke-meta"):
    meta[args[0]] = args[1]
elif op == "flip":
    b = t[args[0]]
    for i in range(min(int(args[1]), len(b))):
        b[i] ^= 0xFF
    rehash = False
elif op == "set":
    struct.pack_into("<f", t[args[0]], 4 * int(args[1]), float(args[2]))
elif op == "add-amp":
    t["amp.scaler_state"] = bytearray(struct.pack("<4i", 65536, 0, 0, 0))
    info["amp.scaler_state"] = ("I32", [4])
elif op == "float-shape":
    info[args[0]] = (info[args[0]][0], [float(d) for d in info[args[0]][1]])
out, hdr = b"", {}
for k in t:
    hdr[k] = {"dtype": info[k][0], "shape": info[k][1],
              "data_offsets": [len(out), len(out) + len(t[k])]}
    out += bytes(t[k])
if "crc32c" in meta and rehash:
    meta["crc32c"] = json.dumps({k: "%08x" % crc32c(bytes(t[k])) for k in t})
if "crc32c_metadata" in meta and op != "poke-meta":
    # CRC-32C over the other keys and values, keys sorted bytewise, each followed by a NUL
    canon = b"".join(k.encode() + b"\0" + meta[k].encode() + b"\0"
                     for k in sorted(meta, key=lambda k: k.encode()) if k != "crc32c_metadata")
    meta["crc32c_metadata"] = "%08x" % crc32c(canon)
hdr["__metadata__"] = meta
hb = json.dumps(hdr).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + out)
PY
}

write_idx "$tmp/idx" 200 50
write_idx "$tmp/other" 160 50
M="linear 8, relu, linear 3"
D="idx:$tmp/idx"
ck="$tmp/m.safetensors"
"$CLTRAIN_BIN" train --data "$D" --model "$M" --epochs 2 --batch-size 32 --log-every 0 \
    --save "$ck" --quiet >/dev/null || fail "training the checkpoint failed"
eval_() { "$CLTRAIN_BIN" eval --load "$1" --data "$D"; }
predict_() { "$CLTRAIN_BIN" predict --load "$1" --data "$D" --output "$tmp/p.csv"; }
resume_() { f=$1; shift; "$CLTRAIN_BIN" train --data "$D" --epochs 3 --batch-size 32 --quiet \
    --log-every 0 --resume "$f" "$@"; }
init_() { f=$1; shift; "$CLTRAIN_BIN" train --data "$D" --model "$M" --steps 2 --quiet \
    --log-every 0 --init "$f" "$@"; }

# -- 5. --init from a plain PyTorch-layout state dict ------------------------------------------
if [ "$part" = state-dict ]; then
    np_tool="$here/../../tools/checkpoint_numpy.py"
    "$numpy_python" "$np_tool" --state-dict "$ck" "$tmp/sd.safetensors"
    "$numpy_python" "$np_tool" --state-dict "$ck" "$tmp/sdpt.safetensors" --format-pt
    check_ok "--init from a plain state dict" "has no checksums" -- \
        init_ "$tmp/sd.safetensors" --save "$tmp/fromsd.safetensors"
    check_ok "--init from a state dict with {format: pt}" "has no checksums" -- \
        init_ "$tmp/sdpt.safetensors"
    check_ok "the result evaluates" "accuracy" -- eval_ "$tmp/fromsd.safetensors"
    check_bad "--init, a mis-shaped tensor" '"0.weight"' "f32 [8, 16]" "needs f32 [9, 16]" -- \
        init_ "$tmp/sd.safetensors" --model "linear 9, relu, linear 3"
    check_bad "--init, a missing tensor" '"4.weight"' -- \
        init_ "$tmp/sd.safetensors" --model "linear 8, relu, linear 3, relu, linear 3"
    ck_edit "$tmp/sd.safetensors" "$tmp/sdx.safetensors" add-amp
    check_bad "--init, a tensor the model lacks" '"amp.scaler_state"' "not a parameter" -- \
        init_ "$tmp/sdx.safetensors"
    check_bad "eval of a plain state dict" "not a cltrain checkpoint" -- \
        eval_ "$tmp/sd.safetensors"
    echo "cli_checkpoint: state-dict: all passed"
    exit 0
fi

# -- 1. run geometry ---------------------------------------------------------------------------
check_bad "resume with another batch size" "--resume" "batch size 32" "asks for 16" \
    "--batch-size 32" "--init" -- resume_ "$ck" --batch-size 16
check_bad "resume with a larger batch size" "batch size 32" "asks for 64" -- \
    resume_ "$ck" --batch-size 64
check_bad "resume with another seed" "seed 0" "asks for 7" -- resume_ "$ck" --seed 7
check_bad "resume on other data" "200 training samples" "(160," -- \
    "$CLTRAIN_BIN" train --data "idx:$tmp/other" --epochs 3 --batch-size 32 --resume "$ck"
check_bad "resume with --drop-last" "steps per epoch" "--drop-last" -- \
    resume_ "$ck" --drop-last
check_ok "resume: the same effective batch as 16 x 2 is re-planned and said" \
    "re-planned as micro-batch 16 x accumulate 2" -- \
    "$CLTRAIN_BIN" train --data "$D" --epochs 3 --batch-size 16 --accumulate 2 --log-every 0 \
    --resume "$ck"
ck_edit "$ck" "$tmp/old.safetensors" drop-meta run crc32c
check_ok "resume of an older checkpoint (no geometry, no checksums) with notes" \
    "does not record its run's geometry" "has no checksums" -- resume_ "$tmp/old.safetensors"

# -- 1b. the run's recipe ----------------------------------------------------------------------
# recipe_of FILE: the checkpoint's metadata "recipe" (None when it has none).
recipe_of() {
    python3 -c 'import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
print(json.loads(raw[8:8 + n])["__metadata__"].get("recipe"))' "$1"
}
R="$tmp/rc.safetensors"
"$CLTRAIN_BIN" train --data "$D" --model "$M" --optimizer adamw --lr 0.01 --beta1 0.8 \
    --weight-decay 0.1 --schedule cosine --warmup 2 --min-lr 0.001 --label-smoothing 0.1 \
    --augment flip --precision bf16 --no-shuffle --batch-size 16 --accumulate 2 --epochs 2 \
    --log-every 0 --save "$R" --quiet >/dev/null || fail "training the recipe's checkpoint failed"
[ "$(recipe_of "$R")" != None ] || fail "the checkpoint does not record its recipe"
ck_edit "$R" "$tmp/rc4.safetensors" set-meta step 4 # as if stopped at step 4 of 14
R4="$tmp/rc4.safetensors"
check_ok "resume continues the saved recipe (no option repeated)" "resuming" \
    "adamw lr 0.01, cosine to 0.001 over 14 steps, warm-up 2 steps, weight decay 0.1, label smoothing 0.1, no shuffle" \
    "batch 16 x 2 micro-batches" "precision bf16" "augmented flip" "(step 14)" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$R4" --log-every 5 --save "$tmp/rc_out.safetensors"
[ "$(recipe_of "$tmp/rc_out.safetensors")" = "$(recipe_of "$R")" ] ||
    fail "the resumed run saved another recipe: $(recipe_of "$tmp/rc_out.safetensors")"
echo "ok: the resumed run saved the same recipe"
check_bad --code 2 "resume with other recipe values: every difference named" "--resume" \
    "--lr: given 0.02, the checkpoint's 0.01" "--schedule: given constant, the checkpoint's cosine" \
    "--beta1: given 0.9, the checkpoint's 0.8" "--precision: given fp32, the checkpoint's bf16" \
    "--label-smoothing: given 0, the checkpoint's 0.1" "--normalize: given on, the checkpoint's off" \
    "--augment: given flip,shift=1, the checkpoint's flip" "--epochs: given 3, the checkpoint's 2" \
    "--change-recipe" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$R4" --lr 0.02 --schedule constant --beta1 0.9 \
    --precision fp32 --label-smoothing 0 --normalize --augment flip,shift=1 --epochs 3
check_bad --code 2 "resume under a cosine schedule with another length" \
    "--steps: given 10, the checkpoint's none (the cosine schedule spans 14 steps, this run 10)" \
    -- "$CLTRAIN_BIN" train --data "$D" --resume "$R4" --steps 10
check_ok "resume with the saved values given again" "resuming" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$R4" --optimizer adamw --lr 0.01 --beta1 0.8 \
    --weight-decay 0.1 --schedule cosine --warmup 2 --min-lr 0.001 --label-smoothing 0.1 \
    --augment flip --precision bf16 --no-shuffle --batch-size 16 --accumulate 2 --epochs 2 \
    --log-every 0
check_ok "--change-recipe: the run goes on, its header records the values changed" \
    "adamw lr 0.02," "weight decay 0.05" \
    "recipe changed: --lr 0.02 (the checkpoint's: 0.01), --weight-decay 0.05 (the checkpoint's: 0.1)" \
    -- "$CLTRAIN_BIN" train --data "$D" --resume "$R4" --lr 0.02 --weight-decay 0.05 \
    --change-recipe --log-every 0 --metrics "$tmp/rc.jsonl" --save "$tmp/rc_changed.safetensors"
grep -qF '{"event":"recipe_change","step":4,"changes":{"lr":{"checkpoint":"0.01","run":"0.02"},"weight-decay":{"checkpoint":"0.1","run":"0.05"}}}' \
    "$tmp/rc.jsonl" || fail "--metrics does not record the recipe's change: $(cat "$tmp/rc.jsonl")"
echo "ok: --metrics records the recipe's change"
recipe_of "$tmp/rc_changed.safetensors" | grep -qF '"lr":0.02,' ||
    fail "the changed run saved: $(recipe_of "$tmp/rc_changed.safetensors")"
echo "ok: the changed run's checkpoint holds its new recipe"
check_bad --code 2 "--change-recipe cannot change the optimizer or precision to fp16" \
    "--optimizer: given sgd, the checkpoint's adamw" "--precision: given fp16, the checkpoint's bf16" \
    "not even with --change-recipe" "--init" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$R4" --optimizer sgd --precision fp16 --change-recipe
check_bad --code 2 "--change-recipe without --resume" "--change-recipe applies to --resume" -- \
    "$CLTRAIN_BIN" train --data "$D" --model "$M" --steps 1 --change-recipe
"$CLTRAIN_BIN" train --data "$D" --model "$M" --optimizer sgd --lr 0.05 --momentum 0.9 \
    --schedule step --step-size 3 --gamma 0.5 --epochs 1 --batch-size 32 --log-every 0 \
    --save "$tmp/sgd.safetensors" --quiet >/dev/null || fail "training the SGD checkpoint failed"
check_ok "resume continues an SGD step schedule" "sgd lr 0.05, momentum 0.9, step schedule x0.5 every 3 steps" \
    -- "$CLTRAIN_BIN" train --data "$D" --resume "$tmp/sgd.safetensors" --epochs 2 --log-every 0
check_bad --code 2 "resume of SGD with other momentum, step size, gamma, warm-up" \
    "--momentum: given 0.5, the checkpoint's 0.9" "--nesterov: given on, the checkpoint's off" \
    "--warmup: given 1, the checkpoint's 0" "--gamma: given 0.1, the checkpoint's 0.5" \
    "--step-size: given 2, the checkpoint's 3" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$tmp/sgd.safetensors" --momentum 0.5 --nesterov \
    --warmup 1 --gamma 0.1 --step-size 2
check_bad --code 2 "resume with another --model names both specs" \
    'the checkpoint'"'"'s model is "linear 8, relu, linear 3"' \
    '--model gives "linear 9, relu, linear 3"' -- resume_ "$ck" --model "linear 9, relu, linear 3"
check_ok "resume with the checkpoint's model spelt otherwise" -- \
    resume_ "$ck" --model "linear 8,relu,linear 3"
# --betas and --clip-grad: in the recipe, taken on resume, a difference named; the gradient norm
# at log points (progress line and --metrics)
C="$tmp/clip.safetensors"
check_ok "train with --betas and --clip-grad" "betas 0.9,0.95" "gradient norm clipped to 0.5" \
    "grad_norm " -- "$CLTRAIN_BIN" train --data "$D" --model "$M" --optimizer adamw \
    --betas 0.9,0.95 --clip-grad 0.5 --epochs 1 --batch-size 32 --log-every 2 \
    --metrics "$tmp/clip.jsonl" --save "$C"
python3 - "$tmp/clip.jsonl" <<'EOF' || fail "--clip-grad metrics: $(cat "$tmp/clip.jsonl")"
import json, math, sys
logs = [e for e in map(json.loads, open(sys.argv[1])) if e["event"] == "log"]
assert logs and all(math.isfinite(e["grad_norm"]) and e["grad_norm"] > 0 for e in logs), logs
EOF
echo "ok: --metrics log lines hold grad_norm"
recipe_of "$C" | grep -qF '"beta1":0.9,"beta2":0.95,' || fail "recipe: $(recipe_of "$C")"
recipe_of "$C" | grep -qF '"clip_grad":0.5,' || fail "recipe: $(recipe_of "$C")"
echo "ok: the recipe holds the betas and the clipping norm"
check_ok "resume takes --betas and --clip-grad from the recipe" "betas 0.9,0.95" \
    "gradient norm clipped to 0.5" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$C" --epochs 2 --log-every 0
check_bad --code 2 "resume with other --betas and --clip-grad: both named" \
    "--betas: given 0.9,0.99, the checkpoint's 0.9,0.95" \
    "--clip-grad: given 1, the checkpoint's 0.5" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$C" --epochs 2 --betas 0.9,0.99 --clip-grad 1
check_ok "resume with the same --betas given" "resuming" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$C" --epochs 2 --betas 0.9,0.95 --log-every 0
"$CLTRAIN_BIN" train --data "$D" --model "$M" --epochs 1 --batch-size 32 --log-every 2 \
    --metrics "$tmp/noclip.jsonl" --quiet >/dev/null || fail "training without clipping failed"
! grep -q grad_norm "$tmp/noclip.jsonl" || fail "grad_norm without --clip-grad"
echo "ok: no grad_norm without --clip-grad"
ck_edit "$R4" "$tmp/norecipe.safetensors" drop-meta recipe
check_ok "resume of a checkpoint without a recipe: the options given, with a note" \
    "does not record its run's recipe" "adamw lr 0.001, weight decay 0.01;" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$tmp/norecipe.safetensors" --batch-size 16 \
    --accumulate 2 --precision bf16 --optimizer adamw --log-every 0
ck_edit "$R" "$tmp/badrecipe.safetensors" set-meta recipe '{"optimizer":"adam"}'
check_bad "eval, a recipe without its values" '"recipe"' '"schedule"' -- \
    eval_ "$tmp/badrecipe.safetensors"
ck_edit "$R" "$tmp/badrecipe.safetensors" set-meta recipe \
    "$(recipe_of "$R" | sed 's/"beta2":0.999/"beta2":1.5/')"
check_bad "eval, a recipe value out of range" '"recipe"' '"beta2"' -- \
    eval_ "$tmp/badrecipe.safetensors"
ck_edit "$R" "$tmp/pokerecipe.safetensors" poke-meta recipe \
    "$(recipe_of "$R" | sed 's/"lr":0.01/"lr":0.1/')"
check_bad "resume, the recipe edited after saving" "changed after it was written" -- \
    "$CLTRAIN_BIN" train --data "$D" --resume "$tmp/pokerecipe.safetensors"

# -- 2. integrity: 300 bytes of 0.weight inverted ----------------------------------------------
ck_edit "$ck" "$tmp/flip.safetensors" flip 0.weight 300
for cmd in eval_ predict_ resume_ init_; do
    check_bad "$cmd of a checkpoint with flipped bytes" "flip.safetensors" '"0.weight"' \
        "damaged" -- $cmd "$tmp/flip.safetensors"
done
ck_edit "$ck" "$tmp/nocrc.safetensors" drop-meta crc32c
check_ok "eval without checksums: a note" "has no checksums" "accuracy" -- \
    eval_ "$tmp/nocrc.safetensors"

# trailing bytes after the last tensor (the file's size against the header's end)
cp "$ck" "$tmp/pad.safetensors"
printf 'xyz' >>"$tmp/pad.safetensors"
size=$(wc -c <"$tmp/pad.safetensors")
for cmd in eval_ predict_ resume_ init_; do
    check_bad "$cmd of a checkpoint with 3 trailing bytes" "pad.safetensors" "is $size bytes" \
        "accounts for $((size - 3))" -- $cmd "$tmp/pad.safetensors"
done
# a FIFO with no writer: refused at once (timeout: a regression must not hang the suite)
mkfifo "$tmp/fifo.safetensors"
fifo="$tmp/fifo.safetensors"
T="timeout 10 $CLTRAIN_BIN"
check_bad "eval --load of a FIFO" "fifo.safetensors" "FIFO" "not a regular file" -- \
    $T eval --load "$fifo" --data "$D"
check_bad "predict --load of a FIFO" "fifo.safetensors" "FIFO" -- \
    $T predict --load "$fifo" --data "$D" --output "$tmp/p.csv"
check_bad "train --resume of a FIFO" "fifo.safetensors" "FIFO" -- \
    $T train --data "$D" --epochs 3 --batch-size 32 --resume "$fifo"
check_bad "train --init of a FIFO" "fifo.safetensors" "FIFO" -- \
    $T train --data "$D" --model "$M" --steps 2 --init "$fifo"

# the metadata's own checksum: an edit of any value after cltrain wrote it is refused
python3 - "$ck" "$tmp/meta" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
meta = json.loads(raw[8:8 + n])["__metadata__"]
with open(sys.argv[2], "w") as f:
    f.write("%s\n%s\n%s\n" % (meta["input_mean"], meta["model"], meta["step"]))
PY
mean=$(sed -n 1p "$tmp/meta")
spec=$(sed -n 2p "$tmp/meta")
step=$(sed -n 3p "$tmp/meta")
case $mean in
"[0"*) mean9="[9${mean#\[0}" ;;
0*) mean9="9${mean#0}" ;;
*) fail "input_mean of the checkpoint is $mean, expected 0 or [0, ..." ;;
esac
ck_edit "$ck" "$tmp/mean9.safetensors" poke-meta input_mean "$mean9"
ck_edit "$ck" "$tmp/tanh.safetensors" poke-meta model "$(echo "$spec" | sed 's/relu/tanh/')"
ck_edit "$ck" "$tmp/scale.safetensors" poke-meta input_scale 0.0392156876
ck_edit "$ck" "$tmp/shape.safetensors" poke-meta input_shape 1,2,8
ck_edit "$ck" "$tmp/step.safetensors" poke-meta step $((step - 3))
for edit in mean9 tanh scale shape step; do
    for cmd in eval_ predict_ resume_ init_; do
        check_bad "$cmd, $edit changed after saving" "$edit.safetensors" "metadata was changed" \
            -- $cmd "$tmp/$edit.safetensors"
    done
done
ck_edit "$ck" "$tmp/oldmeta.safetensors" drop-meta crc32c_metadata
check_ok "eval of a file without a metadata checksum (an older cltrain's)" "accuracy" -- \
    eval_ "$tmp/oldmeta.safetensors"
[ ! -s "$tmp/err" ] || fail "eval of an older file printed: $(cat "$tmp/err")"

# -- 3. non-finite weights ----------------------------------------------------------------------
ck_edit "$ck" "$tmp/nan.safetensors" set 2.weight 5 nan
ck_edit "$ck" "$tmp/inf.safetensors" set 0.bias 1 -inf
for cmd in eval_ predict_ resume_ init_; do
    check_bad "$cmd of a checkpoint with a NaN" '"2.weight"' "NaN" "element 5" -- \
        $cmd "$tmp/nan.safetensors"
    check_bad "$cmd of a checkpoint with an infinity" '"0.bias"' "infinity" -- \
        $cmd "$tmp/inf.safetensors"
done

# values outside their domain (checksums valid): a negative variance or second moment, a
# weight beyond 1e30 (refused on load), and finite weights below it so large together that the
# outputs overflow (a NaN loss is never printed with exit 0)
ck_edit "$ck" "$tmp/vneg.safetensors" set optim.2.weight.exp_avg_sq 4 -0.5
check_bad "resume with a negative Adam second moment" '"optim.2.weight.exp_avg_sq"' \
    "element 4" "-0.5" "negative" -- resume_ "$tmp/vneg.safetensors"
ck_edit "$ck" "$tmp/big.safetensors" set 2.weight 4 3e38
for cmd in eval_ predict_ resume_ init_; do
    check_bad "$cmd with a weight of 3e38" '"2.weight"' "element 4" "3e+38" "overflows" -- \
        $cmd "$tmp/big.safetensors"
done
B="linear 8, batchnorm, relu, linear 3"
"$CLTRAIN_BIN" train --data "$D" --model "$B" --epochs 1 --batch-size 32 --log-every 0 \
    --save "$tmp/bn.safetensors" --quiet >/dev/null || fail "training the batchnorm model failed"
ck_edit "$tmp/bn.safetensors" "$tmp/bnneg.safetensors" set 1.running_var 2 -3
for cmd in eval_ predict_ resume_; do
    check_bad "$cmd with a negative batchnorm running variance" '"1.running_var"' "element 2" \
        "-3" "negative" -- $cmd "$tmp/bnneg.safetensors"
done
check_bad "init with a negative batchnorm running variance" '"1.running_var"' "negative" -- \
    "$CLTRAIN_BIN" train --data "$D" --model "$B" --steps 2 --init "$tmp/bnneg.safetensors"
# (each value below the load bound of 1e30, their products beyond float32's 3.4e38)
ck_edit "$ck" "$tmp/huge.safetensors" set 0.bias 0 9e29 # hidden unit 0 at 9e29
ck_edit "$tmp/huge.safetensors" "$tmp/huge.safetensors" set 2.weight 0 9e29 # logit 0 inf
check_bad "eval whose loss is not finite" "huge.safetensors" "loss" "not finite" -- \
    eval_ "$tmp/huge.safetensors"
# hidden units at 9e29 and weights +-9e29: logit 0 is inf - inf, NaN probabilities
ck_edit "$ck" "$tmp/huge.safetensors" set 0.bias 0 9e29
ck_edit "$tmp/huge.safetensors" "$tmp/huge.safetensors" set 0.bias 1 9e29
ck_edit "$tmp/huge.safetensors" "$tmp/huge.safetensors" set 2.weight 0 9e29
ck_edit "$tmp/huge.safetensors" "$tmp/huge.safetensors" set 2.weight 1 -9e29
check_bad "eval whose logits are NaN" "loss" "not finite" -- eval_ "$tmp/huge.safetensors"
check_bad "predict whose probabilities are not finite" "not finite" "sample 0" -- \
    predict_ "$tmp/huge.safetensors"

# -- 4. metadata against itself and the data ---------------------------------------------------
ck_edit "$ck" "$tmp/c11.safetensors" set-meta classes 11
check_bad "eval, classes 11 against the spec (never an empty message)" "contradicts itself" \
    "classes 11" "3 outputs" -- eval_ "$tmp/c11.safetensors"
ck_edit "$ck" "$tmp/reg.safetensors" set-meta task regression
check_bad "eval, task regression with 3 classes" "regression" "classes 3" -- \
    eval_ "$tmp/reg.safetensors"
ck_edit "$ck" "$tmp/v2.safetensors" set-meta format cltrain-2
check_bad "eval, unknown format version" '"cltrain-2"' "cltrain-1" -- eval_ "$tmp/v2.safetensors"
ck_edit "$ck" "$tmp/fshape.safetensors" float-shape 0.weight
check_bad "eval, a shape written as 8.0" '"0.weight"' "shape" -- eval_ "$tmp/fshape.safetensors"
python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
shape = json.loads(raw[8:8 + n])["__metadata__"].get("input_shape")
sys.exit(0 if shape == "1,4,4" else "input_shape is %r, expected \"1,4,4\"" % shape)' "$ck" ||
    fail "the checkpoint of an IDX model does not record its input shape"
echo "ok: input_shape 1,4,4 recorded"
ck_edit "$ck" "$tmp/ishape.safetensors" set-meta input_shape 1,4,5
check_bad "eval, input_shape against features" '"input_shape"' '"1,4,5"' "16 features" -- \
    eval_ "$tmp/ishape.safetensors"
ck_edit "$ck" "$tmp/ishape.safetensors" set-meta input_shape 4,4
check_bad "eval, a sequence input_shape under a per-position head" "output per sample is 4x3" \
    "(T, C) = (4, 4)" "flatten" -- eval_ "$tmp/ishape.safetensors"
ck_edit "$ck" "$tmp/ishape.safetensors" set-meta input_shape 1,,16
check_bad "eval, input_shape with an empty dimension" '"1,,16"' -- eval_ "$tmp/ishape.safetensors"
ck_edit "$ck" "$tmp/ishape.safetensors" set-meta input_shape 2,2,4
check_bad "resume of a model saved for another input shape" "2x2x4" "1x4x4" -- \
    resume_ "$tmp/ishape.safetensors"
ck_edit "$ck" "$tmp/amp.safetensors" add-amp
check_bad "resume of an fp16 checkpoint by an fp32 run" "amp.scaler_state" "--precision fp16" -- \
    resume_ "$tmp/amp.safetensors"
printf 'a,b,label\n1,2,0\n3,4,1\n5,6,0\n7,8,1\n' >"$tmp/two.csv"
"$CLTRAIN_BIN" train --data "csv:$tmp/two.csv" --model "linear 4, relu, linear 2" --steps 1 \
    --batch-size 2 --save "$tmp/two.safetensors" --quiet >/dev/null || fail "2-class model"
printf 'a,b,label\n1,2,0\n3,4,2\n5,6,1\n7,8,1\n' >"$tmp/three.csv"
check_bad "eval of a 2-class model on 3-class data" "2 classes" "label 2" -- \
    "$CLTRAIN_BIN" eval --load "$tmp/two.safetensors" --data "csv:$tmp/three.csv"
# a subset that lacks a class evaluates with the checkpoint's classes (no label-gap error)
printf 'a,b,label\n1,2,2\n3,4,2\n5,6,0\n' >"$tmp/gap.csv"
"$CLTRAIN_BIN" train --data "csv:$tmp/three.csv" --model "linear 4, relu, linear 3" --steps 1 \
    --batch-size 2 --save "$tmp/three.safetensors" --quiet >/dev/null || fail "3-class model"
"$CLTRAIN_BIN" eval --load "$tmp/three.safetensors" --data "csv:$tmp/gap.csv" --split train >/dev/null \
    2>"$tmp/gap.err" || fail "eval of a 3-class model on data without class 1: $(cat "$tmp/gap.err")"
echo "ok: eval of a 3-class model on data without class 1"
check_bad "--init of a 2-class model on 3-class data" "2 outputs" "3" -- \
    "$CLTRAIN_BIN" train --data "csv:$tmp/three.csv" --model "linear 4, relu, linear 3" \
    --steps 1 --batch-size 2 --init "$tmp/two.safetensors"
check_bad "--resume of a classification model by a regression run" "regression" -- \
    "$CLTRAIN_BIN" train --data "csv:$tmp/two.csv" --task regression --model \
    "linear 4, relu, linear 1" --steps 2 --batch-size 2 --resume "$tmp/two.safetensors"

echo "cli_checkpoint: all passed"
