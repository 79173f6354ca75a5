#!/usr/bin/env bash
# cltrain against PyTorch on this machine's CPU (or GPU), alternating: each round runs
# tools/torch_bench.py (PyTorch, every thread), then `cltrain bench` on the same models on
# cltrain's device: CNN-S (the cnn preset at batch 128), CNN-M (its 64/128-channel variant at batch
# 256), MLP-S (the mlp preset, 784-256-128-10, batch 128), MLP-M (784-1024-1024-10, batch 512).
# Prints every round and, per model, the medians and their ratio. Alternating rounds keep a
# machine whose speed drifts (shared cores) from favouring either side.
#
# usage: tools/bench_vs_torch.sh [ROUNDS] [BUILD_DIR] [MODELS]
#        (defaults: 3, build, "CNN-S CNN-M"; MODELS "all" is the four)
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
[ "$models" = all ] && models="CNN-S CNN-M MLP-S MLP-M"
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

bench() { # NAME -> cltrain's steps/s on it
    case "$1" in
    CNN-S) ours cnn 128 20 ;;
    CNN-M) ours "$cnn_m" 256 5 ;;
    MLP-S) ours mlp 128 200 ;;
    MLP-M) ours "$mlp_m" 512 30 ;;
    *) echo "bench_vs_torch: unknown model $1 (CNN-S, CNN-M, MLP-S, MLP-M or all)" >&2; exit 2 ;;
    esac
}

echo "$(date -u +%Y-%m-%dT%H:%MZ), PyTorch on: ${TORCH_DEVICE:-cpu}, cltrain on: $("$bin" devices --device "$device" 2>/dev/null | grep -m1 '^\* [0-9]' | tr -s ' ')"
for r in $(seq "$rounds"); do
    # shellcheck disable=SC2086
    "$py" tools/torch_bench.py 8 $models | while read -r name rate _; do echo "torch $name $rate"; done >>"$out"
    line="round $r:"
    for m in $models; do
        rate=$(bench "$m")
        echo "cltrain $m $rate" >>"$out"
        line="$line torch $m $(awk -v m="$m" '$1 == "torch" && $2 == m {r = $3} END {print r}' "$out"); cltrain $m $rate;"
    done
    echo "$line"
done
# shellcheck disable=SC2086
"$py" - "$out" $models <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    who, model, rate = line.split()[:3]
    rates.setdefault((who, model), []).append(float(rate))
for model in sys.argv[2:]:
    t = statistics.median(rates[("torch", model)])
    c = statistics.median(rates[("cltrain", model)])
    print(f"{model}: PyTorch {t:.2f} steps/s, cltrain {c:.2f} steps/s (medians of "
          f"{len(rates[('torch', model)])} rounds): {c / t:.2f}x")
PY
