#!/usr/bin/env python3
"""The names test, beside the include test (tests/layering.sh): no layer names what a layer above
it owns. Usage: layering_names.py [--self-test] ROOT.

The include test reads only #include lines; a lower layer can still name a higher layer's
things without including its headers (the runtime once listed every op family's kernels and the
optimizer's in a table of its own). Read here, with comments and string literals blanked:
  - the op families' kernels belong to the ops layer: a runtime or io file whose identifiers
    contain a family's stem (a cl/ file's name, as a word of an identifier: CLT__K_CONV names
    conv) or whose string literals are a family's stem or kernel name fails;
  - the types, functions, macros and enum constants declared in a layer's headers (src/<layer>/*.h
    and the public headers, by tests/layering.sh's table) belong to that layer: a file of a lower
    layer that names one fails, unless a layer at or below its own declares the name too.
One line per violation, exit 1. --self-test checks a copy of the tree with a runtime header that
lists kernel slots by family (as the old table did) and a data file naming a train type: both
must fail, and the unchanged copy must pass."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

RANK = {"runtime": 0, "io": 1, "ops": 2, "data": 3, "nn": 3, "dist": 3, "train": 4, "cli": 5}
# cl/ files that are helpers of several families, not families of their own
SHARED_CL = {"common", "act_fn", "rng"}
# Public names of the runtime that name what memory and randomness serve, not kernels: the
# accountant's category of optimizer state, a stream of the counter-based generator.
ALLOWED = {"CLT_MEM_OPTIM", "CLT_RNG_DROPOUT"}


def layer_map(root):
    """Public header stem -> layer, from tests/layering.sh's table."""
    text = open(os.path.join(root, "tests", "layering.sh")).read()
    table = re.search(r"layer_map='\n(.*?)'\n", text, re.S).group(1)
    return dict(line.split() for line in table.splitlines() if line.strip())


def blank(text):
    """Comments and string literals blanked; the literals returned apart."""
    strings = []

    def sub(m):
        s = m.group(0)
        if s.startswith('"'):
            strings.append(s[1:-1])
        return re.sub(r"[^\n]", " ", s)

    text = re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', sub, text,
                  flags=re.S)
    return text, strings


def declared(text):
    """Names a header declares: typedefs, struct/enum tags, functions, macros, enum constants."""
    code, _ = blank(text)
    names = set(re.findall(r"^\s*#\s*define\s+(\w+)", code, re.M))
    names |= set(re.findall(r"\b(?:struct|enum|union)\s+(\w+)\s*\{", code))
    names |= set(re.findall(r"\}\s*(\w+)\s*;", code))                      # typedef ... } name;
    names |= set(re.findall(r"\btypedef\b[^;{}]*?\b(\w+)\s*;", code))
    names |= set(re.findall(r"\(\s*\*\s*(\w+)\s*\)\s*\(", code))           # function pointer types
    names |= set(re.findall(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(", code, re.M))  # functions
    for body in re.findall(r"\benum\b[^{;]*\{([^}]*)\}", code):
        names |= set(re.findall(r"(?:^|,)\s*(\w+)", body))
    return {n for n in names if n.lower().startswith("clt_")}  # the project's names only


def sources(root):
    out = []
    for base, _, files in os.walk(os.path.join(root, "src")):
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                out.append(os.path.join(base, f))
    inc = os.path.join(root, "include", "cltrain")
    out += [os.path.join(inc, f) for f in sorted(os.listdir(inc)) if f.endswith(".h")]
    return out


def layer_of(root, path, pubs):
    rel = os.path.relpath(path, root).split(os.sep)
    if rel[0] == "src":
        return rel[1] if rel[1] in RANK else None
    return pubs.get(rel[-1][:-2])


def check(root):
    pubs = layer_map(root)
    files = sources(root)
    owner = {}  # name -> set of layers declaring it
    for path in files:
        layer = layer_of(root, path, pubs)
        if layer and path.endswith(".h"):
            for name in declared(open(path).read()):
                owner.setdefault(name, set()).add(layer)
    cl_dir = os.path.join(root, "cl")
    stems, kernels = set(), set()
    for f in sorted(os.listdir(cl_dir)):
        if not f.endswith(".cl") or f[:-3] in SHARED_CL:
            continue
        stems.add(f[:-3])
        kernels |= set(re.findall(r"\b__kernel\s+void\s+(\w+)", open(os.path.join(cl_dir, f)).read()))
    errors = []
    for path in files:
        layer = layer_of(root, path, pubs)
        if not layer:
            continue
        rank = RANK[layer]
        rel = os.path.relpath(path, root)
        code, strings = blank(open(path).read())
        idents = set(re.findall(r"\b[A-Za-z_]\w*\b", code))
        for name in sorted(idents):
            layers = owner.get(name)
            if layers and min(RANK[l] for l in layers) > rank:
                errors.append(f"{rel}: names {name} of the {'/'.join(sorted(layers))} layer")
        if rank < RANK["ops"]:
            for name in sorted(idents - ALLOWED):
                words = set(name.lower().split("_"))
                for stem in sorted(stems & words):
                    errors.append(f"{rel}: {name} names the ops' kernel family {stem}")
            for s in sorted(set(strings)):
                if s in stems or s in kernels:
                    errors.append(f"{rel}: \"{s}\" names an ops kernel or family")
    for e in errors:
        print(e)
    print(f"layering_names: {len(files)} files, {len(errors)} violation(s)")
    return 1 if errors else 0


def self_test(root):
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("src", "include", "cl", "tests"):
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))
        if check(tmp) != 0:
            print("layering_names self-test: the unchanged copy fails")
            return 1
        with open(os.path.join(tmp, "src", "runtime", "slots_internal.h"), "w") as f:
            f.write("#define SLOTS(X) X(FILL, 5) X(CONV, 72) X(OPTIM, 21)\n")
        with open(os.path.join(tmp, "src", "data", "bad.c"), "w") as f:
            f.write('#include "cltrain/tensor.h"\nstatic clt_optim *keep;\n')
        out = subprocess.run([sys.executable, __file__, tmp], capture_output=True, text=True).stdout
        want = ["slots_internal.h: CONV names the ops' kernel family conv",
                "slots_internal.h: OPTIM names the ops' kernel family optim",
                "bad.c: names clt_optim of the train layer"]
        missing = [w for w in want if w not in out]
        if missing:
            print("layering_names self-test: not reported:", *missing, "output:", out, sep="\n")
            return 1
    print("layering_names self-test: ok")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        sys.exit(self_test(args[1] if len(args) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.exit(check(args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
