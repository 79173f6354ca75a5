#!/bin/sh
# A language model trained end to end from the command line on a small text this script writes:
# embed, posembed, a pre-norm residual MLP block, layernorm and the tied head. The run evaluates
# its starting weights first ("step 0", about ln(V); a resumed run does not); the loss falls
# well below ln(V); the validation loss is printed in nats and bits per character, and
# `cltrain eval` gives the same figure from the checkpoint; a run saved at step k and resumed
# to n writes the same tensors as a straight run to n, and two runs write the same bits (in bf16
# and fp16 too); the dry run's estimate equals the accountant (in every precision); bad inputs
# (empty and 1-character texts, a block longer than the validation split, a tied head without
# its embedding, text data with an image model and an image data set with an embed model, a
# text the checkpoint's vocabulary cannot encode) each get one clear error.
. "$(dirname "$0")/../lib.sh"
need_exe CLTRAIN_BIN
need_python3 "to write the text and compare checkpoints"
make_tmp
C=$CLTRAIN_BIN

python3 - "$tmp/tiny.txt" <<'PY'
import random, sys
random.seed(1)
words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'red', 'hat']
lines = [' '.join(random.choice(words) for _ in range(6)) + '.' for _ in range(600)]
open(sys.argv[1], 'w').write('\n'.join(lines) + '\n')
PY
M="embed 32, posembed, residual { layernorm, linear 64, gelu, linear 32 }, layernorm, linear V nobias tied"
RUN="--data text:$tmp/tiny.txt --block 32 --batch-size 8 --eval-batches 4 --optimizer adamw --lr 3e-3 --clip-grad 1 --log-every 0"

# train: the loss falls well below ln(15) = 2.71 nats
check_ok "train a tiny language model" "vocabulary of 15 characters" "is 2.45 epochs" \
    "bits per character" "step 0: val loss" "tokens/s)" -- $C train $RUN --model "$M" --steps 120 \
    --save "$tmp/a.safetensors"
# the starting weights are evaluated first (nanoGPT's "step 0"): about ln(15) = 2.708
start=$(sed -n 's/^step 0: val loss \([0-9.]*\) .*before training$/\1/p' "$tmp/out")
python3 -c "import math, sys; sys.exit(abs(float(sys.argv[1]) - math.log(15)) > 0.05)" \
    "${start:-nan}" || fail "step 0: val loss '$start', not about ln(15): $(cat "$tmp/out")"
echo "ok: step 0: val loss $start before training"
val=$(sed -n 's/.*val loss \([0-9.]*\) (\([0-9.]*\) bits per character).*/\1 \2/p' "$tmp/out" | tail -1)
[ -n "$val" ] || fail "no validation loss in: $(cat "$tmp/out")"
python3 -c "
import math, sys
nats, bits = map(float, sys.argv[1:3])
assert nats < 0.6 * math.log(15), 'validation loss %g nats: not well below ln(15)' % nats
assert abs(bits - nats / math.log(2)) < 1e-3, 'bits per character %g for %g nats' % (bits, nats)
" $val || fail "validation loss $val"
echo "ok: validation loss $val (nats, bits per character) below ln(15)"

# eval from the checkpoint: the same fixed windows, the same loss
nats=${val% *}
check_ok "eval on text" "loss $nats nats per token" "perplexity" -- \
    $C eval --load "$tmp/a.safetensors" --data "text:$tmp/tiny.txt" --eval-batches 4

# resume at step 50 to 120 == straight to 120; a second straight run: the same bits
check_ok "save at step 50" -- $C train $RUN --model "$M" --steps 50 --save "$tmp/half.safetensors" --quiet
check_ok "resume to 120" -- $C train $RUN --resume "$tmp/half.safetensors" --steps 120 \
    --save "$tmp/resumed.safetensors" --quiet --metrics "$tmp/resumed.jsonl"
