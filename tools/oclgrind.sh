#!/usr/bin/env bash
# The kernels under oclgrind's simulated GPU (a CI stage; docs/portability.md, section 3).
# Usage: tools/oclgrind.sh [BUILD_DIR [PART...]]   (PART: a test program, e.g. gemm, or "cli";
# default: all of them)
#
# oclgrind 21.10 (Debian) presents itself as a GPU (OpenCL C 1.2, 1 compute unit) and checks
# every work-item's memory accesses: out of bounds, data races between work-items
# (--data-races), barrier divergence, and invalid API use (--check-api). As a GPU it also runs
# the GPU code paths PoCL never takes (CLBlast as the default GEMM, the tiled GEMM kernels).
# Everything below runs twice: with oclgrind's default limits (1024 work-items per group, 32 KiB
# of local memory) and as a small device (64 work-items, 16 KiB), where every launch size must
# still come from the device's and the kernel's limits:
#  - every test program that runs kernels, with CLTRAIN_TEST_SMALL=1 (tests/small.h: smaller
#    shapes, the awkward sizes kept; GEMM: a few shapes with every variant that fits) and
#    CK_FORK=no (check's forked children would each start oclgrind's runtime again);
#  - a tiny training through the CLI (96 rows of 8 features, 3 classes, one epoch of batches of
#    16, "linear 16, relu, dropout 0.1, linear 3") for each precision (fp32, bf16, fp16 with
#    --accumulate 2), loader (resident, streaming) and GEMM path (CLTRAIN_GEMM=clblast, own);
#    both loaders must save the same checkpoint, bit for bit (the same batches and weights).
#
# A run fails on a non-zero exit code (a failed check, a crash, a timeout) or on any oclgrind
# report. oclgrind never changes the exit code, and reports in two places: the kernel checks
# (invalid reads and writes, data races, divergence) go to --log, the API checks and fatal errors
# ("Oclgrind - OpenCL runtime error detected", "OCLGRIND FATAL ERROR") to stderr. --log is a FIFO
# here, not a file: oclgrind opens the log file afresh, truncating it, for each OpenCL context,
# and a test program creates a context per test, so a plain file kept only the last test's
# reports (an injected error in the first test left an empty log). The one exception is exact:
# test_runtime makes API calls fail on purpose, and must print exactly the API reports listed in
# expected_api below, no other report.
#
# Seen failing on purpose: with a copy of cl/ whose fill kernel also writes one element far past
# the end (`if (i == 0) CLT_STORE(X_DTYPE, x + x_off, n + 1000000, value);`) in
# CLTRAIN_KERNEL_DIR, `tools/oclgrind.sh build elementwise cli` failed both parts with "Invalid
# write of size 4 at global memory address ..." in the kernel fill, while the test program and
# cltrain both exited 0.
#
# oclgrind simulates mostly on one thread, so the runs go side by side: as many at once as the
# machine has cores (CLTRAIN_OCLGRIND_JOBS overrides), the longest programs first. Each run
# prints its line when it ends; the summary at the end keeps the order of the list below.
#
# The kernel cache is a fresh folder in BUILD_DIR/oclgrind, which also keeps every run's output
# (PROFILE/NAME.out), oclgrind log (PROFILE/NAME.log) and result (PROFILE/NAME.result: ok or
# FAIL, a tab, the summary line). Times are on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true

if ! command -v oclgrind >/dev/null; then
  echo "oclgrind: installing oclgrind"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends oclgrind
fi
tools/setup.sh "$build" -Dwerror=true -Dbuildtype=debugoptimized >/dev/null

# the longest first (under oclgrind: gemm 3 min, amp 2, model 1.5, conv and train 1), so that
# the side-by-side runs end together
programs=(gemm amp model conv train memory loader batchnorm layernorm embedding attention
          augment elementwise cast tensor runtime activation linear_ops loss dropout input optim
          pool checkpoint textbatch sample)
