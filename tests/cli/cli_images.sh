#!/bin/sh
# Image folders end to end (--data images:DIR) on PNG files this script writes with python3's
# zlib and struct: 8x8 grey images of three classes told apart by which edge is bright
# (down, left, up), in train/ and test/ folders; a run reaching at least 95 % test accuracy,
# the class names in the checkpoint's metadata, the second run reading the decoded cache, the
# streaming loader with augmentation, eval's confusion matrix and predict's class column with
# the names, predict on an image file and a folder, --val-split, --channels and --image-size,
# a bad file refused with its name or skipped with a count, and the flags' usage errors.
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the test images"
make_tmp

# -- data: DIR/train/CLASS/NNN.png (100 a class), DIR/test/CLASS/NNN.png (20 a class) and a
# folder of class folders without train/ (flat/, 40 a class) ---------------------------------
python3 - "$tmp" <<'EOF' || fail "writing the images failed"
import os, random, struct, sys, zlib

def png(path, w, h, rows, colour):
    def chunk(kind, data):
        c = zlib.crc32(kind + data) & 0xffffffff
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", c)
    raw = b"".join(b"\0" + bytes(r) for r in rows)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2 if colour else 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
                + chunk(b"IEND", b""))

def image(cls, rnd):
    px = [[rnd.randrange(0, 60) for x in range(8)] for y in range(8)]
    for i in range(8):
        for j in range(3):
            y, x = {"down": (7 - j, i), "left": (i, j), "up": (j, i)}[cls]
            px[y][x] = rnd.randrange(180, 256)
    return px

root = sys.argv[1]
rnd = random.Random(5)
for top, split, count in (("img", "train", 100), ("img", "test", 20), ("flat", "", 40)):
    for cls in ("up", "left", "down"):
        d = os.path.join(root, top, split, cls)
        os.makedirs(d, exist_ok=True)
        for k in range(count):
            png(os.path.join(d, "%03d.png" % k), 8, 8, image(cls, rnd), False)
EOF

ck="$tmp/images.safetensors"
M="linear 3"
train() {
    "$CLTRAIN_BIN" train --model "$M" --epochs 4 --batch-size 32 --lr 0.05 --seed 3 "$@"
}
# the last epoch's test accuracy of $tmp/out, in percent
accuracy() {
    sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$tmp/out" | tail -1
}

# -- train: the classes from the folders, decoded, then read from the cache -----------------
check_ok "train on image folders" \
    "data: images:$tmp/img: 300 training and 60 test images of 1 x 8 x 8 (C x H x W), 3 classes (down, left, up); decoded" \
    -- train --data "images:$tmp/img" --save "$ck"
acc=$(accuracy)
python3 -c "import sys; sys.exit(0 if float('$acc') >= 95 else 1)" ||
    fail "train: test accuracy $acc%, expected at least 95%: $(cat "$tmp/out")"
python3 - "$ck" <<'EOF' || fail "the checkpoint's class_names"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = json.loads(f.read(n))["__metadata__"]
assert json.loads(meta["class_names"]) == ["down", "left", "up"], meta.get("class_names")
EOF
ls -a "$tmp/img" | grep -q '^\.cltrain-images-.*\.cache$' || fail "no cache beside the data"
check_ok "second run: the decoded cache" "read from the decoded cache" -- \
    train --data "images:$tmp/img" --epochs 1
# streaming and resident loaders, both with augmentation, give the same run
check_ok "streaming loader with --augment" -- \
    train --data "images:$tmp/img" --loader streaming --augment shift=1 --quiet
tail -1 "$tmp/out" | sed 's/, [0-9.]* s.*//' >"$tmp/streaming"
check_ok "resident loader with --augment" -- \
    train --data "images:$tmp/img" --loader resident --augment shift=1 --quiet
tail -1 "$tmp/out" | sed 's/, [0-9.]* s.*//' >"$tmp/resident"
cmp -s "$tmp/streaming" "$tmp/resident" ||
    fail "streaming and resident differ: $(cat "$tmp/streaming") / $(cat "$tmp/resident")"

# -- eval and predict: the names --------------------------------------------------------------
check_ok "eval with the confusion matrix's names" "test split of images:$tmp/img" -- \
    "$CLTRAIN_BIN" eval --load "$ck" --data "images:$tmp/img" --confusion
