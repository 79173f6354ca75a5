# The helpers every shell test under tests/ sources: fail and skip (meson counts exit 77 as
# SKIP, so a script that could not check something never passes), the programs a script needs,
# its temporary folder, the checks of a command that must succeed or must fail with one line
# naming the fault, the writers of the tiny data sets (IDX folders, CSV files) and the
# environment mpirun needs in a container. POSIX sh, sourced by path from the script's folder:
#     . "$(dirname "$0")/../lib.sh"
# Messages start with the script's name. Names of the helpers' own variables start with tc_.

tc_name=$(basename "$0" .sh)

# fail MESSAGE...: "NAME: FAIL: MESSAGE" on stderr, exit 1.
fail() {
    echo "$tc_name: FAIL: $*" >&2
    exit 1
}

# skip REASON...: "NAME: skipped: REASON" on stdout, exit 77. For what this machine cannot
# check (a missing program, library or data set), never for a failure.
skip() {
    echo "$tc_name: skipped: $*"
    exit 77
}

# need_exe VAR: the environment variable VAR names an executable (meson test sets CLTRAIN_BIN
# and CLTRAIN_TUNE_BIN).
need_exe() {
    eval "tc_exe=\${$1:-}"
    [ -n "$tc_exe" ] || fail "$1 is not set (run through meson test)"
    [ -x "$tc_exe" ] || fail "$1=$tc_exe is not an executable"
}

# need_python3 WHY: python3 on PATH, else a failure saying WHY it is needed (every machine that
# builds cltrain has it: meson runs on it).
need_python3() {
    command -v python3 >/dev/null || fail "python3 is needed $*"
}

# need_numpy: sets $numpy_python to a Python that imports numpy (Debian's /usr/bin/python3
# first: a pyenv or venv python3 on PATH often lacks it); skips without one.
need_numpy() {
    for tc_py in /usr/bin/python3 python3; do
        if command -v "$tc_py" >/dev/null && "$tc_py" -c "import numpy" 2>/dev/null; then
            numpy_python=$tc_py
            return 0
        fi
    done
    skip "numpy is missing (neither /usr/bin/python3 nor python3 imports it)"
}

# make_tmp: $tmp, a fresh folder removed when the script ends.
make_tmp() {
    tmp=$(mktemp -d) || fail "mktemp -d failed"
    trap 'rm -rf "$tmp"' EXIT INT TERM
}