# a resumed run does not evaluate again before its first step (at 50), only at its epochs' ends
evals=$(sed -n 's/.*"event":"eval","epoch":[0-9]*,"step":\([0-9]*\),.*/\1/p' "$tmp/resumed.jsonl" |
        tr '\n' ' ')
[ "$evals" = "98 120 " ] || fail "resume: evaluations at steps '$evals', expected 98 and 120"
check_ok "again to 120" -- $C train $RUN --model "$M" --steps 120 --save "$tmp/b.safetensors" --quiet
python3 - "$tmp/a.safetensors" "$tmp/resumed.safetensors" "$tmp/b.safetensors" <<'PY' ||
import json, struct, sys
def tensors(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop('__metadata__')
    return {k: b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]] for k, v in h.items()}, meta
a, meta = tensors(sys.argv[1])
names = sorted(k for k in a if not k.startswith('optim.'))
# names as the torch module's: the tied head (layer 5) has none of its own
assert names == ['0.weight', '1.weight', '2.body.0.bias', '2.body.0.weight', '2.body.1.bias',
                 '2.body.1.weight', '2.body.3.bias', '2.body.3.weight', '3.bias', '3.weight'], names
assert json.loads(meta['vocab'])['tokens'] == 'char', meta['vocab']
for other, what in ((sys.argv[2], 'resumed'), (sys.argv[3], 'second')):
    b, _ = tensors(other)
    assert sorted(a) == sorted(b), what
    diff = [k for k in a if a[k] != b[k]]
    assert not diff, '%s run differs in %s' % (what, diff)
PY
    fail "resume or determinism: see above"
echo "ok: resumed and repeated runs write the same tensors"
# a language model starts from GPT-2's weights (normal(0, 0.02)), --init-scheme pytorch from
# nn.Linear's (uniform in +-1/sqrt(32) for the MLP's first matrix: standard deviation 0.10);
# one step of a vanishing learning rate saves them
for scheme in default pytorch; do
    check_ok "init $scheme" -- $C train --data "text:$tmp/tiny.txt" --model "$M" --block 32 \
        --steps 1 --optimizer sgd --lr 1e-30 --init-scheme $scheme --log-every 0 --quiet \
        --save "$tmp/init-$scheme.safetensors"