parts=("$@")
((${#parts[@]})) || parts=("${programs[@]}" cli)

work="$PWD/$build/oclgrind"
rm -rf "$work"
mkdir -p "$work"
export CLTRAIN_CACHE_DIR="$work/cltrain-cache"
export CLTRAIN_DEVICE=gpu CLTRAIN_TEST_SMALL=1 CK_FORK=no CK_DEFAULT_TIMEOUT=3600
export CLTRAIN_TESTS_DIR="$PWD/tests" CLTRAIN_BIN="$PWD/$build/src/cli/cltrain"
unset CLTRAIN_GEMM CLTRAIN_TUNE_FILE CLTRAIN_MAX_MEMORY CLTRAIN_LOADER_FAIL_AT
[ -z "${CLTRAIN_KERNEL_DIR:-}" ] || echo "oclgrind: cl/ sources from $CLTRAIN_KERNEL_DIR"

jobs_max=${CLTRAIN_OCLGRIND_JOBS:-$(nproc)}
if ! [[ $jobs_max =~ ^[1-9][0-9]*$ ]]; then
  echo "oclgrind: CLTRAIN_OCLGRIND_JOBS=\"$jobs_max\": expected a positive count" >&2
  exit 2
fi
results=() # every run's result file, in the order of the list

# The API errors a test program provokes on purpose ("function error" per report, sorted).
declare -A expected_api=(
  # test_build_failure_log: tests/broken/elementwise.cl, then an op that needs that program;
  # test_kernel_arg_failure: an 8-byte argument for fill's 4-byte float
  [test_runtime]="clBuildProgram CL_BUILD_PROGRAM_FAILURE
clBuildProgram CL_BUILD_PROGRAM_FAILURE
clSetKernelArg CL_INVALID_ARG_SIZE"
  # test_selfcheck: clt_ctx_selfcheck with the kernels read from tests/broken
  [test_elementwise]="clBuildProgram CL_BUILD_PROGRAM_FAILURE"
)

# The API reports in an output file, one "function error" line each, sorted.
api_reports() {
  awk '/Oclgrind - OpenCL runtime error detected/ { open = 1; f = ""; next }
       open && $1 == "Function:" { f = $2; next }
       open && $1 == "Error:" { print f " " $2; open = 0 }' "$1" | sort
}

# result FILE WHY SUMMARY_LINE: writes a run's result (ok unless WHY says why not)
result() {
  printf '%s\t%s\n' "$([ -z "$2" ] && echo ok || echo FAIL)" "$3" > "$1"
}

# run PROFILE NAME TIMEOUT COMMAND...: runs COMMAND under oclgrind, prints one line (and the
# first lines of the output and log on a failure), and writes PROFILE/NAME.result: a failure
# unless it exited 0 with no report (but NAME's expected_api).
run() {
  local profile=$1 name=$2 limit=$3
  shift 3
  local opts=(--data-races --check-api)
  [ "$profile" = default ] || opts+=(--max-wgsize 64 --local-mem-size 16384)
  local dir="$work/$profile" log="$work/$profile/$name.log" out="$work/$profile/$name.out"
  local fifo="$work/$profile/$name.fifo"
  mkdir -p "$dir"
  rm -f "$fifo"
  mkfifo "$fifo"
  cat "$fifo" > "$log" &
  local reader=$! rc=0 why="" TIMEFORMAT="%R %U %S" wall user sys
  # fd 3 keeps the FIFO open for the program's whole life, so the reader sees one stream however
  # often oclgrind reopens /dev/fd/3
  { time timeout "$limit" oclgrind "${opts[@]}" --log /dev/fd/3 "$@" > "$out" 2>&1 \
      3> "$fifo"; } 2> "$dir/$name.time" || rc=$?
  wait "$reader" || true
  rm -f "$fifo"
  read -r wall user sys < "$dir/$name.time"
  local secs cpu
  secs=$(awk -v w="$wall" 'BEGIN { printf "%.1f", w }')
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }')
  local api want
  api=$(api_reports "$out")
  want=$(printf '%s' "${expected_api[$name]:-}" | sort)
  if [ "$rc" -eq 124 ]; then why="timed out after $limit s"
  elif [ "$rc" -ne 0 ]; then why="exit code $rc"
  elif [ -s "$log" ]; then why="oclgrind reported: $(grep -m1 -v '^$' "$log")"
  elif grep -q -e "OCLGRIND FATAL ERROR" -e "^Oclgrind: " "$out"; then
    why="oclgrind: $(grep -m1 -A1 -e "OCLGRIND FATAL ERROR" -e "^Oclgrind: " "$out" | tr '\n' ' ')"
  elif [ "$api" != "$want" ]; then
    why="API errors reported: \"$(echo $api)\"; expected: \"$(echo $want)\""
  fi
  result "$dir/$name.result" "$why" \
    "$(printf '%-8s %-30s %6s %6s  %s' "$profile" "$name" "$secs" "$cpu" "${why:-ok}")"
  if [ -n "$why" ]; then
    # one write, so that the side-by-side runs' lines do not interleave with it
    printf '%s\n' "$({
      echo "oclgrind: FAIL: $profile $name: $why ($secs s; output $out, log $log)"
      grep -m5 -e ":F:" -e ":E:" "$out" || true
      grep -m2 -A3 -e "OCLGRIND FATAL ERROR" -e "Oclgrind - OpenCL runtime error" "$out" || true
      [ ! -s "$log" ] || head -n 12 "$log"
    })" >&2
  else
    echo "oclgrind: $profile $name ok ($secs s)"
  fi
}

