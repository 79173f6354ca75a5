#!/bin/sh
# The training-curve figure as a person sees it: `cltrain plot` of two runs' metrics (written
# here) rendered by headless Chromium, and the screenshot read back (tests/cli/plot_check.py
# look: the PNG decoded with zlib): every run's colour inside each plot area that draws it, dark
# text pixels in the title and beside and below each plot area (the tick labels). The check
# proves it can fail on every run: a screenshot of the same figure without its curves, and one
# of a blank SVG, must both be refused. Skips (77) without chromium. Needs CLTRAIN_BIN (set by
# meson test).
set -eu
. "$(dirname "$0")/../lib.sh"

need_exe CLTRAIN_BIN
need_python3 "to write the metrics files and to read the screenshots"
browser=""
for b in chromium chromium-browser google-chrome; do
    if command -v "$b" >/dev/null; then
        browser=$b
        break
    fi
done
[ -n "$browser" ] || skip "chromium is missing (Debian: apt-get install chromium)"
make_tmp
check="$(cd "$(dirname "$0")" && pwd)/plot_check.py"

# two runs: a falling loss and a rising accuracy, on different learning rates; 75 log points
# each (more than get dots: the lines alone must show)
python3 - "$tmp/fast.jsonl" "$tmp/slow.jsonl" <<'EOF'
import math, sys
for path, rate, lr in ((sys.argv[1], 1 / 60, 0.01), (sys.argv[2], 1 / 200, 0.003)):
    with open(path, "w") as f:
        for step in range(4, 301, 4):
            f.write('{"event":"log","step":%d,"loss":%.5f,"lr":%g}\n'
                    % (step, 0.3 + 1.8 * math.exp(-step * rate), lr * (1 - step / 400)))
            if step % 60 == 0:
                f.write('{"event":"eval","step":%d,"test_loss":%.5f,"test_accuracy":%.4f}\n'
                        % (step, 0.35 + 1.7 * math.exp(-step * rate), 0.9 - 0.6 * math.exp(-step * rate)))
EOF
svg="$tmp/curves.svg"
check_ok "plot" -- "$CLTRAIN_BIN" plot "$tmp/fast.jsonl" "$tmp/slow.jsonl" -o "$svg"
height=$(sed -n 's/.*<svg [^>]*height="\([0-9]*\)".*/\1/p' "$svg")
[ -n "$height" ] || fail "no height in the SVG's root: $(head -3 "$svg")"

# shoot SVG PNG: the screenshot at the figure's size, scale 1 (its own profile folder: the
# user's is never touched; --no-sandbox: tests may run as root in a container)
shoot() {
    rm -f "$2"
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --force-device-scale-factor=1 --user-data-dir="$tmp/profile" --window-size="960,$height" \
        --screenshot="$2" "file://$1" >"$tmp/browser.log" 2>&1 || true
    [ -s "$2" ] || fail "$browser wrote no screenshot of $1: $(tail -5 "$tmp/browser.log")"
}

shoot "$svg" "$tmp/curves.png"
python3 "$check" look "$svg" "$tmp/curves.png" 2>"$tmp/check.err" ||
    fail "the screenshot: $(cat "$tmp/check.err")"
echo "ok: the screenshot shows both runs' curves in every panel, the title and the tick labels"

# the check's own test: the figure without its curves, and a blank page, are refused
python3 "$check" strip "$svg" "$tmp/bare.svg"
shoot "$tmp/bare.svg" "$tmp/bare.png"
if python3 "$check" look "$svg" "$tmp/bare.png" 2>"$tmp/check.err"; then
    fail "the check passed a screenshot without curves"
fi
grep -q "pixels of run 1's colour" "$tmp/check.err" ||
    fail "without curves: not refused for the curves: $(cat "$tmp/check.err")"
echo "ok: a screenshot without curves is refused: $(head -1 "$tmp/check.err")"
printf '<svg xmlns="http://www.w3.org/2000/svg" width="960" height="%s"/>\n' "$height" \
    >"$tmp/blank.svg"
shoot "$tmp/blank.svg" "$tmp/blank.png"
if python3 "$check" look "$svg" "$tmp/blank.png" 2>"$tmp/check.err"; then
    fail "the check passed a blank screenshot"
fi
grep -q "title shows no dark text" "$tmp/check.err" && grep -q "dark text pixels left of" \
    "$tmp/check.err" || fail "blank: not refused for the text: $(cat "$tmp/check.err")"
echo "ok: a blank screenshot is refused: $(head -1 "$tmp/check.err")"
