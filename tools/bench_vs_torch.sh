#!/usr/bin/env bash
# cltrain against PyTorch on this machine's CPU (or GPU), alternating: each round runs
# tools/torch_bench.py (PyTorch, every thread), then `cltrain bench` on the same models on
# cltrain's device: CNN-S (the cnn preset at batch 128), CNN-M (its 64/128-channel variant at batch
# 256), MLP-S (the mlp preset, 784-256-128-10, batch 128), MLP-M (784-1024-1024-10, batch 512),
# and the GPT presets against tools/torch_gpt.py --bench (the same spec, AdamW with clipping,
# random tokens of a 65-token vocabulary): gpt-mini (batch 12 x block 64) and gpt-char (batch 64 x
# block 256, nanoGPT's shakespeare_char: tens of seconds a step on 2 cores). Prints every round
# and, per model, the medians and their ratio (the GPT models' tokens/s too). Alternating rounds
# keep a machine whose speed drifts (shared cores) from favouring either side.
#
# usage: tools/bench_vs_torch.sh [ROUNDS] [BUILD_DIR] [MODELS]
#        (defaults: 3, build, "CNN-S CNN-M"; MODELS "gpt" is gpt-mini and gpt-char, "all" the six)
# The GPT models' PyTorch runs with OMP_WAIT_POLICY=PASSIVE unless the variable is set: on cores
# shared with other work PyTorch's OpenMP threads spin at each barrier waiting for a descheduled
# peer, and gpt-mini measured 0.7 steps/s spinning against 13.5 passive on this machine's 2
# shared cores (one op per few microseconds of work: barriers dominate); the figure quoted is
# the passive one.
# PyTorch comes from $PYTHON (default python3; Debian: python3-torch and libopenblas0-pthread,
# refused when its matrix product is a reference BLAS's); set OPENBLAS_CORETYPE
# for its OpenBLAS where it misdetects the CPU (Haswell on AMD Zen 3, SkylakeX on AVX-512
# Xeons). CLTRAIN_DEVICE picks cltrain's device (default cpu: the comparison is on the same
# cores) and TORCH_DEVICE PyTorch's (default cpu); on a GPU: CLTRAIN_DEVICE=gpu TORCH_DEVICE=cuda.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
build=${2:-build}
models=${3:-CNN-S CNN-M}
[ "$models" = gpt ] && models="gpt-mini gpt-char"
[ "$models" = all ] && models="CNN-S CNN-M MLP-S MLP-M gpt-mini gpt-char"
bin="$build/src/cli/cltrain"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_vs_torch: ROUNDS must be a positive integer, got \"$rounds\"" >&2; exit 2; }
[ -x "$bin" ] || { echo "bench_vs_torch: no $bin; build first (tools/setup.sh $build)" >&2; exit 2; }
py=${PYTHON:-python3}
"$py" -c "import torch" 2>/dev/null || { echo "bench_vs_torch: $py cannot import torch (Debian: apt-get install python3-torch libopenblas0-pthread; or set PYTHON)" >&2; exit 2; }
# Debian's python3-torch takes whichever libblas.so.3 is installed: with only the reference BLAS
# (libblas3) its matrix products run at a few GFLOP/s and every ratio below would flatter
# cltrain tenfold. Refuse such a PyTorch rather than print those ratios.
blas=$("$py" -c "
import os, time, torch
torch.set_num_threads(os.cpu_count())
a = torch.randn(512, 512); b = torch.randn(512, 512)
a @ b
t = time.perf_counter(); n = 10
for _ in range(n): a @ b
print(int(2 * 512 ** 3 * n / (time.perf_counter() - t) / 1e9))")
if [ "${TORCH_DEVICE:-cpu}" = cpu ] && [ "$blas" -lt 20 ]; then
  echo "bench_vs_torch: PyTorch's matrix product runs at $blas GFLOP/s on this CPU: a reference" \
    "BLAS (Debian: apt-get install libopenblas0-pthread, and set OPENBLAS_CORETYPE)" >&2
  exit 2
fi

cnn_m="conv 64 k3 p1, batchnorm, relu, maxpool 2, conv 128 k3 p1, batchnorm, relu, maxpool 2, flatten, dropout 0.25, linear 128, relu, linear 10"
mlp_m="linear 1024, relu, linear 1024, relu, linear 10"
device=${CLTRAIN_DEVICE:-cpu}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

ours() { # model batch steps -> steps/s (median of 3 repeats)
    "$bin" bench --device "$device" --model "$1" --batch-size "$2" --steps "$3" --warmup 2 \
        --repeats 3 | sed -n 's/.*: \([0-9.]*\) steps\/s,.*/\1/p'
}

gpt_batch() { case "$1" in gpt-mini) echo 12 ;; gpt-char) echo 64 ;; esac; }
gpt_block() { case "$1" in gpt-mini) echo 64 ;; gpt-char) echo 256 ;; esac; }

