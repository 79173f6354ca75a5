#!/bin/sh
# The README's PyTorch block (the first ```python block under "## Checkpoints" in README.md,
# read from there so that it cannot drift) runs as it stands with PyTorch and numpy alone (no
# safetensors package) on a checkpoint of its model (784-256-128-10, standardised inputs) and
# predicts the classes `cltrain predict` writes. Skips (exit 77) without a Python that imports
# torch and numpy (Debian's /usr/bin/python3 with python3-torch first). Needs CLTRAIN_BIN.
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
readme="$(cd "$(dirname "$0")/../.." && pwd)/README.md"
[ -f "$readme" ] || fail "$readme is missing"
torch_python=""
for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null && "$py" -c "import torch, numpy" 2>/dev/null; then
        torch_python=$py
        break
    fi
done
[ -n "$torch_python" ] || skip "PyTorch is missing (neither /usr/bin/python3 nor python3 imports torch and numpy)"
make_tmp

# the block, from README.md
awk '/^## Checkpoints/ { in_section = 1; next }
     /^## / { in_section = 0 }
     in_section && !done && /^```python$/ { in_block = 1; next }
     in_block && /^```$/ { in_block = 0; done = 1; next }
     in_block { print }' "$readme" >"$tmp/snippet.py"
[ -s "$tmp/snippet.py" ] || fail "README.md has no \`\`\`python block under '## Checkpoints'"
grep -q "fashion-mlp.safetensors" "$tmp/snippet.py" ||
    fail "the README's block does not load fashion-mlp.safetensors: $(cat "$tmp/snippet.py")"

# 784 pixel columns (0-255) and a label 0-9, every class present
python3 - "$tmp" <<'PY'
import random, sys
r = random.Random(11)
for name, n in (("train", 60), ("test", 25)):
    with open("%s/%s.csv" % (sys.argv[1], name), "w") as f:
        for i in range(n):
            label = i % 10
            px = [min(255, max(0, int(r.gauss(40 + 20 * label, 60)))) for _ in range(784)]
            f.write("%d,%s\n" % (label, ",".join(map(str, px))))
PY
check_ok "train the README's model" -- "$CLTRAIN_BIN" train \
    --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 --normalize \
    --model "linear 256, relu, linear 128, relu, linear 10" --steps 4 --batch-size 20 \
    --log-every 0 --save "$tmp/fashion-mlp.safetensors"
check_ok "cltrain predict" -- "$CLTRAIN_BIN" predict --load "$tmp/fashion-mlp.safetensors" \
    --input "$tmp/test.csv" --label-column 0 --output "$tmp/pred.csv"

# the block as it stands, then its predict() against cltrain's classes
cat "$tmp/snippet.py" - >"$tmp/run.py" <<'PY'

import csv
rows = [list(map(int, r)) for r in csv.reader(open("test.csv"))]
pixels = torch.tensor([r[1:] for r in rows], dtype=torch.uint8)
with torch.no_grad():
    got = predict(pixels).tolist()
want = [int(r["predicted"]) for r in csv.DictReader(open("pred.csv"))]
assert got == want, "the README's predict() %s, cltrain predict %s" % (got, want)
print("README block: %d classes as cltrain predict's" % len(got))
PY
check_ok "the README's block" "as cltrain predict's" -- \
    sh -c 'cd "$1" && "$2" run.py' sh "$tmp" "$torch_python"