done
python3 - "$tmp/init-default.safetensors" "$tmp/init-pytorch.safetensors" <<'PY' ||
import json, math, struct, sys
def sd(path, name):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    t = json.loads(b[8:8 + n])[name]
    lo, hi = t['data_offsets']
    v = struct.unpack('<%df' % ((hi - lo) // 4), b[8 + n + lo:8 + n + hi])
    m = sum(v) / len(v)
    return math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
gpt2, torch = sd(sys.argv[1], '2.body.1.weight'), sd(sys.argv[2], '2.body.1.weight')
assert abs(gpt2 - 0.02) < 0.0012, 'default on text: standard deviation %g, not 0.02' % gpt2
assert abs(torch - 1 / math.sqrt(3 * 32)) < 0.006, 'pytorch: standard deviation %g' % torch
PY
    fail "initial weights: see above"
echo "ok: a language model starts from normal(0, 0.02); --init-scheme pytorch from nn.Linear's"
# the window comes with the checkpoint (block 32 here, the default 64): without --block the run
# resumes, and a --block of another size is refused naming both
check_ok "resume without --block" "windows of 32 tokens" -- $C train --data "text:$tmp/tiny.txt" \
    --resume "$tmp/half.safetensors" --steps 52 --log-every 0
check_bad --code 2 "resume with another --block" "--block 16: $tmp/half.safetensors holds a model of windows of 32 tokens" \
    -- $C train --data "text:$tmp/tiny.txt" --resume "$tmp/half.safetensors" --steps 52 --block 16

# mixed precision: a bf16 run (and an fp16 one, its loss scaler's state in the checkpoint)
# resumed at step 20 writes the tensors of a straight run to 40
for prec in bf16 fp16; do
    check_ok "$prec: save at step 20" -- $C train $RUN --model "$M" --steps 20 --precision $prec \
        --save "$tmp/$prec-half.safetensors" --quiet
    check_ok "$prec: resume to 40" "precision $prec" -- $C train $RUN \
        --resume "$tmp/$prec-half.safetensors" --steps 40 --save "$tmp/$prec-resumed.safetensors"
    check_ok "$prec: straight to 40" -- $C train $RUN --model "$M" --steps 40 --precision $prec \
        --save "$tmp/$prec-straight.safetensors" --quiet
    python3 - "$tmp/$prec-straight.safetensors" "$tmp/$prec-resumed.safetensors" $prec <<'PY' ||
import json, struct, sys
def tensors(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop('__metadata__')
    return {k: b[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]] for k, v in h.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
assert ('amp.scaler_state' in a) == (sys.argv[3] == 'fp16'), sorted(a)
diff = [k for k in a if a[k] != b[k]]
assert not diff, 'the resumed run differs in %s' % diff
PY
        fail "$prec: resume: see above"
    echo "ok: $prec: the resumed run writes the straight run's tensors"
done

# the dry run: the estimate is the accountant's, to the byte, in fp32 and in 16 bits
for prec in fp32 bf16 fp16; do
    check_ok "dry run ($prec)" "dry run:" -- $C train $RUN --model "$M" --steps 10 --dry-run \
        --precision $prec
    python3 - "$tmp/out" <<'PY' || fail "dry run ($prec): $(grep 'dry run:' "$tmp/out")"
import re, sys
line = [l for l in open(sys.argv[1]) if l.startswith('dry run:')][0]
got = re.findall(r'\((\d+) bytes\)', line)
assert len(got) == 3 and len(set(got)) == 1, line
PY
    echo "ok: dry run ($prec) estimate == accountant"
done

# bad input
: >"$tmp/empty.txt"
printf 'a' >"$tmp/one.txt"
printf 'the cat sat on the mat\n' >"$tmp/short.txt"
printf 'the cat sat on the mat \303\251\n' >"$tmp/accent.txt"
check_bad --code 1 "an empty text" "empty.txt: the text is empty" -- \
    $C train --data "text:$tmp/empty.txt" --model "$M" --steps 1
check_bad --code 1 "a 1-character text" "one.txt: the text holds 1 character" -- \
    $C train --data "text:$tmp/one.txt" --model "$M" --steps 1
check_bad --code 2 "a block longer than the validation split" "--block 32" "validation split" \
    -- $C train --data "text:$tmp/tiny.txt,$tmp/short.txt" --block 32 --model "$M" --steps 1
check_bad --code 2 "tied without an embedding of its shape" "no embed layer before it has a (15, 16) table" \
    -- $C train $RUN --model "embed 8, posembed, linear 16, linear V nobias tied" --steps 1
check_bad --code 2 "text data with an image model" "must start with an embed layer" -- \
    $C train $RUN --model "linear 16, relu, linear V" --steps 1
check_bad --code 2 "a text run without --steps" "--steps N" -- $C train $RUN --model "$M"
write_csv "$tmp" 12 4
check_bad --code 2 "an image data set with an embed model" "trains on text" -- \
    $C train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 --model "embed 8, linear 3" \
    --steps 1
check_bad --code 1 "eval on text outside the vocabulary" "line 1, column 24" "(U+00E9) is not in the vocabulary" \
    -- $C eval --load "$tmp/a.safetensors" --data "text:$tmp/tiny.txt,$tmp/accent.txt"
check_bad --code 1 "resume on text outside the vocabulary" "(U+00E9) is not in the vocabulary" \
    -- $C train $RUN --resume "$tmp/half.safetensors" --data "text:$tmp/accent.txt,$tmp/tiny.txt" --steps 120
