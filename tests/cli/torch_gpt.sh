#!/bin/sh
# tools/torch_gpt.py, the PyTorch reference of the GPT models: on a tiny text and a tiny model
# (2 blocks, D 32, block 16) 30 steps lower the validation loss; the state dict's names are the
# documented ones (nn.Sequential's, nn.MultiheadAttention's inside attention, none for the tied
# head) and the presets' specs are the documented text; weights written by --save-init and
# --save load back (strict) to the same validation loss; the files are the project's
# safetensors (read by tools/checkpoint_numpy.py; BF16 read); sampling draws from the
# vocabulary by the documented rule; bad input gets one line and exit 1 or 2; --bench prints a
# tokens/s line. Skips (exit 77) without a Python that imports torch and numpy (Debian's
# /usr/bin/python3 with python3-torch first).
set -eu
. "$(dirname "$0")/../lib.sh"

tools="$(cd "$(dirname "$0")/../../tools" && pwd)"
torch_python=""
for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null && "$py" -c "import torch, numpy" 2>/dev/null; then
        torch_python=$py
        break
    fi
done
[ -n "$torch_python" ] || skip "PyTorch is missing (neither /usr/bin/python3 nor python3 imports torch and numpy)"
make_tmp

block="residual { layernorm, attention 2 causal },"
block="$block residual { layernorm, linear 128, gelu, linear 32 }"
spec="embed 32, posembed, $block, $block, layernorm, linear V nobias tied"

# the script itself: --bench on the tiny spec prints the line tools/bench_vs_torch.sh reads
check_ok "--bench" -- "$torch_python" "$tools/torch_gpt.py" --bench 0.3 --model "$spec" \
    --block 16 --batch-size 4 --threads 1
grep -Eq '^spec [0-9.]+ steps/s [0-9]+ tokens/s \(batch 4 x block 16' "$tmp/out" ||
    fail "--bench printed no tokens/s line: $(cat "$tmp/out")"
check_bad --code 2 "--betas out of range" "--betas" -- "$torch_python" "$tools/torch_gpt.py" \
    --data /dev/null --betas 0.9,1.5

# the rest in one process (one import of torch)
cd "$tmp"
TOOLS="$tools" SPEC="$spec" "$torch_python" - <<'PY' || fail "the checks above failed"
import contextlib, io, json, math, os, re, struct, sys
import numpy as np
import torch
sys.path.insert(0, os.environ["TOOLS"])
import torch_gpt as tg
import checkpoint_numpy

SPEC = os.environ["SPEC"]
failed = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failed.append(what)


def run(*argv):
    """torch_gpt's main in this process: (exit code, stdout, stderr)."""
    raw, err = io.BytesIO(), io.StringIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = tg.main(list(argv) + ["--threads", "1"])
        except SystemExit as e:
            rc = e.code
    out.flush()
    return rc, raw.getvalue().decode("utf-8"), err.getvalue()


def val_loss(text):
    m = re.search(r"^val loss ([0-9.]+) nats/token, ([0-9.]+) bits/char", text, re.M)
    return float(m.group(1)) if m else None


# a tiny text: sentences of 14 words, one a line
r = __import__("random").Random(3)
words = "the king queen shall not be to and of my lord what thou art".split()
with open("t.txt", "w") as f:
    for _ in range(300):
        f.write(" ".join(r.choice(words) for _ in range(r.randint(3, 9))).capitalize() + ".\n")
vocab = sorted(set(open("t.txt").read()))
tiny = ["--data", "t.txt", "--model", SPEC, "--block", "16", "--batch-size", "8",
        "--eval-batches", "4"]

