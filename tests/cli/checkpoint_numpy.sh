#!/usr/bin/env bash
# A checkpoint written by `cltrain train` is readable without cltrain: tools/checkpoint_numpy.py
# parses the safetensors file by hand, rebuilds the model from its metadata with numpy and must
# reproduce `cltrain predict` (same classes, probabilities within 1e-4). Needs Fashion-MNIST
# under $CLTRAIN_DATA_DIR (default /usr/share/datasets) and numpy; skips (exit 77) without
# either. The last cases put attention in the model (nn.MultiheadAttention in numpy).
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
data=${CLTRAIN_DATA_DIR:-/usr/share/datasets}/fashion-mnist
[ -d "$data" ] || skip "$data is missing (set CLTRAIN_DATA_DIR, default /usr/share/datasets," \
  "or install dataset-fashion-mnist)"
need_numpy
need_exe CLTRAIN_BIN
here=$(cd "$(dirname "$0")" && pwd)
make_tmp
"$CLTRAIN_BIN" train --data fashion-mnist --model "linear 32, relu, linear 16, tanh, linear 10" \
  --steps 60 --log-every 0 --normalize --save "$tmp/m.safetensors" --quiet
"$CLTRAIN_BIN" predict --load "$tmp/m.safetensors" --data fashion-mnist --output "$tmp/p.csv"
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" "$tmp/m.safetensors" \
  "$data/t10k-images-idx3-ubyte.gz" "$tmp/p.csv"
# a small CNN with batchnorm (its running statistics, evaluation mode), conv, pooling and flatten
"$CLTRAIN_BIN" train --data fashion-mnist \
  --model "conv 4 k3 p1, batchnorm, relu, maxpool 2, conv 6 k3 s2, batchnorm, relu, avgpool 2 s1, flatten, linear 10" \
  --steps 20 --log-every 0 --normalize --save "$tmp/cnn.safetensors" --quiet
"$CLTRAIN_BIN" predict --load "$tmp/cnn.safetensors" --data fashion-mnist --output "$tmp/cnn.csv"
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" "$tmp/cnn.safetensors" \
  "$data/t10k-images-idx3-ubyte.gz" "$tmp/cnn.csv"
# residual blocks: an identity one and a projecting one (1x1 conv s2 and batchnorm)
"$CLTRAIN_BIN" train --data fashion-mnist \
  --model "conv 8 k3 p1, batchnorm, relu, residual { conv 8 k3 p1, batchnorm, relu, conv 8 k3 p1, batchnorm }, relu, residual { conv 16 k3 s2 p1, batchnorm, relu, conv 16 k3 p1, batchnorm }, relu, globalavgpool, linear 10" \
  --steps 10 --batch-size 32 --log-every 0 --normalize --save "$tmp/res.safetensors" --quiet
"$CLTRAIN_BIN" predict --load "$tmp/res.safetensors" --data fashion-mnist --output "$tmp/res.csv"
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" "$tmp/res.safetensors" \
  "$data/t10k-images-idx3-ubyte.gz" "$tmp/res.csv"
# layernorm over the features of a linear layer's output
"$CLTRAIN_BIN" train --data fashion-mnist --model "linear 32, layernorm, relu, linear 10, layernorm" \
  --steps 40 --log-every 0 --normalize --save "$tmp/ln.safetensors" --quiet
"$CLTRAIN_BIN" predict --load "$tmp/ln.safetensors" --data fashion-mnist --output "$tmp/ln.csv"
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" "$tmp/ln.safetensors" \
  "$data/t10k-images-idx3-ubyte.gz" "$tmp/ln.csv"
# a sequence model: each image as 28 positions of 28 pixels (--input-shape 28,28, the metadata
# "input_shape" "28,28"), the pre-norm block's linear layers acting on each position, then a
# flatten and the head
"$CLTRAIN_BIN" train --data fashion-mnist --input-shape 28,28 \
  --model "layernorm, residual { layernorm, linear 48, gelu, linear 28 }, layernorm, linear 8, relu, flatten, linear 10" \
  --steps 30 --log-every 0 --normalize --save "$tmp/seq.safetensors" --quiet
"$CLTRAIN_BIN" predict --load "$tmp/seq.safetensors" --data fashion-mnist --output "$tmp/seq.csv"
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" "$tmp/seq.safetensors" \
  "$data/t10k-images-idx3-ubyte.gz" "$tmp/seq.csv"
# the same with an attention block before the MLP block (4 causal heads of 7 over the 28
# positions, nn.MultiheadAttention's tensors), then a flatten and the head; and attention
# without biases, not causal
attn="layernorm, residual { layernorm, attention 4 causal }, residual { layernorm, linear 48, gelu, linear 28 }, layernorm, flatten, linear 10"
"$CLTRAIN_BIN" train --data fashion-mnist --input-shape 28,28 --model "$attn" \
  --steps 30 --log-every 0 --normalize --save "$tmp/attn.safetensors" --quiet
"$CLTRAIN_BIN" predict --load "$tmp/attn.safetensors" --data fashion-mnist --output "$tmp/attn.csv"
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" "$tmp/attn.safetensors" \
  "$data/t10k-images-idx3-ubyte.gz" "$tmp/attn.csv"
# its weights as a PyTorch state dict (nn.MultiheadAttention's names kept) start another run
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" --state-dict "$tmp/attn.safetensors" \
  "$tmp/attn_sd.safetensors"
check_ok "--init from the attention model's state dict" "has no checksums" -- \
  "$CLTRAIN_BIN" train --data fashion-mnist --input-shape 28,28 --model "$attn" --steps 1 \
  --log-every 0 --normalize --quiet --init "$tmp/attn_sd.safetensors"
"$CLTRAIN_BIN" train --data fashion-mnist --input-shape 28,28 \
  --model "linear 16, attention 2 nobias, relu, flatten, linear 10" \
  --steps 20 --log-every 0 --normalize --save "$tmp/attn2.safetensors" --quiet
"$CLTRAIN_BIN" predict --load "$tmp/attn2.safetensors" --data fashion-mnist --output "$tmp/attn2.csv"
"$numpy_python" "$here/../../tools/checkpoint_numpy.py" "$tmp/attn2.safetensors" \
  "$data/t10k-images-idx3-ubyte.gz" "$tmp/attn2.csv"
