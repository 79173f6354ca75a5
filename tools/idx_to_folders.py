#!/usr/bin/env python3
"""Writes an IDX data set (MNIST, Fashion-MNIST) as folders of PNG files, the layout
`cltrain train --data images:DIR` reads: DIR/train/<class>/<index>.png and
DIR/test/<class>/<index>.png, 8-bit grey. Standard library only (zlib, struct, gzip).

    tools/idx_to_folders.py [--src DIR] [--names fashion|digits] OUT

--src: the folder holding train-images-idx3-ubyte(.gz) and the other three files; default
$CLTRAIN_DATA_DIR/fashion-mnist, else /usr/share/datasets/fashion-mnist (Debian's
dataset-fashion-mnist, which tools/setup.sh installs), where `--data fashion-mnist` looks.
--names: the class folders' names; "fashion" (default) uses Fashion-MNIST's, prefixed by the
label ("0_T-shirt_top") so that their sorted order is the labels' order; "digits" the label.
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

FASHION = ["T-shirt_top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle_boot"]


def read_idx(folder, stem):
    for name, opener in ((stem + ".gz", gzip.open), (stem, open)):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with opener(path, "rb") as f:
                data = f.read()
            magic, = struct.unpack(">I", data[:4])
            dims = magic & 0xff
            shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
            return shape, data[4 + 4 * dims:]
    sys.exit("idx_to_folders: %s: neither %s.gz nor %s found" % (folder, stem, stem))


def png(path, w, h, pixels):
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    raw = b"".join(b"\0" + pixels[y * w:(y + 1) * w] for y in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) +
                chunk(b"IEND", b""))
    os.replace(tmp, path)


def main():
    root = os.environ.get("CLTRAIN_DATA_DIR") or "/usr/share/datasets"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=os.path.join(root, "fashion-mnist"))
    ap.add_argument("--names", choices=["fashion", "digits"], default="fashion")
    ap.add_argument("out")
    a = ap.parse_args()
    for split, prefix in (("train", "train"), ("test", "t10k")):
        (n, h, w), images = read_idx(a.src, prefix + "-images-idx3-ubyte")
        (m,), labels = read_idx(a.src, prefix + "-labels-idx1-ubyte")
        if n != m or len(images) != n * h * w or len(labels) != n:
            sys.exit("idx_to_folders: %s: the %s files disagree on their sizes" % (a.src, split))
        for i in range(n):
            y = labels[i]
            name = "%d_%s" % (y, FASHION[y]) if a.names == "fashion" and y < 10 else str(y)
            folder = os.path.join(a.out, split, name)
            os.makedirs(folder, exist_ok=True)
            png(os.path.join(folder, "%05d.png" % i), w, h, images[i * h * w:(i + 1) * h * w])
        print("%s: %d images of %d x %d written to %s" % (split, n, h, w,
                                                           os.path.join(a.out, split)))


if __name__ == "__main__":
    main()
