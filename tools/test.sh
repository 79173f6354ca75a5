#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors and runs the test suite on the device
# CLTRAIN_DEVICE selects (PoCL's CPU device on a machine without a GPU).
# A user's run checks what the machine can break, within minutes: every test program, with the
# largest shapes shrunk (CLTRAIN_TEST_SMALL=1, tests/small.h), without the `long` suite (the
# offline GPU-compiler sweep over every program the library may build). CLTRAIN_TEST_FULL=1 runs
# the full sizes and the long suite too, as CI does (.ci/run).
# Usage: tools/test.sh [BUILD_DIR] [meson options]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-test}
shift || true
tools/setup.sh "$build" -Dwerror=true -Dbuildtype=debugoptimized "$@"
start=$(date +%s)
if [ "${CLTRAIN_TEST_FULL:-0}" = 1 ]; then
  CLTRAIN_TEST_SMALL=0 meson test -C "$build" --print-errorlogs --num-processes 2
else
  CLTRAIN_TEST_SMALL=${CLTRAIN_TEST_SMALL:-1} meson test -C "$build" --print-errorlogs \
    --num-processes 2 --no-suite long
fi
echo "test: the suite ran in $(( $(date +%s) - start )) s"
