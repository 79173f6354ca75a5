#!/usr/bin/env python3
"""Kernel portability guard: compiles every program the library may build the way GPU drivers'
compilers do, and checks that the list of programs is what real runs build.

1. `cltrain kernels --list --profile P` (P = gpu and small-gpu) lists every program: its cl/
   stems and its complete build options, generated family by family by the same functions the ops use
   (the op-family table, src/ops/family_internal.h), so this list cannot drift from the code. Each program's complete source
   comes from `cltrain kernels --source`.
2. Each one is compiled offline by Debian's clang (the one PoCL uses) with -cl-std=CL1.2 for
   spir64, nvptx64-nvidia-nvcl and amdgcn-amd-amdhsa, at -O0 and -O2, to LLVM IR. The guard
   fails on any error, on any warning of -Wall -Wextra (minus -Wunused-parameter: kernels keep
   uniform signatures; and -Wunused-function: common.cl's helpers are in every program) and on any call left to a function that the program neither defines nor
   gets from the OpenCL C library: an undefined `declare` of an unmangled name (our helpers are
   plain C functions; OpenCL builtins are overloadable, hence _Z-mangled), or of a mangled one
   whose name is a function defined in cl/.
   Seen failing on the tree before the fix (helpers declared `inline` without `static`):
     loss -O0 spir64: calls clt_row_argmax, clt_tile_tree, clt_tile_tree2, which it does not define
   and the same for clt_bf16_load/clt_bf16_store, clt_gelu, clt_dropout_block and gemm_direct /
   gemm_tiled / gemm_gather: C99 `inline` alone is no external definition, so a compiler that
   does not inline the call (every one at -O0) leaves an undefined reference and the driver's
   link fails.
3. With --run-log, runs a few tiny trainings on the default device (fp32, bf16, fp16, dropout,
   resident and streaming loaders, sgd and adam; a small GPT-style language model in each
   precision) with CLTRAIN_PROGRAM_LOG set, and fails if a
   program they built is missing from `cltrain kernels --list --device` for that device.

Usage: kernel_guard.py CLTRAIN [--jobs N] [--run-log] [--quick]
Exit: 0 clean, 1 findings, 77 (skip) when no clang with OpenCL support is installed.
"""
import argparse
import concurrent.futures as futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

TARGETS = ["spir64", "nvptx64-nvidia-nvcl", "amdgcn-amd-amdhsa"]
LEVELS = ["-O0", "-O2"]
PROFILES = ["gpu", "small-gpu"]
# Every program starts with cl/common.cl, whose helpers most programs leave unused.
WARNINGS = ["-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-unused-function", "-Werror"]


def find_clang():
    for name in ("clang-15", "clang-16", "clang-14", "clang"):
        path = shutil.which(name)
        if path:
            probe = subprocess.run([path, "-x", "cl", "-cl-std=CL1.2", "-Xclang",
                                    "-finclude-default-header", "-target", "spir64", "-S",
                                    "-emit-llvm", "-o", os.devnull, "-"],
                                   input="kernel void k(global int *x) { x[0] = get_global_id(0); }",
                                   capture_output=True, text=True)
            if probe.returncode == 0:
                return path
    return None