# names: nn.Sequential's numbers, "{i}.body.{j}." in residual blocks, nn.MultiheadAttention's
# names in attention, nothing for the tied head (layer 7: its matrix is "0.weight")
V = len(vocab)
want = [("0.weight", (V, 32)), ("1.weight", (16, 32))]
for blk in (2, 4):
    want += [(f"{blk}.body.0.weight", (32,)), (f"{blk}.body.0.bias", (32,)),
             (f"{blk}.body.1.in_proj_weight", (96, 32)), (f"{blk}.body.1.in_proj_bias", (96,)),
             (f"{blk}.body.1.out_proj.weight", (32, 32)), (f"{blk}.body.1.out_proj.bias", (32,)),
             (f"{blk + 1}.body.0.weight", (32,)), (f"{blk + 1}.body.0.bias", (32,)),
             (f"{blk + 1}.body.1.weight", (128, 32)), (f"{blk + 1}.body.1.bias", (128,)),
             (f"{blk + 1}.body.3.weight", (32, 128)), (f"{blk + 1}.body.3.bias", (32,))]
want += [("6.weight", (32,)), ("6.bias", (32,))]
rc, out, err = run(*tiny, "--print-spec")
got = [(ln.split(" ")[0], tuple(int(d) for d in re.findall(r"\d+", ln.split(" ", 1)[1])))
       for ln in out.splitlines()[1:]]
check(rc == 0 and got == want, f"the state dict's names and shapes are the rule's: {got}")
check(out.splitlines()[0] == SPEC.replace("linear V", f"linear {V}"),
      "--print-spec prints the spec with V the vocabulary's size")
mini = ("embed 128, posembed, " + ", ".join(
    ["residual { layernorm, attention 4 causal }",
     "residual { layernorm, linear 512, gelu, linear 128 }"] * 4)
    + ", layernorm, linear V nobias tied")
char = ("embed 384, posembed, dropout 0.2, " + ", ".join(
    ["residual { layernorm, attention 6 causal, dropout 0.2 }",
     "residual { layernorm, linear 1536, gelu, linear 384, dropout 0.2 }"] * 6)
    + ", layernorm, linear V nobias tied")
check(tg.resolve_model("gpt-mini", None) == (mini, 64), "gpt-mini's spec and block")
check(tg.resolve_model("gpt-char", None) == (char, 256), "gpt-char's spec and block")

# the model: the head is the embedding's matrix; attention is nn.MultiheadAttention's with its
# causal mask (its weights load into one by name); init as documented
torch.manual_seed(0)
model = tg.build_model(SPEC, V, 16)
E = model[0].weight
same = torch.equal(model[7](torch.eye(32)), E.t())
with torch.no_grad():
    E[0, 0] += 1  # the head sees the change: one tensor, not a copy
check(same and torch.equal(model[7](torch.eye(32)), E.t()) and
      "7.weight" not in model.state_dict(),
      "the tied head multiplies by the embedding's matrix, named once")
att = model[2].body[1]
with torch.no_grad():
    att.in_proj_bias.normal_()
    att.out_proj.bias.normal_()
mha = torch.nn.MultiheadAttention(32, 2, batch_first=True)
mha.load_state_dict(att.state_dict(), strict=True)
x = torch.randn(3, 16, 32)
mask = torch.ones(16, 16, dtype=torch.bool).triu(1)  # True: not attended
ref = mha(x, x, x, attn_mask=mask, need_weights=False)[0]
check(torch.allclose(att(x), ref, atol=1e-5), "attention = nn.MultiheadAttention, causal")
x2 = x.clone()
x2[:, 9] += 1
check(torch.equal(att(x2)[:, :9], att(x)[:, :9]) and not torch.equal(att(x2)[:, 9], att(x)[:, 9]),
      "a later position changes no earlier output")
sd = tg.build_model(SPEC, V, 16).state_dict()
check(abs(sd["3.body.1.weight"].std().item() - 0.02) < 0.002 and
      sd["3.body.1.bias"].abs().max() == 0 and torch.equal(sd["6.weight"], torch.ones(32)) and
      sd["6.bias"].abs().max() == 0, "init: normal(0, 0.02) matrices, zero biases, ones")

