#!/bin/sh
# Training curves as SVG: `cltrain plot` of metrics files written here (known points: a gap at a
# diverged loss, a run without log points or accuracy, file names with XML's special characters
# or invalid UTF-8, extreme values, a long series thinned per pixel column, the loss panels on
# a log scale) is XML with its panels, axes, labels and one curve per run and series with the
# expected number of points (tests/cli/plot_check.py); bad input fails with one line naming the
# file and line (exit 1), bad usage exits 2, and a failed plot leaves the old figure; `train
# --plot` writes the figure of its --metrics file, rewritten whole (never seen half-written)
# while the run goes and once more when it stops. Needs CLTRAIN_BIN (set by meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the metrics files and to check the SVG"
make_tmp
check="$(cd "$(dirname "$0")" && pwd)/plot_check.py"

# -- metrics files with known points --------------------------------------------------------------
# a.jsonl: log points at steps 2..20 (the loss at step 12 is nan: a gap), two epochs and their
# evaluations, a line of another kind with nested values (ignored), CRLF line ends.
# b.jsonl (named with & < > "): no log points (the train loss comes from the epochs; the second
# is 0, left out on a log scale), evaluations without accuracy (regression: -1), a blank line.
# big.jsonl: 20000 log points.
b="$tmp/run \"b\" & <c>.jsonl"
python3 - "$tmp/a.jsonl" "$b" "$tmp/big.jsonl" <<'EOF'
import sys
a, b, big = sys.argv[1:]
with open(a, "w", newline="") as f:
    f.write('{"event":"start","note":{"nested":[1,2.5e-3,{"x":null}]},"ok":true}\r\n')
    for step in range(2, 21, 2):
        loss = "nan" if step == 12 else "%.4g" % (1.2 - step / 40)
        f.write('{"event":"log","epoch":%d,"step":%d,"loss":%s,"lr":%g,"samples_per_s":9.5,'
                '"elapsed_s":0.1}\r\n' % (1 + step // 11, step, loss, 0.1 * (1 - step / 40)))
        if step % 10 == 0:
            f.write('{"event":"epoch","epoch":%d,"step":%d,"train_loss":1.0,"epoch_s":0.5,'
                    '"samples_per_s":9.5}\r\n' % (step // 10, step))
            f.write('{"event":"eval","epoch":%d,"step":%d,"test_loss":%g,"test_accuracy":%g,'
                    '"host_waits":3}\r\n' % (step // 10, step, 1.1 - step / 50, 0.4 + step / 50))
with open(b, "w") as f:
    for step, loss in ((10, 0.9), (20, 0)):
        f.write('{"event":"epoch","epoch":%d,"step":%d,"train_loss":%g,"epoch_s":0.5,'
                '"samples_per_s":9.5}\n\n' % (step // 10, step, loss))
        f.write('{"event":"eval","epoch":%d,"step":%d,"test_loss":%g,"test_accuracy":-1,'
                '"host_waits":3}\n' % (step // 10, step, 0.8 + step / 100))
with open(big, "w") as f:
    for step in range(1, 20001):
        f.write('{"event":"log","step":%d,"loss":%g,"lr":0.001}\n'
                % (step, 2.0 / (1 + step / 1000) + 0.1 * ((step * 7919) % 13) / 13))
EOF

structure() { # structure LABEL SVG ARGS...: plot_check.py structure SVG ARGS...
    tc_label=$1
    shift
    python3 "$check" structure "$@" 2>"$tmp/check.err" ||
        fail "$tc_label: $(cat "$tmp/check.err")"
    echo "ok: $tc_label: structure"
}

cd "$tmp"
check_ok "plot two runs" "wrote curves.svg: 2 runs" -- "$CLTRAIN_BIN" plot a.jsonl "$b"
structure "plot two runs" curves.svg 0:train_loss=9/2 0:lr=10 0:test_loss=2 \
    0:test_accuracy=2 1:epoch_loss=2 1:test_loss=2 --legend a.jsonl --legend "$b" --no-points 0
check_ok "plot --log-loss" -- "$CLTRAIN_BIN" plot --log-loss -o "$tmp/log.svg" a.jsonl "$b" \
    --title "Log & <scale>"
structure "plot --log-loss" log.svg 0:train_loss=9/2 0:lr=10 0:test_loss=2 0:test_accuracy=2 \
    1:epoch_loss=1 1:test_loss=2 --log
grep -q '>Log &amp; &lt;scale&gt;</text>' log.svg || fail "plot --title: not escaped: $(head -5 log.svg)"
check_ok "plot a run without log points" -- "$CLTRAIN_BIN" plot --output=b.svg "$b"
structure "plot a run without log points" b.svg 0:epoch_loss=2 0:test_loss=2 --no-points 2
# extreme values: beyond +-1e300 and infinities are left out, denormals drawn, null absent;
# no coordinate or label is "nan" or "inf"
cat >extreme.jsonl <<'EOF'
{"event":"log","step":0,"loss":1e308,"lr":null}
{"event":"log","step":1e308,"loss":-1e308,"lr":-inf}
{"event":"log","step":5,"loss":1e-320,"lr":0.1}
{"event":"log","step":6,"loss":2e-320,"lr":0.1}
{"event":"log","step":7,"loss":inf,"lr":0.1}
EOF
for scale in "" --log-loss; do
    check_ok "plot extreme values $scale" -- "$CLTRAIN_BIN" plot extreme.jsonl $scale -o extreme.svg
    structure "plot extreme values $scale" extreme.svg 0:train_loss=2 0:lr=3 --no-points 2
    ! grep -qi 'nan\|inf' extreme.svg || fail "plot extreme values: $(grep -i 'nan\|inf' extreme.svg)"
done
# a name with invalid UTF-8 and a control character: shown as U+FFFD, the SVG still XML
odd=$(printf 'odd\377\001name.jsonl')
cp a.jsonl "$odd"
check_ok "plot an oddly named file" -- "$CLTRAIN_BIN" plot "$odd" -o odd.svg
structure "plot an oddly named file" odd.svg --legend "$(printf 'odd\357\277\275\357\277\275name.jsonl')"
check_ok "plot 20000 points" -- "$CLTRAIN_BIN" plot big.jsonl -o big.svg
# thinned to the lowest and highest point of each of the plot area's pixel columns
structure "plot 20000 points" big.svg "0:train_loss<=800" "0:lr<=800" --no-points 2
[ "$(wc -c <big.svg)" -lt 100000 ] || fail "plot 20000 points: $(wc -c <big.svg) bytes"

# -- bad input: one line naming the file (and line); the figure there is left as it was -----------
cp curves.svg before.svg
cp a.jsonl a.orig
printf '{"event":"log","step":1,"loss":1}\n{"event":"log" "step":2}\n' >bad.jsonl
printf '{"event":"start"}\n{"other":1}\n' >nosteps.jsonl
printf '{"event":"log","step":1,"loss":1}\n{"event":"eval","test_loss":1}\n' >nostep.jsonl
: >empty.jsonl
check_bad --code 1 "a missing file" "plot missing.jsonl: cannot open" -- \
    "$CLTRAIN_BIN" plot a.jsonl missing.jsonl
check_bad --code 1 "not JSON lines" "plot bad.jsonl:2: not a JSON object" "column 16" -- \
    "$CLTRAIN_BIN" plot a.jsonl bad.jsonl
echo "label,f1" >a.csv
check_bad --code 1 "a CSV file" "plot a.csv:1: not a JSON object" -- "$CLTRAIN_BIN" plot a.csv
check_bad --code 1 "no steps" "plot nosteps.jsonl: no training steps in 2 lines" -- \
    "$CLTRAIN_BIN" plot nosteps.jsonl
check_bad --code 1 "an empty file" "plot empty.jsonl: no training steps in 0 lines" -- \
    "$CLTRAIN_BIN" plot empty.jsonl
check_bad --code 1 "a record without its step" \
    'plot nostep.jsonl:2: the "eval" record has no numeric "step"' -- \
    "$CLTRAIN_BIN" plot nostep.jsonl
check_bad --code 1 "a folder" "plot $tmp: is a directory, not a regular file" -- "$CLTRAIN_BIN" plot "$tmp"
cmp -s curves.svg before.svg || fail "a failed plot changed curves.svg"
check_bad --code 2 "no file" "plot: no metrics file" -- "$CLTRAIN_BIN" plot
check_bad --code 2 "an unknown option" 'unknown option "--colour"' -- \
    "$CLTRAIN_BIN" plot a.jsonl --colour red
check_bad --code 2 "-o without a file" "--output needs a value" -- \
    "$CLTRAIN_BIN" plot a.jsonl -o
check_bad --code 2 "-o over an input" "--output a.jsonl and a.jsonl name the same file" -- \
    "$CLTRAIN_BIN" plot a.jsonl -o a.jsonl
check_bad --code 1 "-o in a missing folder" "$tmp/none/x.svg" -- \
    "$CLTRAIN_BIN" plot a.jsonl -o "$tmp/none/x.svg"
cmp -s a.jsonl a.orig || fail "-o over an input: the input changed"
# a run killed while writing its last line: that line is left out with a note
printf '{"event":"log","step":1,"loss":1,"lr":0.1}\n{"event":"log","st' >cut.jsonl
check_ok "an incomplete last line" "cut.jsonl:2: an incomplete last line" -- \
    "$CLTRAIN_BIN" plot cut.jsonl -o cut.svg
structure "an incomplete last line" cut.svg 0:train_loss=1 0:lr=1
check_ok "plot --help" "usage: cltrain plot" "--log-loss" -- "$CLTRAIN_BIN" plot --help
check_ok "cltrain --help lists plot" "plot METRICS.jsonl" -- "$CLTRAIN_BIN" --help

# -- train --plot: the figure of its metrics file ---------------------------------------------------
write_csv "$tmp" 96 32
train() {
    "$CLTRAIN_BIN" train --data "csv:$tmp/train.csv,$tmp/test.csv" --label-column 0 \
        --model "linear 16, relu, linear 3" --batch-size 16 --lr 0.01 "$@"
}
check_ok "train --plot" -- train --epochs 3 --log-every 2 --metrics m.jsonl --plot live.svg
structure "train --plot" live.svg 0:train_loss=9 0:lr=9 0:test_loss=3 0:test_accuracy=3 \
    --legend m.jsonl
check_ok "plot of train's metrics" -- "$CLTRAIN_BIN" plot m.jsonl -o after.svg
cmp -s live.svg after.svg || fail "train --plot and plot of its --metrics file differ"
ls | grep -q '\.tmp\.' && fail "train --plot: a temporary file was left: $(ls)"
check_ok "train --plot without --metrics" -- train --epochs 1 --log-every 0 --plot solo.svg
structure "train --plot without --metrics" solo.svg 0:epoch_loss=1 0:test_loss=1 \
    0:test_accuracy=1 --legend "cltrain train" --no-points 1
check_bad --code 2 "--plot over --metrics" "--metrics m.jsonl and --plot m.jsonl" -- \
    train --epochs 1 --metrics m.jsonl --plot m.jsonl
mkdir adir
mkfifo fifo
check_bad --code 1 "--plot a folder" "--plot" "adir" -- train --epochs 1 --plot adir
check_bad --code 1 "--plot a FIFO" "--plot fifo is a FIFO" -- train --epochs 1 --plot fifo

# while the run goes: every version of the file read is a whole SVG (atomic rewrites); a stop
# by SIGTERM writes the figure of the points so far (143, as a death by the signal)
python3 - "$check" live2.svg m2.jsonl "$CLTRAIN_BIN" "csv:$tmp/train.csv,$tmp/test.csv" <<'EOF' ||
import os, signal, subprocess, sys, time
import xml.etree.ElementTree as ET
check, svg, metrics, exe, data = sys.argv[1:]
run = subprocess.Popen([exe, "train", "--data", data, "--label-column", "0", "--model",
                        "linear 16, relu, linear 3", "--batch-size", "16", "--epochs", "100000",
                        "--log-every", "1", "--metrics", metrics, "--plot", svg, "--quiet"],
                       stderr=subprocess.PIPE)
versions, deadline = set(), time.time() + 120
while len(versions) < 3 and time.time() < deadline and run.poll() is None:
    try:
        with open(svg, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        time.sleep(0.02)
        continue
    if text not in versions:
        try:
            ET.fromstring(text)
        except ET.ParseError as e:
            run.kill()
            sys.exit("a version of %s read during the run is not XML (%s): %r" % (svg, e, text[-80:]))
        versions.add(text)
    time.sleep(0.02)
alive = run.poll() is None
run.send_signal(signal.SIGTERM)
err = run.communicate(timeout=120)[1].decode()
if not alive or len(versions) < 3:
    sys.exit("saw %d versions of the figure while the run went (alive: %s): %s"
             % (len(versions), alive, err))
if run.returncode != 143:
    sys.exit("SIGTERM: exit %d, expected 143: %s" % (run.returncode, err))
EOF
    fail "train --plot during the run: see above"
echo "ok: train --plot: whole versions while the run went, stopped by SIGTERM"
check_ok "plot of the stopped run's metrics" -- "$CLTRAIN_BIN" plot m2.jsonl -o after2.svg
cmp -s live2.svg after2.svg || fail "a stopped run's --plot differs from plot of its metrics"