grep -q '^down ' "$tmp/out" && grep -q '^up ' "$tmp/out" && grep -q ' left ' "$tmp/out" ||
    fail "eval: the confusion matrix lacks the class names: $(cat "$tmp/out")"
check_ok "predict on the test split: a class column" "index,predicted,class,p0,p1,p2" -- \
    "$CLTRAIN_BIN" predict --load "$ck" --data "images:$tmp/img"
grep -q '^0,0,down,' "$tmp/out" || fail "predict: row 0 is not down: $(head -3 "$tmp/out")"
check_ok "predict on a folder of images" "index,file,predicted,class,p0" -- \
    "$CLTRAIN_BIN" predict --load "$ck" --input "$tmp/img/test/left"
[ "$(grep -c ',1,left,' "$tmp/out")" -ge 18 ] ||
    fail "predict: fewer than 18 of 20 left images called left: $(cat "$tmp/out")"
grep -q "^0,$tmp/img/test/left/000.png,1,left," "$tmp/out" ||
    fail "predict: the file column: $(head -3 "$tmp/out")"
check_ok "predict on one image" "index,file,predicted,class" -- \
    "$CLTRAIN_BIN" predict --load "$ck" --input "$tmp/img/test/up/007.png"
[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "predict one image: $(cat "$tmp/out")"

# -- options: hold-out, channels, size ----------------------------------------------------------
check_ok "--val-split" "90 training and 30 test images" -- \
    train --data "images:$tmp/flat" --val-split 0.25 --epochs 1
check_ok "--channels 3 --image-size 4,6" "of 3 x 4 x 6 (C x H x W)" -- \
    train --data "images:$tmp/img" --channels 3 --image-size 4,6 --epochs 1 --save "$tmp/rgb.safetensors"
check_ok "predict reads images in the checkpoint's shape" "index,file,predicted,class" -- \
    "$CLTRAIN_BIN" predict --load "$tmp/rgb.safetensors" --input "$tmp/img/test/up"

# -- bad files ----------------------------------------------------------------------------------
echo "label,pixels" >"$tmp/img/train/up/notes.csv"
check_bad "a file that is not an image" "$tmp/img/train/up/notes.csv" "not an image" -- \
    train --data "images:$tmp/img" --epochs 1
check_ok "--skip-bad-images" "1 bad files skipped" -- \
    train --data "images:$tmp/img" --epochs 1 --skip-bad-images
rm "$tmp/img/train/up/notes.csv"
head -c 60 "$tmp/img/test/up/000.png" >"$tmp/cut.png"
check_bad "predict: a truncated image" "$tmp/cut.png" -- \
    "$CLTRAIN_BIN" predict --load "$ck" --input "$tmp/cut.png"
mkdir "$tmp/img/train/zebra"
check_bad "an empty class folder" "$tmp/img/train/zebra" "empty class folder" -- \
    train --data "images:$tmp/img" --epochs 1
rmdir "$tmp/img/train/zebra"
mkdir -p "$tmp/other/train/cat" "$tmp/other/train/dog" "$tmp/other/train/eel"
for c in cat dog eel; do cp "$tmp/img/train/up/000.png" "$tmp/other/train/$c/"; done
check_bad "eval on other class names" "class 0 is 'down' in the checkpoint but 'cat'" -- \
    "$CLTRAIN_BIN" eval --load "$ck" --data "images:$tmp/other" --split train

# -- usage errors -------------------------------------------------------------------------------
check_bad --code 2 "--channels 2" "--channels 2: expected 1 (grey) or 3 (RGB)" -- \
    train --data "images:$tmp/img" --channels 2
check_bad --code 2 "--image-size 8" "--image-size 8: expected H,W" -- \
    train --data "images:$tmp/img" --image-size 8
check_bad --code 2 "--val-split on IDX data" "--val-split applies to image folders" -- \
    train --data "idx:$tmp/nothing" --val-split 0.1
check_bad "--val-split with train/ folders" "--val-split" -- \
    train --data "images:$tmp/img" --val-split 0.1
check_bad --code 2 "predict --image-size" "come from the checkpoint" -- \
    "$CLTRAIN_BIN" predict --load "$ck" --input "$tmp/img/test/up" --image-size 4,4
echo "cli_images: all checks passed"