# decay on matrices and embeddings only
class A: weight_decay, lr, betas = 0.1, 1e-3, (0.9, 0.99)
opt = tg.make_optimizer(model, A)
dec = {id(p) for p in opt.param_groups[0]["params"]}
check(all((p.dim() >= 2) == (id(p) in dec) for p in model.parameters()) and
      opt.param_groups[1]["weight_decay"] == 0 and
      len(dec) + len(opt.param_groups[1]["params"]) == len(list(model.parameters())),
      "weight decay on matrices and embeddings only, every parameter once")
class S: lr, min_lr, warmup, steps = 1e-3, 1e-4, 10, 110
lrs = [tg.lr_at(s, S) for s in range(110)]
check(abs(lrs[0] - 1e-4) < 1e-12 and abs(lrs[9] - 1e-3) < 1e-12 and
      abs(lrs[60] - 5.5e-4) < 1e-9 and abs(lrs[109] - (1e-4 + 9e-4 * 0.5 *
                                                     (1 + math.cos(math.pi * 99 / 100)))) < 1e-12,
      "warm-up then cosine to --min-lr, as cltrain's schedule")

# 30 steps lower the loss; weights written and read back give the same losses
rc, out0, err = run(*tiny, "--steps", "0", "--save-init", "init.safetensors")
init_loss = val_loss(out0)
check(rc == 0 and init_loss is not None and abs(init_loss - math.log(V)) < 0.1,
      f"the untrained model's validation loss {init_loss} is about ln V = {math.log(V):.3f}")
rc, out, err = run(*tiny, "--steps", "30", "--warmup", "3", "--lr", "3e-3", "--log-every", "10",
                   "--save", "trained.safetensors")
losses = [float(v) for v in re.findall(r"^step \d+/30: loss ([0-9.]+)", out, re.M)]
trained = val_loss(out)
check(rc == 0 and trained is not None and trained < init_loss - 0.5 and len(losses) == 3 and
      losses[-1] < losses[0], f"30 steps: training {losses}, validation {init_loss} -> {trained}")
rc, out, err = run(*tiny, "--load", "init.safetensors", "--seed", "7")
check(rc == 0 and val_loss(out) == init_loss,
      f"--save-init, --load (another seed): the same validation loss {val_loss(out)}")
rc, out, err = run(*tiny, "--load", "trained.safetensors", "--seed", "9")
check(rc == 0 and val_loss(out) == trained, "--save, --load: the trained validation loss")

# a checkpoint as cltrain writes one: the spec in the metadata "model" (V written out), the
# optimizer's state beside the weights; --load builds the model from the metadata (no --model)
# and loads the model's tensors alone
w, _ = tg.load_safetensors("trained.safetensors")
extra = {f"optim.{k}.exp_avg": np.zeros_like(v) for k, v in w.items()}
tg.save_safetensors("cltrain.safetensors", {**w, **extra},
                    {"format": "cltrain-1", "model": SPEC.replace("linear V", f"linear {V}")})
rc, out, err = run("--data", "t.txt", "--batch-size", "8", "--eval-batches", "4", "--load",
                   "cltrain.safetensors")
check(rc == 0 and val_loss(out) == trained and "block 16" in out,
      f"a cltrain checkpoint: the model from its metadata, block from posembed: {err.strip()}")

