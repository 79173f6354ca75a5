#!/usr/bin/env bash
# Installs what is missing, builds, lists the OpenCL devices and trains the default model (an
# MLP) on Fashion-MNIST on the best device present (--device / CLTRAIN_DEVICE override it).
# Extra arguments go to `cltrain train`.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build --buildtype=release -Dtests=disabled
./build/src/cli/cltrain devices
./build/src/cli/cltrain train --data fashion-mnist --model mlp --epochs 10 --normalize \
  --schedule cosine --save fashion-mlp.safetensors "$@"
