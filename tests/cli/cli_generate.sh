#!/bin/sh
# `cltrain generate` on a small language model (embed, posembed, a causal attention block, the
# tied head) trained here: the same seed gives the same text, another seed another text, top-k 1
# the same text for any seed (the argmax); the text has --tokens characters of the training
# text's vocabulary, runs past the block (the window cropped to the last T tokens) and starts
# with the prompt under --echo; the key/value cache draws the same text as the window
# recomputed for every token (CLTRAIN_GENERATE=window), and a model without the causal mask
# falls back to the window, saying so once; a prompt character outside the vocabulary (named
# with its position), an image model's checkpoint, a missing --load, bad --temperature /
# --top-k values and an unknown CLTRAIN_GENERATE are usage errors (exit 2) with one line on
# stderr and nothing on stdout.
. "$(dirname "$0")/../lib.sh"
need_exe CLTRAIN_BIN
need_python3 "to write the text"
make_tmp
C=$CLTRAIN_BIN

python3 - "$tmp/tiny.txt" <<'PY'
import random, sys
random.seed(1)
words = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'to', 'red', 'hat']
lines = [' '.join(random.choice(words) for _ in range(6)) + '.' for _ in range(600)]
open(sys.argv[1], 'w').write('\n'.join(lines) + '\n')
PY
M="embed 32, posembed, residual { layernorm, attention 2 causal }, residual { layernorm, linear 64, gelu, linear 32 }, layernorm, linear V nobias tied"
check_ok "train a tiny language model" -- $C train --data "text:$tmp/tiny.txt" --block 16 \
    --batch-size 8 --eval-batches 2 --optimizer adamw --lr 3e-3 --steps 60 --log-every 0 \
    --quiet --model "$M" --save "$tmp/lm.safetensors"
L="$tmp/lm.safetensors"

gen() { # gen NAME ARGS...: generate into $tmp/NAME
    name=$1
    shift
    check_ok "generate $*" -- $C generate --load "$L" "$@"
    cp "$tmp/out" "$tmp/$name"
}
gen a --prompt "the cat" --tokens 40 --seed 5
gen b --prompt "the cat" --tokens 40 --seed 5
gen c --prompt "the cat" --tokens 40 --seed 6
cmp -s "$tmp/a" "$tmp/b" || fail "seed 5 twice: '$(cat "$tmp/a")' then '$(cat "$tmp/b")'"
echo "ok: the same seed, the same text"
cmp -s "$tmp/a" "$tmp/c" && fail "seeds 5 and 6 drew the same text '$(cat "$tmp/a")'"
echo "ok: another seed, another text"
gen k1 --prompt "the cat" --tokens 40 --top-k 1 --seed 1
gen k2 --prompt "the cat" --tokens 40 --top-k 1 --seed 2 --temperature 3
cmp -s "$tmp/k1" "$tmp/k2" || fail "top-k 1 depends on the seed: '$(cat "$tmp/k1")', '$(cat "$tmp/k2")'"
echo "ok: top-k 1 is the same for any seed and temperature"
# 40 characters (one per token) and a final newline, each one of the text's; longer than the
# block of 16, so the window was cropped
python3 - "$tmp/a" "$tmp/tiny.txt" <<'PY' || fail "generated text: $(cat "$tmp/a")"
import sys
got = open(sys.argv[1]).read()
vocab = set(open(sys.argv[2]).read())
assert got.endswith('\n') and len(got) == 41, repr(got)
assert set(got[:-1]) <= vocab, set(got[:-1]) - vocab
PY
echo "ok: 40 characters of the vocabulary"
gen e --prompt "the cat" --tokens 10 --seed 5 --echo
python3 -c "import sys; sys.exit(open(sys.argv[1]).read() != 'the cat' + open(sys.argv[2]).read()[:10] + chr(10))" \
    "$tmp/e" "$tmp/a" || fail "--echo: '$(cat "$tmp/e")' against '$(cat "$tmp/a")'"
