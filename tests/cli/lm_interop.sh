#!/bin/sh
# A language model's checkpoint between cltrain, numpy and PyTorch. A tiny GPT (embed,
# posembed, a pre-norm attention block and MLP block, layernorm, the tied head) trained a few steps by
# cltrain is evaluated on the same fixed validation windows by
#   numpy   tools/checkpoint_numpy.py CKPT text:FILE (numpy alone): the loss `cltrain eval`
#           prints, for a character model (also with a separate validation file) and a byte
#           model; a text outside the vocabulary is refused naming the character; weights
#           numpy writes as a plain state dict start a `cltrain train --init` run whose first
#           evaluation (step 0, before training) is numpy's loss for them;
#   torch   tools/torch_gpt.py --load CKPT (load_state_dict(strict=True)): the loss `cltrain
#           eval` prints; torch_gpt.py --save-init's weights, for a spec written as cltrain
#           accepts it (newlines, a comment, capitals, "linear v"), start a cltrain --init run
#           whose step-0 evaluation is torch's loss for them, and numpy's.
# Agreement: 1e-4 nats (fp32 on the device against float32 PyTorch and float64 numpy). The
# first argument chooses the part; each skips (77) without its Python module (numpy; torch
# with numpy, Debian's /usr/bin/python3 with python3-torch first).
. "$(dirname "$0")/../lib.sh"
need_exe CLTRAIN_BIN
part=${1:-numpy}
tools="$(cd "$(dirname "$0")/../../tools" && pwd)"
need_numpy
py=$numpy_python
if [ "$part" = torch ]; then
    py=""
    for cand in /usr/bin/python3 python3; do
        if command -v "$cand" >/dev/null && "$cand" -c "import torch, numpy" 2>/dev/null; then
            py=$cand
            break
        fi
    done
    [ -n "$py" ] || skip "PyTorch is missing (neither /usr/bin/python3 nor python3 imports torch and numpy)"
fi
make_tmp
C=$CLTRAIN_BIN

"$py" - "$tmp" <<'PY'
import random, sys
r = random.Random(5)
words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'red', 'hat', 'Bob']
def text(n):
    return ''.join(' '.join(r.choice(words) for _ in range(r.randint(3, 8))) + '.\n'
                   for _ in range(n))
open(sys.argv[1] + '/tiny.txt', 'w').write(text(400))
open(sys.argv[1] + '/val.txt', 'w').write(text(40))
open(sys.argv[1] + '/accent.txt', 'w').write(text(30) + 'the cat\u00e9.\n')
PY
M="embed 32, posembed, residual { layernorm, attention 4 causal }, residual { layernorm, linear 64, gelu, linear 32 }, layernorm, linear V nobias tied"
RUN="--block 24 --batch-size 6 --eval-batches 3 --optimizer adamw --lr 3e-3 --log-every 0 --quiet"

# close A B TOL WHAT: |A - B| <= TOL, else a failure naming WHAT
close() {
    "$py" -c "import sys; a, b, t = map(float, sys.argv[1:4]); sys.exit(abs(a - b) > t)" \
        "$1" "$2" "$3" || fail "$4: $1 against $2 (tolerance $3)"
    echo "ok: $4: $1 == $2"
}
# the loss of the last "eval" line of a metrics file, and of its step-0 one
metrics_loss() {
    "$py" -c "
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if '\"eval\"' in l]
ev = [e for e in ev if e['step'] == 0] if sys.argv[2] == 'first' else ev[-1:]
print(ev[0]['test_loss'] if ev else 'none')" "$1" "$2"
}
eval_loss() { sed -n 's/.* loss \([0-9.]*\) nats per token.*/\1/p' "$tmp/out"; }
numpy_loss() { sed -n 's/^val loss \([0-9.]*\) nats per token.*/\1/p' "$tmp/out"; }
torch_loss() { sed -n 's/^val loss \([0-9.]*\) nats\/token.*/\1/p' "$tmp/out"; }

check_ok "train the tiny model" -- $C train --data "text:$tmp/tiny.txt" $RUN --model "$M" \
    --steps 25 --save "$tmp/lm.safetensors" --metrics "$tmp/lm.jsonl"
trained=$(metrics_loss "$tmp/lm.jsonl" last)
check_ok "cltrain eval" -- $C eval --load "$tmp/lm.safetensors" --data "text:$tmp/tiny.txt" \
    --eval-batches 3