# the files: the project's safetensors (sorted F32 tensors, header padded to 8 bytes, the
# state dict's names only), read by checkpoint_numpy; BF16 tensors read
raw = open("init.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
check(n % 8 == 0 and header.pop("__metadata__") == {"format": "pt"} and
      sorted(header) == sorted(k for k, _ in want) and
      all(t["dtype"] == "F32" for t in header.values()), "--save-init's file: a plain state dict")
theirs, _ = checkpoint_numpy.load_safetensors("init.safetensors")
ours, _ = tg.load_safetensors("init.safetensors")
check(all(np.array_equal(theirs[k], ours[k]) for k in theirs), "checkpoint_numpy reads the same")
vals = np.array([1.0, -2.5, 0.15625, 3e38], np.float32)
bf = (vals.view(np.uint32) >> 16).astype("<u2").tobytes()
h = json.dumps({"a": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
open("bf.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bf)
got = tg.load_safetensors("bf.safetensors")[0]["a"]
check(np.array_equal(got, (vals.view(np.uint32) & 0xFFFF0000).view(np.float32).reshape(2, 2)),
      "BF16 tensors read as float32")

# sampling: the text's characters, the same with the same seed; top-k 1 is the argmax
rc, out, err = run(*tiny, "--load", "trained.safetensors", "--generate", "40", "--prompt", "The ")
sample = out.split("\n", 2)[2] if out.count("\n") >= 2 else ""
check(rc == 0 and len(sample) == 41 and set(sample[:-1]) <= set(vocab),
      f"--generate 40 draws from the vocabulary: {sample!r}")
rc, again, err = run(*tiny, "--load", "trained.safetensors", "--generate", "40", "--prompt", "The ")
check(again == out, "the same seed draws the same text")
logits = torch.tensor([0.5, 3.0, -1.0, 2.0, 2.9])
gen = torch.Generator().manual_seed(1)
draws = [tg.sample(logits, 0.7, 3, gen) for _ in range(3000)]
freq = np.bincount(draws, minlength=5) / 3000
p = torch.softmax(logits[[1, 3, 4]] / 0.7, 0).numpy()
check(set(draws) == {1, 3, 4} and np.abs(freq[[1, 3, 4]] - p).max() < 0.03,
      f"top-k 3 at temperature 0.7: frequencies {freq} against softmax {p}")
check({tg.sample(logits, 5.0, 1, gen) for _ in range(50)} == {1}, "top-k 1 is the argmax")

# bad input: one line, exit 2 for a flag or spec, 1 for the data
for argv, code, needle in [
        ((*tiny, "--load", "trained.safetensors", "--generate", "5", "--prompt", "Th@"), 2,
         "'@' at position 2"),
        (("--data", "t.txt", "--model", SPEC.replace("attention 2", "attention 3", 1),
          "--steps", "0"), 2, "3 heads do not divide the width 32"),
        (("--data", "t.txt", "--model", "embed 32, linear 10 nobias tied", "--steps", "0"), 2,
         "tied needs nobias and an embed layer of shape (10, 32)"),
        ((*tiny[:4], "--block", "2000", "--steps", "0"), 1, "fewer than block + 1 = 2001"),
        (("--data", "missing.txt"), 1, "missing.txt: No such file")]:
    rc, out, err = run(*argv)
    check(rc == code and err.count("\n") == 1 and needle in err,
          f"{needle}: exit {rc}, {err.strip()!r}")
open("latin1.txt", "wb").write("caf\xe9 ".encode("latin-1") * 100)
rc, out, err = run("--data", "latin1.txt", "--block", "8", "--steps", "0")
check(rc == 1 and "not UTF-8 text (byte 3); use --tokens byte" in err,
      f"a text that is not UTF-8: {err.strip()!r}")
rc, out, err = run("--data", "latin1.txt", "--tokens", "byte", "--block", "8", "--steps", "0",
                   "--model", SPEC, "--batch-size", "4", "--eval-batches", "2")
m = re.search(r"^val loss ([0-9.]+) nats/token, [0-9.]+ bits/byte", out, re.M)
check(rc == 0 and m and abs(float(m.group(1)) - math.log(256)) < 0.1,
      f"--tokens byte: 256 ids, bits per byte: {out.splitlines()[-1:]}")
open("one.txt", "w").write("a")
rc, out, err = run("--data", "one.txt")
check(rc == 1 and "1 token; a language model needs at least 2" in err,
      f"a 1-character text: {err.strip()!r}")

sys.exit(1 if failed else 0)
PY
