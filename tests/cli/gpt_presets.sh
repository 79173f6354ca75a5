#!/bin/sh
# The GPT presets from the command line: gpt-mini and gpt-char name their specs (a dry run
# prints the spec and builds the model at the preset's window, 64 and 256 tokens, on a small
# text's vocabulary; --block still overrides it), gpt-mini trains a few steps (in bf16 and
# fp16 too, with a falling validation loss), and `cltrain bench` times a language model on
# synthetic tokens (steps/s and tokens/s, in bf16 too; --block and --features refused where
# they do not apply).
. "$(dirname "$0")/../lib.sh"
need_exe CLTRAIN_BIN
need_python3 "to write the text"
make_tmp
C=$CLTRAIN_BIN

python3 - "$tmp/tiny.txt" <<'PY'
import random, sys
random.seed(2)
words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'red', 'hat']
lines = [' '.join(random.choice(words) for _ in range(6)) + '.' for _ in range(300)]
open(sys.argv[1], 'w').write('\n'.join(lines) + '\n')
PY
MINI="embed 128, posembed"
BLOCK="residual { layernorm, attention 4 causal }, residual { layernorm, linear 512, gelu, linear 128 }"
for i in 1 2 3 4; do MINI="$MINI, $BLOCK"; done
MINI="$MINI, layernorm, linear V nobias tied"
CHAR="embed 384, posembed, dropout 0.2"
BLOCK="residual { layernorm, attention 6 causal, dropout 0.2 }, residual { layernorm, linear 1536, gelu, linear 384, dropout 0.2 }"
for i in 1 2 3 4 5 6; do CHAR="$CHAR, $BLOCK"; done
CHAR="$CHAR, layernorm, linear V nobias tied"

# the dry runs: the spec, the preset's window and its parameters on a 15-character vocabulary
# (nanoGPT's count: 15 x 128 + 64 x 128 + 4 x 198272 + 256 = 803,456; gpt-char 10,751,616)
check_ok "gpt-mini: dry run" "windows of 64 tokens" "15-token vocabulary" "model $MINI (803456 parameters)" \
    -- $C train --data "text:$tmp/tiny.txt" --model gpt-mini --steps 1 --batch-size 2 \
    --eval-batches 1 --dry-run
check_ok "gpt-char: dry run" "windows of 256 tokens" "model $CHAR (10751616 parameters)" \
    -- $C train --data "text:$tmp/tiny.txt" --model GPT-Char --steps 1 --batch-size 1 \
    --eval-batches 1 --dry-run
check_ok "gpt-char --block 32: the flag wins" "windows of 32 tokens" -- $C train \
    --data "text:$tmp/tiny.txt" --model gpt-char --block 32 --steps 1 --batch-size 1 \
    --eval-batches 1 --dry-run
# a spec (not a preset) keeps the default window
check_ok "a spec: block 64" "windows of 64 tokens" -- $C train --data "text:$tmp/tiny.txt" \
    --model "embed 16, posembed, layernorm, linear V nobias tied" --steps 1 --batch-size 2 \
    --eval-batches 1 --dry-run
# without --batch-size: nanoGPT's batch of windows, the preset's (gpt-char 64) or 12
check_ok "gpt-mini: batch 12 by default" "; batch 12;" -- $C train --data "text:$tmp/tiny.txt" \
    --model gpt-mini --steps 1 --eval-batches 1 --dry-run
check_ok "gpt-char: batch 64 by default" "; batch 64;" -- $C train --data "text:$tmp/tiny.txt" \
    --model gpt-char --block 8 --steps 1 --eval-batches 1 --dry-run
check_ok "a spec: batch 12 by default" "; batch 12;" -- $C train --data "text:$tmp/tiny.txt" \
    --model "embed 16, posembed, layernorm, linear V nobias tied" --steps 1 --eval-batches 1 \
    --dry-run
check_ok "--batch-size wins" "; batch 5;" -- $C train --data "text:$tmp/tiny.txt" \
    --model gpt-char --block 8 --batch-size 5 --steps 1 --eval-batches 1 --dry-run

# gpt-mini trains: two steps, a finite validation loss
check_ok "gpt-mini: train 2 steps" "model $MINI" "step 0: val loss" "bits per character" -- \
    $C train --data "text:$tmp/tiny.txt" --model gpt-mini --steps 2 --batch-size 2 \
    --eval-batches 1 --optimizer adamw --log-every 0

# mixed precision: gpt-mini trains in bf16 and fp16 (16-bit from the embedding's output on,
# loss scaling in fp16); 20 steps take the validation loss from about log 15 = 2.7 to about
# 1.7, so a fall of less than 0.5 is a broken 16-bit path
for prec in bf16 fp16; do
    check_ok "gpt-mini --precision $prec: train 20 steps" "precision $prec" "step 0: val loss" -- \
        $C train --data "text:$tmp/tiny.txt" --model gpt-mini --steps 20 --batch-size 4 \
        --eval-batches 2 --log-every 0 --precision $prec
    first=$(sed -n 's/^step 0: val loss \([0-9.]*\) .*/\1/p' "$tmp/out" "$tmp/err")
    last=$(sed -n 's/^epoch 1\/1: .*, val loss \([0-9.]*\) .*/\1/p' "$tmp/out" "$tmp/err")
    [ -n "$first" ] && [ -n "$last" ] ||
        fail "gpt-mini --precision $prec: no validation losses in: $(cat "$tmp/out" "$tmp/err")"
    python3 -c "import sys; a, b = map(float, sys.argv[1:3]); assert b < a - 0.5, (a, b)" \
        "$first" "$last" || fail "gpt-mini --precision $prec: val loss $first -> $last, no fall"
    echo "ok: gpt-mini --precision $prec: val loss $first -> $last"
done

# bench: a language model's steps/s and tokens/s on random tokens (B x T tokens a step)
check_ok "bench gpt-mini" "batch 2 x block 64" "65-token vocabulary" "adamw clipped to norm 1" \
    "model $MINI," -- $C bench --model gpt-mini --batch-size 2 --steps 2 --warmup 1 --repeats 1
rate=$(sed -n 's/.*: \([0-9.]*\) steps\/s, \([0-9]*\) tokens\/s .*/\1 \2/p' "$tmp/out")
[ -n "$rate" ] || fail "bench gpt-mini: no steps/s and tokens/s in: $(cat "$tmp/out")"
python3 -c "
import sys
steps, tokens = map(float, sys.argv[1:3])
assert steps > 0 and abs(tokens - steps * 2 * 64) <= 0.005 * 2 * 64 + 1, (steps, tokens)  # steps/s printed to 0.01
" $rate || fail "bench gpt-mini: tokens/s is not steps/s x 2 x 64: $rate"
echo "ok: bench gpt-mini: $rate (steps/s, tokens/s)"
check_ok "bench gpt-mini --precision bf16" "precision bf16" "tokens/s" -- \
    $C bench --model gpt-mini --batch-size 2 --steps 2 --warmup 1 --repeats 1 --precision bf16
check_ok "bench: a spec starting with embed, --block" "batch 3 x block 8" "tokens/s" -- \
    $C bench --model "embed 16, posembed, layernorm, linear V nobias tied" --block 8 \
    --batch-size 3 --steps 2 --warmup 0 --repeats 1
check_bad --code 2 "bench: --block with an image model" "--block 8" "not --model mlp" -- \
    $C bench --model mlp --block 8 --steps 1
check_bad --code 2 "bench: --features with a language model" "reads token ids" -- \
    $C bench --model gpt-mini --features 8 --steps 1