def cltrain(exe, *args, env=None):
    r = subprocess.run([exe, *args], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"kernel_guard: {exe} {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def variants(exe, *selector):
    """(files, op options, complete options) for every listed program."""
    out = []
    for line in cltrain(exe, "kernels", "--list", *selector).splitlines():
        files, opts, full = line.split("\t")
        out.append((files, opts, full))
    return out


def defined_functions(source):
    """Names of the functions a program's source defines (kernels and helpers)."""
    return set(re.findall(r"^[A-Za-z_][\w ]*?\b(\w+)\s*\([^;{]*\)\s*\{", source, re.M))


def undefined_calls(ir, ours):
    """Functions declared but not defined in the IR that are ours, not the OpenCL library's."""
    bad = []
    for m in re.finditer(r"^declare\b[^@]*@\"?([\w.$]+)", ir, re.M):
        name = m.group(1)
        if name.startswith("llvm."):
            continue
        if name.startswith("_Z"):
            base = re.match(r"_Z(\d+)", name)
            if base:
                n = int(base.group(1))
                plain = name[len(base.group(0)):][:n]
                if plain in ours:
                    bad.append(plain)
            continue
        bad.append(name)
    return sorted(set(bad))


def compile_one(clang, path, files, full, target, level, ours):
    opts = [o for o in full.split() if o != "-cl-std=CL1.2"]
    # OpenCL's own build options (-cl-denorms-are-zero: the optimizer's program) reach clang's
    # compiler only for some targets; for the others its driver calls them unused, which is no
    # fault of the program (a device's compiler takes every standard option)
    quiet = ["-Wno-unused-command-line-argument"] if any(o.startswith("-cl-") for o in opts) else []
    cmd = [clang, "-x", "cl", "-cl-std=CL1.2", "-Xclang", "-finclude-default-header", "-nogpulib",
           "-target", target, level, *WARNINGS, *quiet, *opts, "-S", "-emit-llvm", "-o", "-",
           path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    where = f"{files} [{' '.join(o for o in opts if o.startswith('-D') and 'CLT_' not in o)}] " \
            f"{level} {target}"
    if r.returncode != 0:
        first = next((l for l in r.stderr.splitlines() if "error" in l), r.stderr.strip()[:300])
        return f"{where}: does not compile: {first}"
    bad = undefined_calls(r.stdout, ours)
    if bad:
        return f"{where}: calls {', '.join(bad)}, which it does not define"
    return None


def device_defines_used():
    """Whether any kernel source (beyond common.cl's defaults) reads the device defines."""
    cl = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cl")
    for name in sorted(os.listdir(cl)):
        if name.endswith(".cl") and name != "common.cl":
            with open(os.path.join(cl, name)) as f:
                if re.search(r"\bCLT_(WG|DEVICE_\w+|HAS_FP\d+)\b", f.read()):
                    return True
    return False


def check_compiles(exe, clang, jobs, quick):
    seen, work, sources = set(), [], {}
    # The profiles differ in which GEMM choices fit and in the device defines; while no kernel
    # reads those defines, a program whose op options were compiled for one profile is not
    # compiled again for the next.
    per_device = device_defines_used()
    tmp = tempfile.mkdtemp(prefix="cltrain-guard-")
    try:
        for prof in PROFILES:
            for files, opts, full in variants(exe, "--profile", prof):
                key = (files, full if per_device else opts)
                if key in seen:
                    continue
                seen.add(key)
                if files not in sources:
                    text = cltrain(exe, "kernels", "--source", files)
                    path = os.path.join(tmp, files.replace(",", "+") + ".cl")
                    with open(path, "w") as f:
                        f.write(text)
                    sources[files] = (path, defined_functions(text))
                work.append((files, full))
        if quick:  # one program per stem and option shape, for a fast local check
            work = work[::7]
        jobs_list = [(files, full, t, l) for files, full in work for t in TARGETS for l in LEVELS]
        findings = []
        with futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            results = pool.map(lambda j: compile_one(clang, sources[j[0]][0], j[0], j[1], j[2],
                                                     j[3], sources[j[0]][1]), jobs_list)
            findings = [r for r in results if r]
        print(f"kernel_guard: {len(work)} programs x {len(TARGETS)} targets x {len(LEVELS)} "
              f"levels = {len(jobs_list)} compiles with {os.path.basename(clang)}, "
              f"{len(findings)} findings")
        return findings
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_run_log(exe):
    """Programs built by real runs must be in the list for the device they ran on."""
    tmp = tempfile.mkdtemp(prefix="cltrain-guard-log-")
    try:
        csv = os.path.join(tmp, "tiny.csv")
        with open(csv, "w") as f:
            f.write(",".join(f"f{j}" for j in range(6)) + ",label\n")
            for i in range(48):
                f.write(",".join(f"{((i * 7 + j * 3) % 11) / 11:.3f}" for j in range(6)) +
                        f",{i % 3}\n")
        log = os.path.join(tmp, "programs.log")
        env = dict(os.environ, CLTRAIN_PROGRAM_LOG=log)
        runs = [["--precision", "fp32", "--loader", "resident", "--optimizer", "sgd",
                 "--momentum", "0.9"],
                ["--precision", "bf16", "--loader", "streaming"],
                ["--precision", "fp16", "--accumulate", "2"]]
        for extra in runs:
            cltrain(exe, "train", "--data", f"csv:{csv}", "--model",
                    "linear 8, relu, dropout 0.2, linear 8, gelu, linear 3", "--epochs", "1",
                    "--batch-size", "16", *extra, env=env)
        # a language model in each precision: the token gather, positions, layer norm,
        # attention and the embedding's scatter on 16-bit activations
        text = os.path.join(tmp, "tiny.txt")
        with open(text, "w") as f:
            f.write("the cat sat on the mat and the dog ran to the red hat.\n" * 20)
        for prec in ("fp32", "bf16", "fp16"):
            cltrain(exe, "train", "--data", f"text:{text}", "--model",
                    "embed 8, posembed, residual { layernorm, attention 2 causal }, residual { "
                    "layernorm, linear 16, gelu, linear 8 }, layernorm, linear V nobias tied",
                    "--block", "8", "--steps", "2", "--batch-size", "2", "--eval-batches", "1",
                    "--precision", prec, env=env)
        listed = {(f, o) for f, o, _ in variants(exe, "--device", os.environ.get(
            "CLTRAIN_DEVICE", "auto"))}
        with open(log) as f:
            built = {tuple(l.rstrip("\n").split("\t")) for l in f if l.strip()}
        missing = sorted(built - listed)
        print(f"kernel_guard: tiny runs built {len(built)} programs, "
              f"{len(missing)} of them not in the list")
        return [f"{f} [{o}]: built by a run but not listed by clt_ops_program_variants"
                for f, o in missing]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cltrain")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--run-log", action="store_true")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    clang = find_clang()
    if not clang:
        print("kernel_guard: skipped: no clang with OpenCL C support (install clang-15)")
        return 77
    findings = check_compiles(args.cltrain, clang, args.jobs, args.quick)
    if args.run_log:
        findings += check_run_log(args.cltrain)
    for f in findings:
        print("kernel_guard: " + f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
