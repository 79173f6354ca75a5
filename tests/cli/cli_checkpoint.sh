#!/bin/sh
# Checkpoints say what run they belong to and are verified (issue 12): --resume with another
# geometry (batch size, seed, data) is refused naming each difference, a split of the same
# effective batch is re-planned and printed, an older file without geometry resumes with a note;
# a tensor whose bytes changed fails its CRC-32C on eval, predict, --resume and --init, naming
# it, a file without checksums loads with a note; NaN/inf weights are refused; metadata that
# contradicts itself or the data (classes, task, format version, shapes written as 8.0,
# amp.scaler_state on an fp32 run) is an error with a message; --init takes a plain PyTorch
# state dict written by tools/checkpoint_numpy.py --state-dict. Failures: exit 1 or 2 and ONE
# stderr line. Needs CLTRAIN_BIN (meson test); the state-dict cases need numpy (else skipped).
set -eu

fail() {
    echo "cli_checkpoint: FAIL: $*" >&2
    exit 1
}

[ -n "${CLTRAIN_BIN:-}" ] || fail "CLTRAIN_BIN is not set (run through meson test)"
command -v python3 >/dev/null || fail "python3 is needed to write the test data"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# write_idx DIR NTRAIN NTEST [damage]: 4x4 images, 3 classes (as in cli_errors.sh)
write_idx() {
    python3 - "$@" <<'EOF'
import gzip, os, random, struct, sys
d, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
damage = sys.argv[4] if len(sys.argv) > 4 else ""
os.makedirs(d, exist_ok=True)
def images(n, seed):
    r = random.Random(seed)
    return [r.getrandbits(8) for _ in range(n * 16)]
def labels(px, n):  # 0, 1, 2 as the top half is darker than, like, brighter than the bottom
    out = []
    for i in range(n):
        d = sum(px[i * 16 + 8:i * 16 + 16]) - sum(px[i * 16:i * 16 + 8])
        out.append(0 if d < -127 else (1 if d <= 127 else 2))
    return out
for split, n, seed in (("train", ntrain, 1), ("t10k", ntest, 2)):
    px = images(n, seed)
    lb = labels(px, n)
    magic = 0x804 if (damage == "magic" and split == "train") else 0x803
    img = struct.pack(">IIII", magic, n, 4, 4) + bytes(px)
    if damage == "short" and split == "train":
        img = img[:-10]
    nl = n - 1 if (damage == "count" and split == "train") else n
    lab = struct.pack(">II", 0x801, nl) + bytes(lb[:nl])
    with gzip.open(os.path.join(d, split + "-images-idx3-ubyte.gz"), "wb") as f:
        f.write(img)
    with gzip.open(os.path.join(d, split + "-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(lab)
EOF
}

# ck_edit IN OUT OP [ARGS]: rewrites a checkpoint. Ops: drop-meta KEY..., set-meta KEY VALUE,
# flip TENSOR N (invert N bytes of its data, checksums kept), set TENSOR INDEX VALUE (f32, the
# checksum recomputed), add-amp (an I32 amp.scaler_state, checksummed), float-shape TENSOR
# (its shape written as 8.0), hand-made MODEL CLASSES (a self-consistent file, random weights).
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
elif op == "set-meta":
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
hdr["__metadata__"] = meta
hb = json.dumps(hdr).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(dst, "wb").write(struct.pack("<Q", len(hb)) + hb + out)
PY
}

# check_bad LABEL NEEDLE... -- COMMAND: exit 1 or 2, one stderr line holding every NEEDLE
check_bad() {
    label=$1
    shift
    needles=""
    while [ "$1" != "--" ]; do
        needles="$needles
$1"
        shift
    done
    shift
    set +e
    "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    rc=$?
    set -e
    [ "$rc" -ne 0 ] || fail "$label: exited 0: $(cat "$tmp/bad.out")"
    [ "$rc" -eq 1 ] || [ "$rc" -eq 2 ] ||
        fail "$label: exit code $rc (expected 1 or 2): $(cat "$tmp/bad.err")"
    lines=$(wc -l <"$tmp/bad.err")
    [ "$lines" -eq 1 ] || fail "$label: $lines lines on stderr, expected 1: $(cat "$tmp/bad.err")"
    echo "$needles" | while IFS= read -r n; do
        [ -z "$n" ] && continue
        grep -qF -- "$n" "$tmp/bad.err" ||
            { echo "cli_checkpoint: FAIL: $label: stderr lacks '$n': $(cat "$tmp/bad.err")" >&2
              exit 1; }
    done || exit 1
    echo "ok: $label: $(cat "$tmp/bad.err")"
}

# check_ok LABEL NEEDLE... -- COMMAND: exit 0, every NEEDLE in stdout + stderr
check_ok() {
    label=$1
    shift
    needles=""
    while [ "$1" != "--" ]; do
        needles="$needles
$1"
        shift
    done
    shift
    "$@" >"$tmp/ok.out" 2>&1 || fail "$label: failed: $(cat "$tmp/ok.out")"
    echo "$needles" | while IFS= read -r n; do
        [ -z "$n" ] && continue
        grep -qF -- "$n" "$tmp/ok.out" ||
            { echo "cli_checkpoint: FAIL: $label: output lacks '$n': $(cat "$tmp/ok.out")" >&2
              exit 1; }
    done || exit 1
    echo "ok: $label"
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

# -- 2. integrity: 300 bytes of 0.weight inverted ----------------------------------------------
ck_edit "$ck" "$tmp/flip.safetensors" flip 0.weight 300
for cmd in eval_ predict_ resume_ init_; do
    check_bad "$cmd of a checkpoint with flipped bytes" "flip.safetensors" '"0.weight"' \
        "damaged" -- $cmd "$tmp/flip.safetensors"
done
ck_edit "$ck" "$tmp/nocrc.safetensors" drop-meta crc32c
check_ok "eval without checksums: a note" "has no checksums" "accuracy" -- \
    eval_ "$tmp/nocrc.safetensors"

# -- 3. non-finite weights ----------------------------------------------------------------------
ck_edit "$ck" "$tmp/nan.safetensors" set 2.weight 5 nan
ck_edit "$ck" "$tmp/inf.safetensors" set 0.bias 1 -inf
for cmd in eval_ predict_ resume_ init_; do
    check_bad "$cmd of a checkpoint with a NaN" '"2.weight"' "NaN" "element 5" -- \
        $cmd "$tmp/nan.safetensors"
    check_bad "$cmd of a checkpoint with an infinity" '"0.bias"' "infinity" -- \
        $cmd "$tmp/inf.safetensors"
done

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

# -- 5. --init from a plain PyTorch-layout state dict -------------------------------------------
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    np_tool="$here/../../tools/checkpoint_numpy.py"
    /usr/bin/python3 "$np_tool" --state-dict "$ck" "$tmp/sd.safetensors"
    /usr/bin/python3 "$np_tool" --state-dict "$ck" "$tmp/sdpt.safetensors" --format-pt
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
else
    echo "skipped: --init from a state dict (numpy is missing for /usr/bin/python3)"
fi

echo "cli_checkpoint: all passed"