# tc_needles NEEDLE... --: collects the words before "--" into $tc_needles (one a line) and
# their count into $tc_shift.
tc_needles() {
    tc_needles=""
    tc_shift=0
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        tc_needles="$tc_needles
$1"
        tc_shift=$((tc_shift + 1))
        shift
    done
    [ $# -gt 0 ] || fail "$tc_label: the check has no '--' before its command"
    tc_shift=$((tc_shift + 1))
}

# tc_find_needles WHERE FILE...: fails unless every needle is in one of the FILEs.
tc_find_needles() {
    tc_where=$1
    shift
    while IFS= read -r tc_n; do
        [ -n "$tc_n" ] || continue
        grep -qF -- "$tc_n" "$@" || fail "$tc_label: $tc_where lacks '$tc_n': $(cat "$@")"
    done <<EOF
$tc_needles
EOF
}

# check_ok LABEL [NEEDLE...] -- COMMAND...: COMMAND must exit 0 and every NEEDLE (a fixed
# string) appear in its stdout or stderr. Its stdout is left in $tmp/out, its stderr in
# $tmp/err (make_tmp first).
check_ok() {
    tc_label=$1
    shift
    tc_needles "$@"
    shift "$tc_shift"
    tc_rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || tc_rc=$?
    [ "$tc_rc" -eq 0 ] ||
        fail "$tc_label: exit code $tc_rc: $(cat "$tmp/err") $(tail -5 "$tmp/out")"
    tc_find_needles "the output" "$tmp/out" "$tmp/err"
    echo "ok: $tc_label"
}

# check_bad [--code N] LABEL [NEEDLE...] -- COMMAND...: COMMAND must exit with code N, or by
# default 1 or 2 (an error, a usage error; never 0, never a crash: 128 and up), and write
# exactly one line on stderr, holding every NEEDLE (fixed strings). When $check_bad_dir is set,
# that folder (where the command was told to save) must still be empty. Output as check_ok's.
check_bad() {
    tc_code=""
    if [ "$1" = "--code" ]; then
        tc_code=$2
        shift 2
    fi
    tc_label=$1
    shift
    tc_needles "$@"
    shift "$tc_shift"
    tc_rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || tc_rc=$?
    [ "$tc_rc" -ne 0 ] || fail "$tc_label: exited 0: $(cat "$tmp/err") $(tail -5 "$tmp/out")"
    if [ -n "$tc_code" ]; then
        [ "$tc_rc" -eq "$tc_code" ] ||
            fail "$tc_label: exit code $tc_rc, expected $tc_code: $(cat "$tmp/err")"
    else
        [ "$tc_rc" -eq 1 ] || [ "$tc_rc" -eq 2 ] ||
            fail "$tc_label: exit code $tc_rc (expected 1 or 2; >= 128 is a crash): $(cat "$tmp/err")"
    fi
    tc_lines=$(wc -l <"$tmp/err")
    [ "$tc_lines" -eq 1 ] ||
        fail "$tc_label: $tc_lines lines on stderr, expected 1: $(cat "$tmp/err")"
    tc_find_needles "stderr" "$tmp/err"
    if [ -n "${check_bad_dir:-}" ]; then
        tc_left=$(ls -A "$check_bad_dir")
        [ -z "$tc_left" ] || fail "$tc_label: left files behind: $tc_left"
    fi
    echo "ok: $tc_label: $(cat "$tmp/err")"
}

# write_idx DIR NTRAIN NTEST [DAMAGE]: an IDX data set in DIR (gzipped train- and t10k- files,
# as Fashion-MNIST's): 4x4 images from seeded generators, 3 classes, the label 0, 1 or 2 as the
# top half is clearly darker than, about as bright as, clearly brighter than the bottom half.
# DAMAGE: magic (the train images' magic 0x804), short (the train images 10 bytes short),
# count (one train label fewer than images).
write_idx() {
    need_python3 "to write the IDX test data"
    python3 - "$@" <<'EOF'
import gzip, os, random, struct, sys
d, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
damage = sys.argv[4] if len(sys.argv) > 4 else ""
os.makedirs(d, exist_ok=True)
def images(n, seed):
    r = random.Random(seed)
    return [r.getrandbits(8) for _ in range(n * 16)]
def labels(px, n):  # 0, 1, 2 as the top half is darker than, like, brighter than the bottom
    out = []
    for i in range(n):
        d = sum(px[i * 16 + 8:i * 16 + 16]) - sum(px[i * 16:i * 16 + 8])
        out.append(0 if d < -127 else (1 if d <= 127 else 2))
    return out
for split, n, seed in (("train", ntrain, 1), ("t10k", ntest, 2)):
    px = images(n, seed)
    lb = labels(px, n)
    magic = 0x804 if (damage == "magic" and split == "train") else 0x803
    img = struct.pack(">IIII", magic, n, 4, 4) + bytes(px)
    if damage == "short" and split == "train":
        img = img[:-10]
    nl = n - 1 if (damage == "count" and split == "train") else n
    lab = struct.pack(">II", 0x801, nl) + bytes(lb[:nl])
    with gzip.open(os.path.join(d, split + "-images-idx3-ubyte.gz"), "wb") as f:
        f.write(img)
    with gzip.open(os.path.join(d, split + "-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(lab)
EOF
}

# write_csv DIR NTRAIN NTEST: CSV data in DIR with a header, the target first, then 5 features
# uniform in [-1, 1] (one seeded generator, the train rows first): train.csv and test.csv for
# classification (3 classes from x1 + 0.5 x2 - x3), train_reg.csv and test_reg.csv for
# regression (y = 2 x1 - x4 + 0.5) on the same features.
write_csv() {
    need_python3 "to write the CSV test data"
    python3 - "$@" <<'EOF'
import os, random, sys
d, ntrain, ntest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(3)
for name, n in (("train", ntrain), ("test", ntest)):
    with open(os.path.join(d, name + ".csv"), "w") as c, \
         open(os.path.join(d, name + "_reg.csv"), "w") as g:
        c.write("label,f1,f2,f3,f4,f5\n")
        g.write("y,f1,f2,f3,f4,f5\n")
        for _ in range(n):
            x = [round(r.uniform(-1, 1), 4) for _ in range(5)]
            s = x[0] + 0.5 * x[1] - x[2]
            lab = 0 if s < -0.3 else (1 if s < 0.3 else 2)
            c.write("%d,%s\n" % (lab, ",".join(map(str, x))))
            g.write("%.5f,%s\n" % (2 * x[0] - x[3] + 0.5, ",".join(map(str, x))))
EOF
}

# mpi_env: what Open MPI's mpirun needs on one machine in a container.
mpi_env() {
    # Containers run as root, which mpirun refuses unless both variables are set.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Shared memory and loopback only, so no network interface or InfiniBand device is probed
    # (containers have odd ones, and openib warns).
    export OMPI_MCA_btl=self,vader
    # vader's single-copy transfers (CMA) need ptrace rights between the ranks, which
    # containers without CAP_SYS_PTRACE lack ("Read -1, expected ..., errno = 1" on large
    # messages).
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
    # Under ASan, Open MPI's allocations kept past MPI_Finalize are suppressed by library name
    # (tests/lsan.supp), which needs whole malloc stacks: the fast unwinder stops at the first
    # frame without a frame pointer, inside Debian's Open MPI.
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
}