echo "ok: --echo prints the prompt, then the same draws"
gen n --tokens 5
[ "$(wc -c < "$tmp/n")" -eq 6 ] || fail "no prompt: '$(cat "$tmp/n")'"
echo "ok: no prompt"

# the key/value cache (the default) draws the same text as the window recomputed for every
# token (CLTRAIN_GENERATE=window), within the block and past it (the window slides), with and
# without a prompt, sampled and greedy; it says nothing on stderr
for args in "--prompt the --tokens 60 --seed 5" "--tokens 40 --seed 9" \
    "--prompt sat --tokens 30 --top-k 1"; do
    # shellcheck disable=SC2086
    check_ok "cache: generate $args" -- $C generate --load "$L" $args
    cp "$tmp/out" "$tmp/cached"
    [ ! -s "$tmp/err" ] || fail "cache: generate $args wrote on stderr: $(cat "$tmp/err")"
    # shellcheck disable=SC2086
    check_ok "window: generate $args" -- env CLTRAIN_GENERATE=window $C generate --load "$L" $args
    cmp -s "$tmp/cached" "$tmp/out" ||
        fail "$args: the cache drew '$(cat "$tmp/cached")', the window '$(cat "$tmp/out")'"
done
cmp -s "$tmp/a" "$tmp/cached" && fail "the runs above drew the same text"
echo "ok: the key/value cache draws the window's text"
# a model without the causal mask has no cache: one line on stderr, the window's text
check_ok "train a model without the causal mask" -- $C train --data "text:$tmp/tiny.txt" \
    --block 8 --batch-size 8 --eval-batches 2 --steps 5 --log-every 0 --quiet \
    --model "embed 16, posembed, attention 2, linear V nobias tied" --save "$tmp/nc.safetensors"
check_ok "generate without a cache" \
    "generate: no key/value cache for this model, every token recomputes the window: layer 3" \
    "(attention without \"causal\": each position sees the later ones) cannot compute" -- \
    $C generate --load "$tmp/nc.safetensors" --prompt "the" --tokens 20
[ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "the fallback's stderr: $(cat "$tmp/err")"
cp "$tmp/out" "$tmp/nc"
check_ok "generate without a cache, window" -- env CLTRAIN_GENERATE=window \
    $C generate --load "$tmp/nc.safetensors" --prompt "the" --tokens 20
[ ! -s "$tmp/err" ] || fail "CLTRAIN_GENERATE=window wrote on stderr: $(cat "$tmp/err")"
cmp -s "$tmp/nc" "$tmp/out" || fail "fallback: '$(cat "$tmp/nc")', window: '$(cat "$tmp/out")'"
echo "ok: a model without the causal mask recomputes the window, saying so once"

bad() { # bad LABEL NEEDLE... -- ARGS: exit 2, one line, nothing on stdout
    check_bad --code 2 "$@"
    [ ! -s "$tmp/out" ] || fail "$1: wrote on stdout: $(cat "$tmp/out")"
}
bad "a prompt outside the vocabulary" "--prompt: line 1, column 5: 'Z' (U+005A)" \
    "is not in the vocabulary" -- $C generate --load "$L" --prompt "the Zat"
bad "an accented prompt" "column 2: 'é' (U+00E9)" -- $C generate --load "$L" --prompt "té"
bad "no --load" "--load FILE is required" -- $C generate --prompt "the"
bad "temperature 0" "--temperature" -- $C generate --load "$L" --temperature 0
bad "a negative top-k" "--top-k" -- $C generate --load "$L" --top-k -1
bad "CLTRAIN_GENERATE=fast" "CLTRAIN_GENERATE=\"fast\": expected cache" "or window" -- \
    env CLTRAIN_GENERATE=fast $C generate --load "$L"
write_csv "$tmp" 30 10
check_ok "train an MLP" -- $C train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 \
    --model "linear 8, relu, linear 3" --epochs 1 --quiet --save "$tmp/mlp.safetensors"
bad "an image model" "mlp.safetensors is not a language model's checkpoint" -- \
    $C generate --load "$tmp/mlp.safetensors"
