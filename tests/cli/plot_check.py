#!/usr/bin/env python3
"""Checks of the training-curve SVG that `cltrain plot` and `train --plot` write, for
tests/cli/cli_plot.sh and tests/cli/cli_plot_look.sh. Standard library only.

  plot_check.py structure SVG [RUN:SERIES=POINTS[/STRETCHES] | RUN:SERIES<=POINTS ...]
                [--legend NAME ...]
                [--no-points N] [--log]
      The file is XML (xml.etree) and an SVG with a title, four panels each with its title,
      plot area, "step" axis label, a y-axis label and (when it has points) tick labels on
      both axes; every RUN:SERIES given is one curve <path> with that many points (and
      stretches, default 1), or with <=, at least 2 and at most POINTS in one stretch; no other
      curve exists; the legend holds the NAMEs in order;
      --no-points: that many panels say they have none; --log: the loss panels say so.
  plot_check.py look SVG PNG
      PNG is a screenshot of SVG (headless Chromium, scale 1): inside each plot area of a panel
      that has curves, every run drawn there shows its colour; the tick labels beside and below
      each such area and the figure's title are dark text pixels.
  plot_check.py strip SVG OUT
      OUT is SVG without its curves and dots (for the look check's own test: it must fail).
Exit 0 when the check holds, else 1 with one line per failure on stderr.
"""
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"
errors = []


def err(msg):
    errors.append(msg)


def by_class(root, cls, tag=None):
    return [e for e in root.iter() if (e.get("class") or "") == cls
            and (tag is None or e.tag == NS + tag)]


def text_of(e):
    return "".join(e.itertext())


def path_points(d):
    """(points, stretches) of a path's data made of M and L commands with x y pairs."""
    tokens = re.findall(r"[MLml]|-?\d+(?:\.\d+)?", d)
    points = stretches = 0
    i = 0
    while i < len(tokens):
        cmd = tokens[i]
        if cmd not in ("M", "L"):
            raise ValueError("unexpected token %r in path data" % cmd)
        float(tokens[i + 1]), float(tokens[i + 2])
        points += 1
        stretches += cmd == "M"
        i += 3
    return points, stretches


