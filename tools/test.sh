#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors and runs the whole test suite on the
# device CLTRAIN_DEVICE selects (PoCL's CPU device on a machine without a GPU).
# Usage: tools/test.sh [BUILD_DIR] [meson options]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-test}
shift || true
tools/setup.sh "$build" -Dwerror=true -Dbuildtype=debugoptimized "$@"
meson test -C "$build" --print-errorlogs --num-processes 2
