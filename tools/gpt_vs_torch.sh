#!/usr/bin/env bash
# The language-model recipe side by side: trains the same model on the same text with the same
# recipe in tools/torch_gpt.py (PyTorch) and in cltrain, for each seed, and prints each run's
# final validation loss (nats per token, on the same fixed evaluation windows), the means and
# their difference. The default is nanoGPT's CPU recipe for shakespeare_char: gpt-mini, 2000
# steps, batch 12, block 64, AdamW lr 1e-3 (betas 0.9, 0.99, weight decay 0.1 on matrices and
# embeddings), a 100-step warm-up and a cosine to 1e-4, gradients clipped to norm 1.
#
# usage: tools/gpt_vs_torch.sh [BUILD_DIR] [TEXT] [STEPS] [SEEDS]
#        (defaults: build, $CLTRAIN_DATA_DIR/shakespeare/shakespeare.txt, 2000, "1 2")
# MODEL (default gpt-mini) and BATCH (default 12) come from the environment; PyTorch from
# $PYTHON (default python3), on every thread. Each run's log is kept in $LOGDIR (default a
# temporary directory, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
text=${2:-${CLTRAIN_DATA_DIR:-/usr/share/datasets}/shakespeare/shakespeare.txt}
steps=${3:-2000}
seeds=${4:-1 2}
model=${MODEL:-gpt-mini}
batch=${BATCH:-12}
py=${PYTHON:-python3}
# on cores shared with other work, spinning OpenMP threads slow PyTorch down (tools/bench_vs_torch.sh)
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
bin="$build/src/cli/cltrain"
[ -x "$bin" ] || { echo "gpt_vs_torch: no $bin; build first (tools/setup.sh $build)" >&2; exit 2; }
[ -f "$text" ] || { echo "gpt_vs_torch: no text file $text (tools/get_shakespeare.sh writes it)" >&2; exit 2; }
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || { echo "gpt_vs_torch: STEPS must be a positive integer, got \"$steps\"" >&2; exit 2; }
for s in $seeds; do
    [[ "$s" =~ ^[0-9]+$ ]] || { echo "gpt_vs_torch: SEEDS must be integers, got \"$s\"" >&2; exit 2; }
done
"$py" -c "import torch" 2>/dev/null || { echo "gpt_vs_torch: $py cannot import torch (Debian: apt-get install python3-torch; or set PYTHON)" >&2; exit 2; }
if [ -n "${LOGDIR:-}" ]; then
    logs=$LOGDIR; mkdir -p "$logs"
else
    logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
fi

# The recipe, once for both sides.
recipe=(--steps "$steps" --batch-size "$batch" --lr 1e-3 --min-lr 1e-4 --warmup 100
        --weight-decay 0.1 --betas 0.9,0.99 --clip-grad 1.0 --eval-batches 20)
final_loss() { # log -> the last "val loss X" figure
    grep -o 'val loss [0-9.]*' "$1" | tail -n 1 | awk '{print $3}'
}

torch_losses=() ours_losses=()
for s in $seeds; do
    start=$(date +%s)
    "$py" tools/torch_gpt.py --data "$text" --model "$model" --seed "$s" --log-every 500 \
        "${recipe[@]}" > "$logs/torch-$s.log" 2>&1 \
        || { echo "gpt_vs_torch: torch_gpt.py failed (seed $s):" >&2; tail -n 5 "$logs/torch-$s.log" >&2; exit 1; }
    t_torch=$(( $(date +%s) - start ))
    start=$(date +%s)
    "$bin" train --data "text:$text" --model "$model" --seed "$s" --optimizer adamw \
        --schedule cosine "${recipe[@]}" > "$logs/cltrain-$s.log" 2>&1 \
        || { echo "gpt_vs_torch: cltrain failed (seed $s):" >&2; tail -n 5 "$logs/cltrain-$s.log" >&2; exit 1; }
    t_ours=$(( $(date +%s) - start ))
    torch_losses+=("$(final_loss "$logs/torch-$s.log")")
    ours_losses+=("$(final_loss "$logs/cltrain-$s.log")")
    echo "seed $s: PyTorch val loss ${torch_losses[-1]} (${t_torch} s), cltrain ${ours_losses[-1]} (${t_ours} s)"
done
python3 - "${#torch_losses[@]}" "${torch_losses[@]}" "${ours_losses[@]}" <<'EOF'
import sys
n = int(sys.argv[1])
torch = [float(v) for v in sys.argv[2:2 + n]]
ours = [float(v) for v in sys.argv[2 + n:]]
mt, mo = sum(torch) / n, sum(ours) / n
print(f"mean of {n} seeds: PyTorch {mt:.4f}, cltrain {mo:.4f} nats/token; "
      f"cltrain - PyTorch {mo - mt:+.4f}")
EOF
