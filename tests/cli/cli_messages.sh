#!/bin/sh
# What `cltrain train` prints on a run that succeeds: --quiet's one line (the final summary),
# the warning for a batch larger than the data, the first progress line's ETA when the run
# built its programs (none: "ETA -", not a rate made of compile time), --profile's title above
# its header, and the progress line rewritten in place on a terminal only: plain lines to a
# file, and under mpirun (which hands its ranks a pseudo-terminal) even on one.
# Needs CLTRAIN_BIN (set by meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the test data and run cltrain on a pseudo-terminal"
make_tmp

write_idx "$tmp/idx" 40 12
M="linear 8, relu, linear 3"
train() {
    "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --batch-size 8 "$@"
}

# -- --quiet: the final epoch's summary, nothing else ----------------------------------------
check_ok "--quiet" -- train --epochs 2 --log-every 1 --quiet
[ "$(wc -l <"$tmp/out")" -eq 1 ] && grep -q "^epoch 2/2: train loss .*test accuracy" "$tmp/out" ||
    fail "--quiet: expected the final summary alone: $(cat "$tmp/out")"
[ ! -s "$tmp/err" ] || fail "--quiet: stderr: $(cat "$tmp/err")"
check_ok "--quiet with --steps" -- train --epochs 5 --steps 7 --quiet
[ "$(wc -l <"$tmp/out")" -eq 1 ] && grep -q "^epoch 2/2: train loss" "$tmp/out" ||
    fail "--quiet with --steps: expected the summary of the last epoch run: $(cat "$tmp/out")"

# -- a batch larger than the training split: one warning line, and the run trains -------------
check_ok "--batch-size 70 on 40 samples" -- train --steps 2 --batch-size 70 --quiet
[ "$(wc -l <"$tmp/err")" -eq 1 ] &&
    grep -q "^cltrain: warning: --batch-size 70 is larger than the training split of idx:.* (40 sa" \
        "$tmp/err" || fail "--batch-size 70: stderr: $(cat "$tmp/err")"
check_ok "--batch-size 40 on 40 samples" -- train --steps 1 --batch-size 40 --quiet
[ ! -s "$tmp/err" ] || fail "--batch-size 40: a warning: $(cat "$tmp/err")"

# -- the first progress line's ETA: programs built during its window (an empty kernel cache) --
mkdir "$tmp/cache"
check_ok "ETA on a cold cache" -- env CLTRAIN_CACHE_DIR="$tmp/cache" "$CLTRAIN_BIN" train \
    --data "idx:$tmp/idx" --model "$M" --batch-size 8 --steps 3 --log-every 1
grep "^epoch 1/1 step 1/3 " "$tmp/out" | grep -q " ETA -$" ||
    fail "first line: an ETA from a window that compiled programs: $(cat "$tmp/out")"
grep "^epoch 1/1 step 2/3 " "$tmp/out" | grep -Eq " ETA [0-9]+:[0-9][0-9]$" ||
    fail "second line: no ETA: $(cat "$tmp/out")"

# -- --profile: "profile (DEVICE):" alone, then the header aligned with the rows ---------------
check_ok "--profile" -- train --steps 2 --profile
python3 - "$tmp/out" <<'EOF' || fail "--profile: $(cat "$tmp/out")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
i = next(k for k, l in enumerate(lines) if l.startswith("profile ("))
assert re.fullmatch(r"profile \(.+\):", lines[i]), lines[i]
head, row = lines[i + 1], lines[i + 2]
assert re.match(r"  name +calls +total ms +mean us +share +bytes +GB/s$", head), head
# the header's "calls" ends where the first row's count ends
assert head.index("calls") + len("calls") == re.match(r"  .{40} +\d+", row).end(), (head, row)
EOF
echo "ok: --profile's title and header"

# -- the progress line: rewritten on a terminal, plain lines otherwise --------------------------
# on a pseudo-terminal (the positive control): "\r\033[K" rewrites the line
python3 - "$tmp/tty.out" "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" \
    --batch-size 8 --steps 3 --log-every 1 <<'EOF' || fail "on a terminal"
import os, pty, sys
out, cmd = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(cmd[0], cmd)
data = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
_, status = os.waitpid(pid, 0)
open(out, "wb").write(data)
assert os.WEXITSTATUS(status) == 0, data
EOF
grep -q "$(printf '\033')\[K" "$tmp/tty.out" ||
    fail "no progress line on a terminal: $(cat "$tmp/tty.out")"
echo "ok: on a terminal the progress line is rewritten"
check_ok "to a file" -- train --steps 3 --log-every 1
! grep -q "$(printf '[\r\033]')" "$tmp/out" "$tmp/err" ||
    fail "escape codes in a file: $(cat "$tmp/out")"
[ "$(grep -c "^epoch 1/1 step [123]/3 " "$tmp/out")" -eq 3 ] || fail "to a file: $(cat "$tmp/out")"
# under mpirun with its output to a file
if command -v mpirun >/dev/null; then
    mpi_env
    rc=0
    mpirun -n 1 "$CLTRAIN_BIN" train --data "idx:$tmp/idx" --model "$M" --batch-size 8 \
        --steps 3 --log-every 1 >"$tmp/mpi.out" 2>"$tmp/mpi.err" || rc=$?
    if [ "$rc" -ne 0 ] && grep -q "built without MPI\|mpirun\|orte\|ORTE" "$tmp/mpi.err"; then
        echo "skipped: mpirun could not run cltrain here: $(head -3 "$tmp/mpi.err")"
    else
        [ "$rc" -eq 0 ] || fail "mpirun: exit code $rc: $(cat "$tmp/mpi.err")"
        ! grep -q "$(printf '[\r\033]')" "$tmp/mpi.out" ||
            fail "escape codes under mpirun to a file: $(od -c "$tmp/mpi.out" | head)"
        [ "$(grep -c "^epoch 1/1 step [123]/3 " "$tmp/mpi.out")" -eq 3 ] ||
            fail "mpirun to a file: $(cat "$tmp/mpi.out")"
        echo "ok: under mpirun to a file: plain lines"
    fi
fi

echo "cli_messages: all passed"
