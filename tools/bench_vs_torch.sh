#!/usr/bin/env bash
# cltrain against PyTorch on this machine's CPU, alternating: each round runs
# tools/torch_cnn.py (PyTorch, every thread), then `cltrain bench` on the same models (CNN-S:
# the cnn preset at batch 128; CNN-M: its 64/128-channel variant at batch 256) on the CPU
# device. Prints every round and, per model, the medians and their ratio. Alternating rounds
# keep a machine whose speed drifts (shared cores) from favouring either side.
#
# usage: tools/bench_vs_torch.sh [ROUNDS] [BUILD_DIR]   (defaults: 3, build)
# PyTorch comes from $PYTHON (default python3; Debian: python3-torch); on an AMD CPU set
# OPENBLAS_CORETYPE (e.g. Haswell) for its OpenBLAS. CLTRAIN_DEVICE picks cltrain's device
# (default cpu: the comparison is on the same cores).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
build=${2:-build}
bin="$build/src/cli/cltrain"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench_vs_torch: ROUNDS must be a positive integer, got \"$rounds\"" >&2; exit 2; }
[ -x "$bin" ] || { echo "bench_vs_torch: no $bin; build first (tools/setup.sh $build)" >&2; exit 2; }
py=${PYTHON:-python3}
"$py" -c "import torch" 2>/dev/null || { echo "bench_vs_torch: $py cannot import torch (Debian: apt-get install python3-torch; or set PYTHON)" >&2; exit 2; }

cnn_m="conv 64 k3 p1, batchnorm, relu, maxpool 2, conv 128 k3 p1, batchnorm, relu, maxpool 2, flatten, dropout 0.25, linear 128, relu, linear 10"
device=${CLTRAIN_DEVICE:-cpu}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

ours() { # model batch steps -> steps/s (median of 3 repeats)
    "$bin" bench --device "$device" --model "$1" --batch-size "$2" --steps "$3" --warmup 2 \
        --repeats 3 | sed -n 's/.*: \([0-9.]*\) steps\/s,.*/\1/p'
}

echo "$(date -u +%Y-%m-%dT%H:%MZ), cltrain on: $("$bin" devices --device "$device" 2>/dev/null | grep -m1 '^\* [0-9]' | tr -s ' ')"
for r in $(seq "$rounds"); do
    "$py" tools/torch_cnn.py 8 | while read -r name rate _; do echo "torch $name $rate"; done >>"$out"
    echo "cltrain CNN-S $(ours cnn 128 20)" >>"$out"
    echo "cltrain CNN-M $(ours "$cnn_m" 256 5)" >>"$out"
    echo "round $r: $(tail -n 4 "$out" | awk '{printf "%s %s %s; ", $1, $2, $3}')"
done
"$py" - "$out" <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    who, model, rate = line.split()[:3]
    rates.setdefault((who, model), []).append(float(rate))
for model in ("CNN-S", "CNN-M"):
    t = statistics.median(rates[("torch", model)])
    c = statistics.median(rates[("cltrain", model)])
    print(f"{model}: PyTorch {t:.2f} steps/s, cltrain {c:.2f} steps/s (medians of "
          f"{len(rates[('torch', model)])} rounds): {c / t:.2f}x")
PY
