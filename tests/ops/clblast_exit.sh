#!/bin/sh
# The exit path after CLBlast GEMMs, on Oclgrind's simulated GPU: ten tiny fp32 trainings with
# CLTRAIN_GEMM=clblast under oclgrind --data-races --check-api must each exit 0 with no report.
# Before clt_ctx_free cleared CLBlast's program cache, CLBlast's static destructor released the
# last program, and with it our context, at exit: about one run in two aborted there with
# glibc's "corrupted double-linked list" (clblast::Cache::~Cache -> clReleaseProgram ->
# clReleaseContext -> ~LLVMContext), after the training had succeeded. 5 s on 2 cores.
# Needs CLTRAIN_BIN (set by meson test); skips (77) without oclgrind.
set -u
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
command -v oclgrind >/dev/null || skip "oclgrind is not installed"
make_tmp

# 96 rows: the label (column 0) from three of 5 features (tests/lib.sh)
write_csv "$tmp" 96 0

for i in 1 2 3 4 5 6 7 8 9 10; do
    CLTRAIN_GEMM=clblast oclgrind --data-races --check-api "$CLTRAIN_BIN" train --device gpu \
        --data "csv:$tmp/train.csv" --label-column 0 --model "linear 8, relu, linear 3" \
        --epochs 1 --batch-size 32 > "$tmp/out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail "run $i exited with $rc: $(cat "$tmp/out")"
    grep -q "^epoch 1/1: train loss" "$tmp/out" || fail "run $i: no epoch line: $(cat "$tmp/out")"
    if grep -v -e '^cltrain: training on' -e '^epoch ' "$tmp/out" >/dev/null; then
        fail "run $i: unexpected output (an Oclgrind report?): $(cat "$tmp/out")"
    fi
done
echo "clblast_exit: 10 runs under oclgrind exited 0 with no report"