ours_gpt() { # preset steps warmup -> "steps/s tokens/s" (median of 3 repeats)
    "$bin" bench --device "$device" --model "$1" --batch-size "$(gpt_batch "$1")" \
        --block "$(gpt_block "$1")" --steps "$2" --warmup "$3" --repeats 3 |
        sed -n 's/.*: \([0-9.]*\) steps\/s, \([0-9]*\) tokens\/s .*/\1 \2/p'
}

theirs_gpt() { # preset -> "steps/s tokens/s" of tools/torch_gpt.py --bench (8 s after 3 warm-up steps)
    OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "$py" tools/torch_gpt.py --bench 8 --model "$1" \
        --batch-size "$(gpt_batch "$1")" --block "$(gpt_block "$1")" \
        --device "${TORCH_DEVICE:-cpu}" |
        sed -n 's/^[a-z-]* \([0-9.]*\) steps\/s \([0-9]*\) tokens\/s .*/\1 \2/p'
}

bench() { # NAME -> cltrain's steps/s on it
    case "$1" in
    CNN-S) ours cnn 128 20 ;;
    CNN-M) ours "$cnn_m" 256 5 ;;
    MLP-S) ours mlp 128 200 ;;
    MLP-M) ours "$mlp_m" 512 30 ;;
    gpt-mini) ours_gpt gpt-mini 20 3 ;;
    gpt-char) ours_gpt gpt-char 1 1 ;;
    *) echo "bench_vs_torch: unknown model $1 (CNN-S, CNN-M, MLP-S, MLP-M, gpt-mini, gpt-char, gpt or all)" >&2; exit 2 ;;
    esac
}

echo "$(date -u +%Y-%m-%dT%H:%MZ), PyTorch on: ${TORCH_DEVICE:-cpu}, cltrain on: $("$bin" devices --device "$device" 2>/dev/null | grep -m1 '^\* [0-9]' | tr -s ' ')"
for m in $models; do # an unknown name before the first round, not after PyTorch's
    case "$m" in CNN-S|CNN-M|MLP-S|MLP-M|gpt-mini|gpt-char) ;; *) bench "$m" ;; esac
done
images=$(for m in $models; do case "$m" in gpt-*) ;; *) echo "$m" ;; esac; done | tr '\n' ' ')
for r in $(seq "$rounds"); do
    if [ -n "$images" ]; then
        # shellcheck disable=SC2086
        "$py" tools/torch_bench.py 8 $images | while read -r name rate _; do echo "torch $name $rate"; done >>"$out"
    fi
    for m in $models; do
        case "$m" in gpt-*)
            rate=$(theirs_gpt "$m")
            [ -n "$rate" ] || { echo "bench_vs_torch: tools/torch_gpt.py --bench --model $m printed no rate" >&2; exit 1; }
            echo "torch $m $rate" >>"$out" ;;
        esac
    done
    line="round $r:"
    for m in $models; do
        rate=$(bench "$m")
        [ -n "$rate" ] || { echo "bench_vs_torch: cltrain bench on $m printed no rate" >&2; exit 1; }
        echo "cltrain $m $rate" >>"$out"
        line="$line torch $m $(awk -v m="$m" '$1 == "torch" && $2 == m {r = $3} END {print r}' "$out"); cltrain $m ${rate%% *};"
    done
    echo "$line"
done
# shellcheck disable=SC2086
"$py" - "$out" $models <<'PY'
import statistics, sys
rates, tokens = {}, {}
for line in open(sys.argv[1]):
    who, model, rate = line.split()[:3]
    rates.setdefault((who, model), []).append(float(rate))
    if len(line.split()) > 3:  # a GPT model's tokens/s
        tokens.setdefault((who, model), []).append(float(line.split()[3]))
for model in sys.argv[2:]:
    t = statistics.median(rates[("torch", model)])
    c = statistics.median(rates[("cltrain", model)])
    tok = ""
    if ("torch", model) in tokens and ("cltrain", model) in tokens:
        tok = (f"; tokens/s PyTorch {statistics.median(tokens[('torch', model)]):.0f}, cltrain "
               f"{statistics.median(tokens[('cltrain', model)]):.0f}")
    print(f"{model}: PyTorch {t:.2f} steps/s, cltrain {c:.2f} steps/s (medians of "
          f"{len(rates[('torch', model)])} rounds{tok}): {c / t:.2f}x")
PY