cl_eval=$(eval_loss)
[ -n "$cl_eval" ] || fail "no loss in cltrain eval's output: $(cat "$tmp/out")"
close "$cl_eval" "$trained" 5e-5 "cltrain eval prints the run's last evaluation"

if [ "$part" = numpy ]; then
    cn="$tools/checkpoint_numpy.py"
    check_ok "checkpoint_numpy" "(432 tokens in 18 windows of 24)" -- \
        "$py" "$cn" "$tmp/lm.safetensors" "text:$tmp/tiny.txt" --eval-batches 3
    close "$(numpy_loss)" "$trained" 1e-4 "numpy's loss is cltrain's (its metrics)"
    close "$(numpy_loss)" "$cl_eval" 1.5e-4 "numpy's loss is cltrain eval's (printed to 4 places)"
    # a separate validation file, more windows
    check_ok "cltrain eval on val.txt" -- $C eval --load "$tmp/lm.safetensors" \
        --data "text:$tmp/tiny.txt,$tmp/val.txt" --eval-batches 5
    cl_val=$(eval_loss)
    check_ok "checkpoint_numpy on val.txt" -- "$py" "$cn" "$tmp/lm.safetensors" \
        "text:$tmp/tiny.txt,$tmp/val.txt" --eval-batches 5
    close "$(numpy_loss)" "$cl_val" 1.5e-4 "text:FILE,VAL_FILE: numpy's loss is cltrain eval's"
    check_bad --code 1 "a character outside the vocabulary" "accent.txt: line 31, column 8" \
        "(U+00E9) is not in the vocabulary" -- \
        "$py" "$cn" "$tmp/lm.safetensors" "text:$tmp/tiny.txt,$tmp/accent.txt"
    # byte tokens
    check_ok "train a byte model" -- $C train --data "text:$tmp/tiny.txt" --tokens byte $RUN \
        --model "$M" --steps 10 --save "$tmp/byte.safetensors" --metrics "$tmp/byte.jsonl"
    check_ok "checkpoint_numpy, bytes" "bits per byte" -- \
        "$py" "$cn" "$tmp/byte.safetensors" "text:$tmp/tiny.txt" --eval-batches 3
    close "$(numpy_loss)" "$(metrics_loss "$tmp/byte.jsonl" last)" 1e-4 \
        "--tokens byte: numpy's loss is cltrain's"
    # a plain state dict from numpy (the documented names, normal(0, 0.3) weights) starts a
    # cltrain run: its step-0 evaluation is numpy's loss for those weights
    "$py" - "$tmp" "$cn" <<'PY' || fail "writing the state dict"
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("cn", sys.argv[2])
cn = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cn)
V = len(set(open(sys.argv[1] + '/tiny.txt').read()))
r = np.random.default_rng(2)
shapes = {'0.weight': (V, 32), '1.weight': (24, 32), '2.body.0.weight': (32,),
          '2.body.0.bias': (32,), '2.body.1.in_proj_weight': (96, 32),
          '2.body.1.in_proj_bias': (96,), '2.body.1.out_proj.weight': (32, 32),
          '2.body.1.out_proj.bias': (32,), '3.body.0.weight': (32,), '3.body.0.bias': (32,),
          '3.body.1.weight': (64, 32), '3.body.1.bias': (64,), '3.body.3.weight': (32, 64),
          '3.body.3.bias': (32,), '4.weight': (32,), '4.bias': (32,)}
cn.save_safetensors(sys.argv[1] + '/np.safetensors',
                    {k: (1.0 if k.endswith('0.weight') and len(v) == 1 else 0.0)
                     + r.normal(0, 0.3, v).astype(np.float32) for k, v in shapes.items()},
                    {'format': 'pt'})
PY
    check_ok "checkpoint_numpy, a plain state dict" -- "$py" "$cn" "$tmp/np.safetensors" \
        "text:$tmp/tiny.txt" --eval-batches 3 --batch-size 6 --block 24 --model "$M"
    np_init=$(numpy_loss)
    check_ok "cltrain --init from numpy's weights" -- $C train --data "text:$tmp/tiny.txt" $RUN \
        --model "$M" --steps 1 --init "$tmp/np.safetensors" --metrics "$tmp/np.jsonl"
    close "$(metrics_loss "$tmp/np.jsonl" first)" "$np_init" 1e-4 \
        "cltrain --init: the step-0 evaluation is numpy's loss for the weights"
    exit 0
