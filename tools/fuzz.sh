#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz (ASan + UBSan + LeakSanitizer) over their seed
# corpora in tests/fuzz/corpus/<name>/. Usage: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 30. 0 = replay only: every corpus file through its harness once,
#                       fast and deterministic (a regression run).
#   TARGET              safetensors checkpoint idx csv spec tune kernel_cache (default: all).
# Installs what is missing (clang-15 and its libFuzzer runtime, in libclang-common-15-dev on
# Debian 12), configures build-fuzz (or $CLTRAIN_FUZZ_BUILD) with clang, -Dfuzz=true and the
# sanitizers, builds only the harnesses and fuzzes each for the given time on a scratch copy of
# its corpus (the committed corpus is never modified). Exits non-zero if any harness finds a
# crash, sanitizer error, leak, timeout or out-of-memory, printing the reproducer's path.
#
# A finding becomes a regression input: reproduce it with
#   build-fuzz/tests/fuzz/fuzz_<name> <reproducer>
# fix the code, then copy the reproducer into tests/fuzz/corpus/<name>/ under a name saying
# what it was (e.g. idx/huge-count-gzip) and commit it with the fix. Every corpus file is
# replayed on every run (tools/fuzz.sh 0 does only that), so the bug stays fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
shift || true
[[ $seconds =~ ^[0-9]+$ ]] || { echo "usage: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]" >&2; exit 2; }
all=(safetensors checkpoint idx csv spec tune kernel_cache)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

packages=(meson ninja-build pkg-config python3 ocl-icd-opencl-dev opencl-c-headers libclblast-dev
          zlib1g-dev libpng-dev libjpeg62-turbo-dev clang-15 libclang-common-15-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build=${CLTRAIN_FUZZ_BUILD:-build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-15 meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dtests=disabled -Dmpi=disabled --buildtype=debugoptimized
fi
exes=()
for t in "${targets[@]}"; do exes+=("tests/fuzz/fuzz_$t"); done
nice ninja -C "$build" "${exes[@]}"

# The sanitizers stop at the first error (UBSan too), LeakSanitizer is on, and the suppressions
# cover only the OpenCL stack's libraries (which no harness loads code from anyway).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:${LSAN_OPTIONS:-}"
# Stacks with file:line: the runtime does not always find the symbolizer on its own.
symbolizer=$(command -v llvm-symbolizer-15 || command -v llvm-symbolizer ||
             ls /usr/lib/llvm-*/bin/llvm-symbolizer 2>/dev/null | tail -1 || true)
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH="${ASAN_SYMBOLIZER_PATH:-$symbolizer}"

declare -A max_len=([safetensors]=8192 [checkpoint]=8192 [idx]=4096 [csv]=4096 [spec]=1024
                    [tune]=4096 [kernel_cache]=1024)
work="$build/fuzz-work"
rm -rf "$work"

# fuzz_one TARGET: one harness over its corpus; prints its lines in one write when it ends, and
# leaves $work/TARGET.clean when it found nothing (a harness without it failed)
fuzz_one() {
  local t=$1 exe="$build/tests/fuzz/fuzz_$1" seeds="tests/fuzz/corpus/$1" log="$work/$1.log"
  local start status=0 runs files repro msg
  mkdir -p "$work/corpus/$t" "$work/artifacts/$t"
  start=$(date +%s)
  if ((seconds == 0)); then
    # Replay: each committed file once, in a stable order.
    mapfile -t files < <(find "$seeds" -type f | LC_ALL=C sort)
    nice "$exe" -artifact_prefix="$work/artifacts/$t/" "${files[@]}" >"$log" 2>&1 || status=$?
  else
    cp -r "$seeds/." "$work/corpus/$t/"
    nice "$exe" -max_total_time="$seconds" -max_len="${max_len[$t]:-4096}" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/artifacts/$t/" \
      "$work/corpus/$t" >"$log" 2>&1 || status=$?
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  if ((status != 0)); then
    shopt -s nullglob
    repro=("$work/artifacts/$t"/*)
    shopt -u nullglob
    # Replay writes no artifact: the reproducer is the corpus file that was running.
    ((${#repro[@]})) || mapfile -t repro < <(sed -n 's/^Running: //p' "$log" | tail -1)
    msg=$({
      echo "fuzz: $t FAILED (exit $status, $(($(date +%s) - start)) s); log $log"
      grep -E '^(==[0-9]+==ERROR|SUMMARY|    #[0-9]+ )' "$log" | head -30 || true
      for a in "${repro[@]}"; do echo "fuzz: reproducer $a (run: $exe $a)"; done
    })
    printf '%s\n' "$msg"
  else
    touch "$work/$t.clean"
    echo "fuzz: $t ok ($(($(date +%s) - start)) s${runs:+, $runs inputs}," \
      "$(find "$seeds" -type f | wc -l) seeds)"
  fi
}

# libFuzzer's time limit is wall time: the harnesses run side by side, one per core.
jobs_max=$(nproc)
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
  fuzz_one "$t" &
done
wait
failed=()
for t in "${targets[@]}"; do [ -e "$work/$t.clean" ] || failed+=("$t"); done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]}; see the reproducers above and the header of tools/fuzz.sh"
  exit 1
fi
echo "fuzz: all ${#targets[@]} harnesses clean"
