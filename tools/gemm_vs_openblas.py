#!/usr/bin/env python3
"""cltrain's GEMM beside OpenBLAS sgemm on this machine's CPU, shape by shape.

Runs `cltrain-tune --quick --min --openblas LIB` on the CPU device (the MLP and CNN presets'
training shapes, every own variant; its tuning file goes to a temporary path, the user's is
left alone). The tuner times OpenBLAS's cblas_sgemm on the host with the same operands in the
same rounds as the variants, shape by shape, so that a noisy moment of a shared machine falls
on both alike; this script runs it R times and keeps each side's best. Prints, per shape,
OpenBLAS's GFLOP/s, the best own variant's, the ratio, and the bound: the ratio of a kernel
that ran at the best own rate of the whole table after the device's launch floor (the
tuner's 1x1x1 product back to back), i.e. OpenBLAS's time over floor + flop / best rate; a
bound below 0.9 marks a shape that the launch alone keeps from 0.9. Then the ratio over each
layout's total time, the shapes below 0.9 with their MFLOP, and how many of the shapes of at
least 1 MFLOP are below 0.9 (on PoCL the smaller ones are held there by the launch).

usage: tools/gemm_vs_openblas.py [BUILD_DIR] [--repeats N] [--rounds R]
       (default: build, 3 repeats, 2 rounds)
OPENBLAS_LIB names the library (default libopenblas.so.0: Debian's libopenblas0-pthread);
set OPENBLAS_CORETYPE where OpenBLAS misdetects the CPU (e.g. Haswell on AMD Zen 3).
"""
import os
import re
import subprocess
import sys
import tempfile
import time

OWN_KINDS = ("direct", "packed", "panel", "tiled")  # cltrain's own variants, not CLBlast
BLAS_ROW = "openblas cblas_sgemm (host)"


def parse_args(argv):
    build, counts = "build", {"--repeats": 3, "--rounds": 2}
    i = 0
    while i < len(argv):
        if argv[i] in counts and i + 1 < len(argv) and argv[i + 1].isdigit():
            counts[argv[i]] = int(argv[i + 1])
            i += 2
        elif not argv[i].startswith("-"):
            build = argv[i]
            i += 1
        else:
            sys.exit(f"gemm_vs_openblas: unknown argument \"{argv[i]}\"; usage: {__doc__}")
    for flag, n in counts.items():
        if n < 1:
            sys.exit(f"gemm_vs_openblas: {flag} must be at least 1")
    return build, counts["--repeats"], counts["--rounds"]


def run_tuner(tune, repeats):
    """The tuner's sections: {layout: (shapes [(M, N, K)], {variant: [GFLOP/s per shape]})},
    and its launch floor per layout: {layout: seconds per call of a 1x1x1 product}."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [tune, "--device", os.environ.get("CLTRAIN_DEVICE", "cpu"), "--quick", "--min",
               "--repeats", str(repeats), "--output", os.path.join(tmp, "tune.json"),
               "--openblas", os.environ.get("OPENBLAS_LIB", "libopenblas.so.0")]
        run = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)  # its stderr shows
        if run.returncode != 0:
            sys.exit(f"gemm_vs_openblas: {' '.join(cmd)} failed (exit {run.returncode})")
        out = run.stdout
    sections, floors, layout = {}, {}, None
    for line in out.splitlines():
        m = re.match(r"^(NT|NN|TN):", line)
        if m:
            layout = m.group(1)
            continue
        m = re.match(r"^launch floor: ([0-9.]+) us", line)
        if m and layout:
            floors[layout] = float(m.group(1)) * 1e-6
            continue
        if line.startswith("variant \\ M x N x K") and layout:
            shapes = [tuple(int(x) for x in s.split("x")) for s in line.split()[7:-2]]
            sections[layout] = (shapes, {})
            continue
        if layout in sections and line and not line.startswith("->"):
            cells = line.split()
            shapes, rows = sections[layout]
            n = len(shapes)
            if len(cells) >= n + 2:
                try:
                    rates = [float(x) for x in cells[-n - 1:-1]]
                except ValueError:
                    continue
                rows[" ".join(cells[:-n - 1])] = rates
    if not sections:
        sys.exit("gemm_vs_openblas: no table in cltrain-tune's output:\n" + out)
    if any(BLAS_ROW not in rows for _, rows in sections.values()):
        sys.exit("gemm_vs_openblas: OpenBLAS did not run on every shape (cltrain-tune's "
                 "messages above)")
    if set(floors) != set(sections):
        sys.exit("gemm_vs_openblas: no launch floor for every layout in cltrain-tune's output")
    return out.splitlines()[0], sections, floors


def main():
    build, repeats, rounds = parse_args(sys.argv[1:])
    tune = os.path.join(build, "tools", "cltrain-tune")
    if not os.access(tune, os.X_OK):
        sys.exit(f"gemm_vs_openblas: no {tune}; build first (tools/setup.sh {build})")
    print(f"{time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}; "
          f"OPENBLAS_LIB={os.environ.get('OPENBLAS_LIB', '(unset)')}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    head, sections, floors = run_tuner(tune, repeats)
    for _ in range(rounds - 1):  # the best of each side over the rounds
        _, more, more_floors = run_tuner(tune, repeats)
        floors = {layout: min(t, more_floors[layout]) for layout, t in floors.items()}
        for layout, (_, rows) in more.items():
            mine = sections[layout][1]
            for v, rates in rows.items():
                mine[v] = [max(x, y) for x, y in zip(mine.get(v, rates), rates)]
    print(head + f"; the best of {rounds} rounds")
    print("launch floor (a 1x1x1 product back to back): " +
          ", ".join(f"{layout} {t * 1e6:.2f} us" for layout, t in floors.items()))
    print(f"{'layout':6} {'M x N x K':>16} {'OpenBLAS':>9} {'own best':>9} {'ratio':>6} "
          f"{'bound':>6}  variant")
    low, big, big_low = [], 0, 0  # big: shapes of at least 1 MFLOP
    own = {layout: {v: rates for v, rates in rows.items() if v.split()[0] in OWN_KINDS}
           for layout, (_, rows) in sections.items()}
    peak = max(r for rows in own.values() for rates in rows.values() for r in rates) * 1e9
    for layout, (shapes, rows) in sections.items():
        t_blas = t_own = 0.0
        for s, (M, N, K) in enumerate(shapes):
            blas_rate = rows[BLAS_ROW][s]
            best, variant = max((r[s], v) for v, r in own[layout].items())
            flop = 2.0 * M * N * K
            t_blas += flop / blas_rate
            t_own += flop / best
            bound = flop / (blas_rate * 1e9) / (floors[layout] + flop / peak)
            print(f"{layout:6} {f'{M}x{N}x{K}':>16} {blas_rate:9.1f} {best:9.1f} "
                  f"{best / blas_rate:6.2f} {bound:6.2f}  {variant}")
            big += flop >= 1e6
            if best / blas_rate < 0.9:
                low.append((f"{layout} {M}x{N}x{K}", bound, flop))
                big_low += flop >= 1e6
        print(f"{layout}: the shapes' total time, OpenBLAS / best own: {t_blas / t_own:.2f}")
    if not low:
        print("every shape at 0.9 of OpenBLAS or above")
    for shape, bound, flop in low:
        print(f"below 0.9: {shape}, {flop / 1e6:.2f} MFLOP" +
              (f" (held by the launch floor: at most {bound:.2f})" if bound < 0.9 else ""))
    print(f"shapes of at least 1 MFLOP below 0.9: {big_low} of {big}")

if __name__ == "__main__":
    main()