fi

# torch: the checkpoint loads strictly and gives cltrain's loss on the same windows (the batch
# size and block from the checkpoint's metadata)
tg="$tools/torch_gpt.py"
check_ok "torch_gpt --load" "4 batches of 6 x 24" -- "$py" "$tg" --data "$tmp/tiny.txt" \
    --load "$tmp/lm.safetensors" --eval-batches 4 --threads 1
t_load=$(torch_loss)
check_ok "cltrain eval, 4 batches" -- $C eval --load "$tmp/lm.safetensors" \
    --data "text:$tmp/tiny.txt" --eval-batches 4
close "$t_load" "$(eval_loss)" 1.5e-4 "torch_gpt --load: cltrain eval's loss"
check_ok "torch_gpt --load, 3 batches" -- "$py" "$tg" --data "$tmp/tiny.txt" \
    --load "$tmp/lm.safetensors" --eval-batches 3 --threads 1
close "$(torch_loss)" "$trained" 1e-4 "torch_gpt --load: the run's last evaluation"

# torch's initial weights, for a spec as cltrain accepts it, start a cltrain run: its step-0
# evaluation is torch's loss for them (and numpy's)
S="Embed 32   # the tokens
PosEmbed
residual{LayerNorm, Attention 2 Causal}
residual{layernorm, linear 64, GELU, linear 32}
LayerNorm, linear v nobias tied,"
check_ok "torch_gpt --save-init" -- "$py" "$tg" --data "$tmp/tiny.txt" --model "$S" --block 24 \
    --batch-size 6 --eval-batches 3 --steps 0 --save-init "$tmp/init.safetensors" --threads 1
t_init=$(torch_loss)
check_ok "cltrain --init from torch's weights" "step 0: val loss" -- \
    $C train --data "text:$tmp/tiny.txt" --block 24 --batch-size 6 --eval-batches 3 \
    --model "$S" --steps 1 --log-every 0 --init "$tmp/init.safetensors" --metrics "$tmp/init.jsonl"
close "$(metrics_loss "$tmp/init.jsonl" first)" "$t_init" 1e-4 \
    "cltrain --init: the step-0 evaluation is torch's loss for the weights"
check_ok "checkpoint_numpy on torch's weights" -- "$py" "$tools/checkpoint_numpy.py" \
    "$tmp/init.safetensors" "text:$tmp/tiny.txt" --eval-batches 3 --batch-size 6 --block 24 \
    --model "$M"
close "$(numpy_loss)" "$t_init" 1e-4 "numpy's loss for torch's initial weights is torch's"
# attention as torch_gpt.py holds it (nn.MultiheadAttention's names, the causal mask), with
# weights large enough that attention moves the loss: numpy's loss for them is torch's
A="embed 32, posembed, residual { layernorm, attention 4 causal }, residual { layernorm, linear 64, gelu, linear 32 }, layernorm, linear V nobias tied"
TOOLS="$tools" A="$A" "$py" - "$tmp" >"$tmp/attn.out" <<'PY' || fail "torch's attention model"
import os, sys, types
import torch
sys.path.insert(0, os.environ["TOOLS"])
import torch_gpt as tg
torch.manual_seed(4)
torch.set_num_threads(1)
text = tg.Text(sys.argv[1] + "/tiny.txt", "char")
model = tg.build_model(os.environ["A"], len(text.vocab), 24)
with torch.no_grad():
    for p in model.parameters():
        p.normal_(0.0, 0.4)
tg.save_safetensors(sys.argv[1] + "/attn.safetensors", tg.state_dict_numpy(model))
a = types.SimpleNamespace(eval_batches=3, batch_size=6, bf16=False)
print("%.6f" % tg.evaluate(model, text, 24, a, torch.device("cpu")))
PY
t_attn=$(cat "$tmp/attn.out")
check_ok "checkpoint_numpy, attention" -- "$py" "$tools/checkpoint_numpy.py" \
    "$tmp/attn.safetensors" "text:$tmp/tiny.txt" --eval-batches 3 --batch-size 6 --block 24 \
    --model "$A"
close "$(numpy_loss)" "$t_attn" 1e-4 "attention: numpy's loss is torch's"