# spawn RESULT_FILE COMMAND...: runs COMMAND in the background once fewer than jobs_max runs
# are under way; RESULT_FILE is what it writes
spawn() {
  results+=("$1")
  shift
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  "$@" &
}

# 96 training and 32 test rows of 8 features in [-1, 1); the class (column 0) from 3 of them
data="$work/data"
mkdir -p "$data"
for split in train:96:1 test:32:2; do
  IFS=: read -r name rows seed <<< "$split"
  awk -v n="$rows" -v seed="$seed" 'BEGIN { srand(seed); for (i = 0; i < n; i++) {
      line = ""
      for (f = 0; f < 8; f++) { x[f] = 2 * rand() - 1; line = line sprintf(",%.4f", x[f]) }
      s = x[0] + 0.5 * x[1] - x[2]; printf "%d%s\n", (s < -0.3 ? 0 : s < 0.3 ? 1 : 2), line } }' \
      > "$data/$name.csv"
done

# cli_pair PROFILE PRECISION GEMM: the tiny training with both loaders, one after the other, and
# their checkpoints compared
cli_pair() {
  local profile=$1 p=$2 g=$3 l
  for l in resident streaming; do
    local extra=()
    [ "$p" != fp16 ] || extra=(--accumulate 2)
    CLTRAIN_GEMM=$g run "$profile" "cli-$p-$l-$g" 120 "$CLTRAIN_BIN" train \
      --data "csv:$data/train.csv,$data/test.csv" --label-column 0 --epochs 1 \
      --batch-size 16 --model "linear 16, relu, dropout 0.1, linear 3" --precision "$p" \
      --loader "$l" --save "$work/$profile/cli-$p-$l-$g.safetensors" "${extra[@]}"
  done
  # the same batches from both loaders: the same weights and optimizer state, bit for bit
  local a="$work/$profile/cli-$p-resident-$g" b="$work/$profile/cli-$p-streaming-$g" why=""
  if ! cmp -s "$a.safetensors" "$b.safetensors"; then
    why="resident and streaming checkpoints differ (epoch lines: \"$(grep -h \
      "^epoch 1/1" "$a.out" "$b.out" | cut -d, -f1-2 | tr '\n' ' ')\")"
    echo "oclgrind: FAIL: $profile cli $p $g: $why" >&2
  fi
  result "$work/$profile/cli-$p-$g.result" "$why" \
    "$(printf '%-8s %-30s %6s %6s  %s' "$profile" "cli-$p-$g (both loaders)" "" "" "${why:-same}")"
}

# cli PROFILE: the tiny training in every precision x GEMM path (x loader, in cli_pair)
cli() {
  local profile=$1 p g
  for p in fp32 bf16 fp16; do
    for g in clblast own; do
      results+=("$work/$profile/cli-$p-resident-$g.result"
                "$work/$profile/cli-$p-streaming-$g.result")
      spawn "$work/$profile/cli-$p-$g.result" cli_pair "$profile" "$p" "$g"
    done
  done
}

stage_start=$(date +%s)
for part in "${parts[@]}"; do
  for profile in default small; do
    mkdir -p "$work/$profile"
    if [ "$part" = cli ]; then
      cli "$profile"
    elif [ -x "$build/tests/test_$part" ]; then
      spawn "$work/$profile/test_$part.result" run "$profile" "test_$part" 300 \
        "$build/tests/test_$part"
    else
      echo "oclgrind: no test program $build/tests/test_$part" >&2
      exit 2
    fi
  done
done
wait
failed=0
echo "oclgrind: summary (profile, run, wall s, CPU s, result):"
for r in "${results[@]}"; do
  if [ ! -s "$r" ]; then
    failed=$((failed + 1))
    echo "${r#"$work/"}: no result (the run ended before writing it)"
    continue
  fi
  IFS=$'\t' read -r verdict line < "$r"
  [ "$verdict" = ok ] || failed=$((failed + 1))
  echo "$line"
done
echo "oclgrind: $failed failure(s) in $(($(date +%s) - stage_start)) s ($jobs_max runs at a time)"
[ "$failed" -eq 0 ]