def structure(args):
    svg = args[0]
    expect, legend, no_points, log = {}, None, None, False
    rest = args[1:]
    while rest:
        a = rest.pop(0)
        if a == "--legend":
            legend = legend or []
            legend.append(rest.pop(0))
        elif a == "--no-points":
            no_points = int(rest.pop(0))
        elif a == "--log":
            log = True
        elif "<=" in a:  # a thinned curve: at least 2 and at most N points, one stretch
            key, n = a.split("<=")
            expect[key] = ("<=", int(n))
        else:
            key, n = a.split("=")
            pts, _, st = n.partition("/")
            expect[key] = (int(pts), int(st or 1))
    try:
        root = ET.parse(svg).getroot()
    except ET.ParseError as e:
        err("%s is not XML: %s" % (svg, e))
        return
    if root.tag != NS + "svg":
        err("the root element is %s, not an SVG's" % root.tag)
        return
    titles = by_class(root, "figure-title", "text")
    if len(titles) != 1 or not text_of(titles[0]).strip():
        err("no figure title")
    panels = by_class(root, "panel", "g")
    if len(panels) != 4:
        err("%d panels, expected 4" % len(panels))
    want_titles = ["train loss", "test loss", "test accuracy", "learning rate"]
    empty = 0
    for p, want in zip(panels, want_titles):
        title = [text_of(t) for t in by_class(p, "title", "text")]
        if not title or not title[0].startswith(want):
            err("panel title %r, expected %r" % (title, want))
        if log and want.endswith("loss") and "log scale" not in title[0]:
            err("panel %r does not say it is on a log scale" % want)
        if len(by_class(p, "plot-area", "rect")) != 1:
            err("panel %r: no plot area" % want)
        labels = [text_of(t) for t in by_class(p, "axis-label", "text")]
        if "step" not in labels or len(labels) != 2 or not all(labels):
            err("panel %r: axis labels %r, expected 'step' and the value's" % (want, labels))
        ticks = [text_of(t) for t in by_class(p, "tick", "text")]
        if by_class(p, "no-data", "text"):
            empty += 1
        elif len(ticks) < 4 or not all(re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?", t) for t in ticks):
            err("panel %r: tick labels %r" % (want, ticks))
    if no_points is not None and empty != no_points:
        err("%d panels say they have no points, expected %d" % (empty, no_points))
    seen = {}
    for c in by_class(root, "curve", "path"):
        key = "%s:%s" % (c.get("data-run"), c.get("data-series"))
        if key in seen:
            err("two curves for %s" % key)
        try:
            seen[key] = path_points(c.get("d") or "")
        except (ValueError, IndexError) as e:
            err("curve %s: bad path data: %s" % (key, e))
    for key, want in expect.items():
        if key not in seen:
            err("no curve %s (curves: %s)" % (key, sorted(seen)))
        elif want[0] == "<=":
            if not 2 <= seen[key][0] <= want[1] or seen[key][1] != 1:
                err("curve %s: %d points in %d stretches, expected 2 to %d in 1"
                    % (key, seen[key][0], seen[key][1], want[1]))
        elif seen[key] != want:
            err("curve %s: %d points in %d stretches, expected %d in %d"
                % (key, seen[key][0], seen[key][1], want[0], want[1]))
    for key in seen:
        if expect and key not in expect:
            err("an unexpected curve %s" % key)
    if legend is not None:
        got = [text_of(t) for t in by_class(root, "legend-label", "text")]
        if got != legend:
            err("legend %r, expected %r" % (got, legend))


# ---- the screenshot ----------------------------------------------------------------------

def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("PNG depth %d, colour type %d, interlace %d: not decoded here"
                         % (depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def hex_rgb(s):
    return tuple(int(s[i:i + 2], 16) for i in (1, 3, 5))


def count(rows, box, test):
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    n = 0
    for y in range(max(y0, 0), min(y1, len(rows))):
        row = rows[y]
        for x in range(max(x0, 0), min(x1, len(row))):
            n += test(row[x])
    return n


def near(colour, tol=60):
    return lambda p: sum(abs(p[i] - colour[i]) for i in range(3)) <= tol


def dark(p):
    return max(p) < 110


def look(svg, png):
    root = ET.parse(svg).getroot()
    try:
        w, h, rows = read_png(png)
    except (ValueError, zlib.error, struct.error, TypeError) as e:
        err("%s: %s" % (png, e))
        return
    if w < float(root.get("width")) or h < float(root.get("height")):
        err("the screenshot (%dx%d) is smaller than the figure" % (w, h))
    title = by_class(root, "figure-title", "text")[0]
    tx, ty = float(title.get("x")), float(title.get("y"))
    if count(rows, (tx - 150, ty - 20, tx + 150, ty + 6), dark) < 40:
        err("the figure's title shows no dark text pixels")
    panels_with_curves = 0
    for p in by_class(root, "panel", "g"):
        name = text_of(by_class(p, "title", "text")[0])
        area = by_class(p, "plot-area", "rect")[0]
        x, y = float(area.get("x")), float(area.get("y"))
        aw, ah = float(area.get("width")), float(area.get("height"))
        curves = by_class(p, "curve", "path")
        if not curves:
            continue
        panels_with_curves += 1
        inside = (x + 2, y + 2, x + aw - 2, y + ah - 2)
        for c in curves:
            colour = hex_rgb(c.get("stroke"))
            if near((255, 255, 255), 150)(colour) or dark(colour):
                err("run %s's colour %s is hard to tell from the page or the text"
                    % (c.get("data-run"), c.get("stroke")))
            n = count(rows, inside, near(colour))
            if n < 100:
                err("panel %r: %d pixels of run %s's colour %s in the plot area, expected >= 100"
                    % (name, n, c.get("data-run"), c.get("stroke")))
        left = (x - 70, y - 6, x - 6, y + ah + 6)     # the y-axis tick labels
        below = (x - 10, y + ah + 6, x + aw + 20, y + ah + 24)  # the x-axis tick labels
        for where, box in (("left of", left), ("below", below)):
            n = count(rows, box, dark)
            if n < 60:
                err("panel %r: %d dark text pixels %s the plot area, expected >= 60 (tick "
                    "labels)" % (name, n, where))
    if panels_with_curves == 0:
        err("no panel has curves to look for")


def strip(svg, out):
    tree = ET.parse(svg)
    for parent in tree.getroot().iter():
        for child in list(parent):
            if (child.get("class") or "") in ("curve", "marker"):
                parent.remove(child)
    ET.register_namespace("", NS[1:-1])
    tree.write(out)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("structure", "look", "strip"):
        sys.exit(__doc__)
    if sys.argv[1] == "structure":
        structure(sys.argv[2:])
    elif sys.argv[1] == "look":
        look(sys.argv[2], sys.argv[3])
    else:
        strip(sys.argv[2], sys.argv[3])
    for e in errors:
        print("plot_check: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
