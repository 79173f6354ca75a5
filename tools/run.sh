#!/usr/bin/env bash
# Installs what is missing, builds, lists the devices and runs the main job on the default
# device (--device / CLTRAIN_DEVICE override it): a self-check that compiles a kernel and
# round-trips a tensor through it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh build
./build/src/cli/cltrain devices
./build/src/cli/cltrain selfcheck "$@"
