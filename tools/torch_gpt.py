#!/usr/bin/env python3
"""cltrain's GPT models and their training recipe in PyTorch: the side-by-side reference, as
tools/torch_bench.py is for the CNN. It trains a character-level language model on a text file
(as nanoGPT's shakespeare_char), evaluates a checkpoint cltrain wrote, writes initial weights
cltrain's --init can start from, samples text, and times the two presets (--bench).

The model is built from a cltrain model spec, so that it is cltrain's model layer for layer:

    embed D                 nn.Embedding(V, D): token ids (B, T) -> (B, T, D)
    posembed                learned positions: x + P[:T], P an nn.Embedding(T, D)'s weight
    layernorm               nn.LayerNorm(C), eps 1e-5, over the last dimension
    attention H [causal] [nobias]
                            multi-head self-attention as nn.MultiheadAttention holds it: one
                            D -> 3D input projection (rows: queries, keys, values; head h takes
                            columns h*HD..(h+1)*HD-1 of each, HD = D / H), softmax(q k^T / sqrt(HD))
                            with the causal mask (position t sees positions <= t), D -> D output
                            projection
    linear N [nobias]       nn.Linear on the last dimension; N may be written V (the vocabulary)
    linear V nobias tied    the output head, multiplying by the token embedding's matrix (GPT-2)
    gelu                    nn.GELU(approximate="tanh"), as cltrain's gelu; also relu, silu, tanh,
                            sigmoid
    leakyrelu [A]           nn.LeakyReLU(A), A 0.01 by default
    dropout P               nn.Dropout(P)
    residual { LAYERS }     x + body(x): the pre-norm block's skip

A spec is read as cltrain reads it: layers separated by commas or newlines, '#' to the end of a
line a comment, blank entries skipped, words in any case ("linear v" is "linear V"); it is
printed back as cltrain writes it (the "model" metadata of a checkpoint).

Parameter names (the state dict, and the names of cltrain's checkpoints and --init files) are
those of PyTorch's nn.Sequential over the spec's layers, numbered from 0 in spec order (every
layer takes a number, parameters or not), nested as "{i}.body.{j}." inside a residual block:

    embed D                    "{i}.weight" (V, D)
    posembed                   "{i}.weight" (T, D)
    layernorm                  "{i}.weight" (C), "{i}.bias" (C)
    attention H [causal]       "{i}.in_proj_weight" (3D, D), "{i}.in_proj_bias" (3D),
                               "{i}.out_proj.weight" (D, D), "{i}.out_proj.bias" (D)
                               (nn.MultiheadAttention's names; nobias drops both biases)
    linear N [nobias]          "{i}.weight" (N, IN), "{i}.bias" (N)
    linear V nobias tied       none: the matrix is the embed layer's "{e}.weight", one tensor
    gelu, dropout, ...         none

so gpt-mini's names run "0.weight" (embed), "1.weight" (posembed), "2.body.0.weight" and
"2.body.0.bias" (the first block's layernorm), "2.body.1.in_proj_weight", ...,
"3.body.1.weight" (the MLP's first linear), "3.body.3.weight" (its second), ..., "10.weight" and
"10.bias" (the final layernorm); the head (layer 11) has none. gpt-char's dropout after
posembed takes number 2, so its blocks start at 3. The presets (--print-spec shows a model's
spec and names):

    gpt-mini (block 64)   embed 128, posembed, 4 x [residual { layernorm, attention 4 causal },
                          residual { layernorm, linear 512, gelu, linear 128 }], layernorm,
                          linear V nobias tied
    gpt-char (block 256)  embed 384, posembed, dropout 0.2, 6 x [residual { layernorm,
                          attention 6 causal, dropout 0.2 }, residual { layernorm, linear 1536,
                          gelu, linear 384, dropout 0.2 }], layernorm, linear V nobias tied

(nanoGPT also drops attention probabilities; the spec's attention has no dropout.)

The recipe: tokens are the sorted set of the text's characters (--tokens char) or its 256 byte
values (--tokens byte); the last 10 % (from int(0.9 n)) is the validation split. Each step
draws --batch-size windows of block + 1 tokens at random offsets of the training split; loss is
cross-entropy at every position. AdamW, betas --betas (0.9, 0.99), eps 1e-8, weight decay on
matrices and embeddings (parameters of 2 or more dimensions) and never on biases or layernorm
parameters; gradients clipped to global norm --clip-grad; the learning rate of step s (from 0)
is cltrain's: lr (s + 1) / W during W warm-up steps, then a cosine from lr to --min-lr over the
remaining steps. Initialisation: normal(0, 0.02) for matrices and embeddings, zero biases,
layernorm weight 1 and bias 0. Evaluation uses --eval-batches N fixed batches: window k of
the N * B (k = 0 .. N B - 1) starts at offset k * (n_val - T - 1) // (N B - 1) of the
validation split (0 for a single window), as cltrain's evaluation windows (cl/textbatch.cl);
the loss is the mean over every position, in nats per token and bits per character (per byte
with --tokens byte). Sampling: the logits of the last
position (the context cut to the last T tokens) divided by --temperature, restricted to the
--top-k largest (ties with the k-th kept; 0: all), softmax, one multinomial draw (a CPU
generator seeded by --seed, so every device draws the same tokens from the same probabilities).

--load CKPT evaluates a checkpoint as `cltrain eval --load CKPT --data text:FILE` does: the
model from its "model" metadata, the block T from "features", the batch size from "run" (unless
--batch-size is given), FILE encoded with its "vocab" (byte tokens, or the characters of the text
it was trained on: a character outside them is an error naming its line and column), so the
windows and the loss are cltrain's. A plain state dict (--save-init's, or
safetensors.torch.save_file's) has none of these: --model, --block, --batch-size and the text's
own vocabulary, as for a run's --init.

usage:
  torch_gpt.py --data FILE [--model gpt-mini|gpt-char|SPEC] [--steps N] ...   train, evaluate
  torch_gpt.py --data FILE --load CKPT.safetensors [--generate N ...]        evaluate a checkpoint
  torch_gpt.py --data FILE --save-init FILE --steps 0                        initial weights
  torch_gpt.py --bench [SECONDS] [--model ...]     "NAME S steps/s T tokens/s" per model
--bench times training steps (the recipe's step: AdamW, clipping) on one batch of synthetic
tokens (vocabulary 65, tiny-shakespeare's) after 3 warm-up steps, for gpt-mini and gpt-char (or
--model), at nanoGPT's batch sizes (12 and 64) or --batch-size, on every CPU thread (--threads).
On cores shared with other work, PyTorch's OpenMP threads spin at each barrier waiting for a
descheduled peer: a 2-thread run can be ten times slower than 1 thread or than
OMP_WAIT_POLICY=PASSIVE, so say which was used when a figure is quoted.
Files: safetensors read and written with json, struct and numpy alone (cltrain checkpoints:
the model's tensors are those whose name starts with a layer number; F32, F16 and BF16 read).
"""
import argparse
import json
import math
import os
import re
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {  # layers, heads, width D, block T, dropout (nanoGPT's CPU and shakespeare_char)
    "gpt-mini": (4, 4, 128, 64, 0.0),
    "gpt-char": (6, 6, 384, 256, 0.2),
}
BENCH_BATCH = {"gpt-mini": 12, "gpt-char": 64}  # nanoGPT's batch sizes for the two
BENCH_VOCAB = 65  # tiny-shakespeare's characters: the synthetic tokens of --bench


class Usage(Exception):
    """A bad flag value or spec: exit 2."""


class Failure(Exception):
    """Anything else that stops the run (a file, the data): exit 1."""


def gpt_spec(layers, heads, dim, dropout=0.0):
    """The spec text of a GPT-2-style decoder: pre-norm blocks, tied head."""
    drop = f", dropout {dropout:g}" if dropout else ""
    attn = f"residual {{ layernorm, attention {heads} causal{drop} }}"
    mlp = f"residual {{ layernorm, linear {4 * dim}, gelu, linear {dim}{drop} }}"
    return ", ".join([f"embed {dim}, posembed{drop}"] + [attn, mlp] * layers
                     + ["layernorm, linear V nobias tied"])


def normalize_spec(spec):
    """The spec as cltrain writes it back (its canonical text, as in a checkpoint's "model"):
    '#' comments dropped, newlines separating layers as commas do, blank entries (a trailing
    comma, an empty line) skipped, words in lower case ("linear V" keeps its V), a leakyrelu
    without a slope given nanoGPT's and PyTorch's 0.01, blocks written "residual { A, B }"."""
    spec = re.sub(r"#[^\n]*", "", spec)
    out, cur = [], ""

    def flush():
        words = cur.lower().split()
        if words[:1] == ["linear"] and words[1:2] == ["v"]:
            words[1] = "V"
        if words == ["leakyrelu"]:
            words.append("0.01")
        if words:
            out.append(" ".join(words))

    for ch in spec:
        if ch in ",\n{}":
            flush()
            cur = ""
            if ch in "{}":
                out.append(ch)
        else:
            cur += ch
    flush()
    text = ""
    for tok in out:  # "residual" "{" "a" "b" "}" "c" -> "residual { a, b }, c"
        if tok == "{":
            text += " {"
        elif tok == "}":
            text += " }"
        else:
            text += (" " if text.endswith("{") else ", " if text else "") + tok
    return text


def split_layers(spec):
    """The spec's layers: its comma-separated entries, a "residual { ... }" block as one."""
    layers, depth, cur = [], 0, ""
    for ch in spec:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            raise Usage(f"model spec: unbalanced '}}' in \"{spec}\"")
        if ch == "," and depth == 0:
            layers.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if depth:
        raise Usage(f"model spec: unbalanced '{{' in \"{spec}\"")
    layers.append(cur.strip())
    if any(not s for s in layers):
        raise Usage(f"model spec: an empty layer in \"{spec}\"")
    return layers


class Embed(nn.Embedding):
    """embed D: token ids (B, T) -> (B, T, D)."""


class PosEmbed(nn.Embedding):
    """posembed: x (B, T, D) + the first T rows of a (block, D) table."""

    def forward(self, x):
        return x + self.weight[:x.shape[1]]


class Attention(nn.Module):
    """attention H [causal] [nobias], nn.MultiheadAttention's parameters written out."""

    def __init__(self, dim, heads, causal, bias, block):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.in_proj_weight = nn.Parameter(torch.empty(3 * dim, dim))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * dim)) if bias else None
        self.out_proj = nn.Linear(dim, dim, bias=bias)
        self.register_buffer("mask", torch.ones(block, block, dtype=torch.bool).tril(),
                             persistent=False)

    def forward(self, x):
        B, T, D = x.shape
        HD = D // self.heads
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).split(D, dim=2)
        q, k, v = (t.view(B, T, self.heads, HD).transpose(1, 2) for t in (q, k, v))  # (B,NH,T,HD)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HD))  # (B, NH, T, T)
        if self.causal:
            att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        y = F.softmax(att, dim=-1) @ v  # (B, NH, T, HD)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))


class Residual(nn.Module):
    """residual { LAYERS }: x + body(x)."""

    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class TiedHead(nn.Module):
    """linear V nobias tied: logits = x E^T with the embed layer's E; no parameter of its own."""

    def __init__(self, embed):
        super().__init__()
        self._embed = [embed]  # a list: not a submodule, so E is named once, as "{e}.weight"

    def forward(self, x):
        return F.linear(x, self._embed[0].weight)


ACTS = {"gelu": lambda: nn.GELU(approximate="tanh"), "relu": nn.ReLU, "silu": nn.SiLU,
        "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}


def number(text):
    try:
        return float(text)
    except ValueError:
        return math.nan


def build_layers(spec, vocab, block, width, embed, where="model spec"):
    """nn.Sequential of the spec's layers on inputs of `width` features (None: token ids)."""
    mods = []
    for i, text in enumerate(split_layers(spec)):
        word, *args = text.split("{")[0].split()
        at = f"{where}: layer {i + 1} \"{text}\""
        if word == "residual":
            if "{" not in text or not text.endswith("}"):
                raise Usage(f"{at}: expected residual {{ LAYERS }}")
            inner = text[text.index("{") + 1:-1]
            body, out = build_layers(inner, vocab, block, width, embed, f"{at}, in its block")
            if out != width:
                raise Usage(f"{at}: its body maps {width} features to {out}")
            mods.append(Residual(body))
            continue
        if width is None and word != "embed":
            raise Usage(f"{at}: a language model's first layer is embed D")
        if word == "embed":
            if width is not None or len(args) != 1 or not args[0].isdigit():
                raise Usage(f"{at}: expected embed D, first")
            embed = Embed(vocab, int(args[0]))
            width = int(args[0])
            mods.append(embed)
        elif word == "posembed":
            mods.append(PosEmbed(block, width))
        elif word == "layernorm":
            mods.append(nn.LayerNorm(width, eps=1e-5))
        elif word == "attention":
            if not args or not args[0].isdigit() or int(args[0]) < 1 or \
                    any(a not in ("causal", "nobias") for a in args[1:]):
                raise Usage(f"{at}: expected attention H [causal] [nobias]")
            if width % int(args[0]):
                raise Usage(f"{at}: {args[0]} heads do not divide the width {width}")
            mods.append(Attention(width, int(args[0]), "causal" in args, "nobias" not in args,
                                  block))
        elif word == "linear":
            n = vocab if args and args[0] == "V" else int(args[0]) if args and args[0].isdigit() \
                else None
            if not n or any(a not in ("nobias", "tied") for a in args[1:]):
                raise Usage(f"{at}: expected linear N [nobias] [tied]")
            if "tied" in args:
                if "nobias" not in args or embed is None or (n, width) != tuple(embed.weight.shape):
                    raise Usage(f"{at}: tied needs nobias and an embed layer of shape ({n}, "
                                f"{width})")
                mods.append(TiedHead(embed))
            else:
                mods.append(nn.Linear(width, n, bias="nobias" not in args))
            width = n
        elif word in ACTS and not args:
            mods.append(ACTS[word]())
        elif word == "leakyrelu" and len(args) <= 1:
            slope = number(args[0]) if args else 0.01
            if not math.isfinite(slope):
                raise Usage(f"{at}: expected leakyrelu [SLOPE]")
            mods.append(nn.LeakyReLU(slope))
        elif word == "dropout" and len(args) == 1:
            try:
                p = float(args[0])
            except ValueError:
                p = -1.0
            if not 0.0 <= p < 1.0:
                raise Usage(f"{at}: the dropout probability must be in [0, 1)")
            mods.append(nn.Dropout(p))
        else:
            raise Usage(f"{at}: not a layer of a language model (embed, posembed, layernorm, "
                        "attention, linear, gelu, relu, silu, tanh, sigmoid, leakyrelu, dropout, "
                        "residual)")
    return nn.Sequential(*mods), width


def build_model(spec, vocab, block):
    """The model of spec on a vocabulary of `vocab` tokens and windows of `block`, initialised."""
    model, width = build_layers(normalize_spec(spec), vocab, block, None, None)
    if width != vocab:
        raise Usage(f"model spec: the last layer gives {width} outputs, not the vocabulary's "
                    f"{vocab} (end with linear V nobias tied)")
    init_weights(model)
    return model


def init_weights(model):
    """normal(0, 0.02) for matrices and embeddings, zero biases, layernorm ones and zeros."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)
            else:
                nn.init.zeros_(p)
        for m in model.modules():
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)


def resolve_model(text, block):
    """--model and --block: a preset's spec and block, or a spec and --block (default 64)."""
    if text in PRESETS:
        layers, heads, dim, preset_block, dropout = PRESETS[text]
        return gpt_spec(layers, heads, dim, dropout), block or preset_block
    return normalize_spec(text), block or 64


# ---- safetensors, with json, struct and numpy alone ---------------------------------------

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "U8": np.uint8,
             "I64": np.int64}


def load_safetensors(path):
    """({name: float32 or integer array}, metadata) of a safetensors file."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        raise Failure(f"{path}: {e.strerror}") from e
    try:
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        meta = header.pop("__metadata__", {}) or {}
        data = raw[8 + n:]
        tensors = {}
        for name, t in header.items():
            b, e = t["data_offsets"]
            if t["dtype"] == "BF16":  # the high half of a float32
                bits = np.frombuffer(data[b:e], "<u2").astype(np.uint32) << 16
                arr = bits.view(np.float32)
            else:
                arr = np.frombuffer(data[b:e], np.dtype(ST_DTYPES[t["dtype"]]).newbyteorder("<"))
            tensors[name] = arr.reshape(t["shape"])
    except (struct.error, ValueError, KeyError, TypeError) as e:
        raise Failure(f"{path}: not a safetensors file cltrain wrote ({e})") from e
    return tensors, meta


def save_safetensors(path, tensors, meta=None):
    """F32 tensors (names sorted), optional string metadata, the header padded with spaces to
    8 bytes: what safetensors.torch.save_file writes and cltrain's --init reads."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    try:
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    except OSError as e:
        raise Failure(f"{path}: {e.strerror}") from e


def state_dict_numpy(model):
    return {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}


# ---- text ---------------------------------------------------------------------------------

class Text:
    """The token ids of a text file, its vocabulary and its 90/10 split."""

    def __init__(self, path, tokens, symbols=None):
        """symbols: a checkpoint's character vocabulary (its "vocab" metadata) instead of the
        text's own; a character outside it is then an error naming its line and column."""
        try:
            raw = open(path, "rb").read()
        except OSError as e:
            raise Failure(f"--data {path}: {e.strerror}") from e
        if tokens == "byte":
            self.vocab = [bytes([b]) for b in range(256)]
            ids = np.frombuffer(raw, np.uint8).astype(np.int64)
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Failure(f"--data {path}: not UTF-8 text (byte {e.start}); use --tokens byte"
                              ) from e
            self.vocab = sorted(set(text)) if symbols is None else list(symbols)
            index = {c: i for i, c in enumerate(self.vocab)}
            outside = next((i for i, c in enumerate(text) if c not in index), None)
            if outside is not None:
                c = text[outside]
                line = text.count("\n", 0, outside) + 1
                col = outside - (text.rfind("\n", 0, outside) + 1) + 1
                raise Failure(f"--data {path}: line {line}, column {col}: character {c!r} "
                              f"(U+{ord(c):04X}) is not in the checkpoint's vocabulary")
            ids = np.array([index[c] for c in text], np.int64)
        if len(ids) < 2:
            raise Failure(f"--data {path}: {len(ids)} token{'' if len(ids) == 1 else 's'}; a "
                          "language model needs at least 2")
        self.tokens, self.path = tokens, path
        self.index = {c: i for i, c in enumerate(self.vocab)}
        n = int(0.9 * len(ids))
        self.train, self.val = torch.from_numpy(ids[:n].copy()), torch.from_numpy(ids[n:].copy())

    def encode(self, s):
        """The ids of s; a character outside the vocabulary is an error naming it."""
        units = [bytes([b]) for b in s.encode("utf-8")] if self.tokens == "byte" else s
        for pos, c in enumerate(units):
            if c not in self.index:
                raise Usage(f"--prompt: character {c!r} at position {pos} is not in the "
                            f"vocabulary of {self.path}")
        return [self.index[c] for c in units]


def windows(split, offsets, T):
    """x, y (len(offsets), T): the windows of T + 1 tokens at these offsets."""
    idx = offsets[:, None] + torch.arange(T + 1, device=offsets.device)
    w = split[idx]
    return w[:, :-1], w[:, 1:]


def eval_offsets(n, T, count):
    """The fixed evaluation windows' offsets: evenly spaced from 0 to n - T - 1."""
    span = n - T - 1
    if count == 1:
        return torch.zeros(1, dtype=torch.long)
    return torch.tensor([k * span // (count - 1) for k in range(count)], dtype=torch.long)


# ---- training ----------------------------------------------------------------------------

def lr_at(step, a):
    """cltrain's schedule: linear warm-up over --warmup steps, then cosine to --min-lr."""
    W = max(a.warmup, 0)
    if step < W:
        return a.lr * (step + 1) / W
    T = a.steps - W
    if T <= 0:
        return a.lr
    frac = min(step - W, T) / T
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * frac))


def make_optimizer(model, a):
    """AdamW with decay on matrices and embeddings only (the tied matrix counted once)."""
    params = list(model.parameters())  # shared parameters appear once
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=a.lr, betas=a.betas, eps=1e-8)


def autocast(a):
    if a.bf16:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def loss_of(model, x, y, a):
    with autocast(a):
        logits = model(x)
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


def train_step(model, opt, x, y, a, step):
    for g in opt.param_groups:
        g["lr"] = lr_at(step, a)
    loss = loss_of(model, x, y, a)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if a.clip_grad > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad)
    opt.step()
    return loss


def check_splits(text, T):
    """Both splits must hold a window of T + 1 tokens."""
    for name, split in (("training", text.train), ("validation", text.val)):
        if len(split) < T + 1:
            raise Failure(f"--data {text.path}: the {name} split has {len(split)} tokens, "
                          f"fewer than block + 1 = {T + 1}")


@torch.no_grad()
def evaluate(model, text, T, a, dev):
    """The mean loss over --eval-batches fixed batches of the validation split (nats)."""
    model.eval()
    offsets = eval_offsets(len(text.val), T, a.eval_batches * a.batch_size)
    val = text.val.to(dev)
    total = 0.0
    for b in range(a.eval_batches):
        x, y = windows(val, offsets[b * a.batch_size:(b + 1) * a.batch_size].to(dev), T)
        total += loss_of(model, x, y, a).item()
    model.train()
    return total / a.eval_batches


def report(loss, text):
    unit = "byte" if text.tokens == "byte" else "char"
    return f"{loss:.6f} nats/token, {loss / math.log(2):.6f} bits/{unit}"


def train(model, text, T, a, dev):
    opt = make_optimizer(model, a)
    gen = torch.Generator().manual_seed(a.seed)
    data = text.train.to(dev)
    model.train()
    t0 = time.perf_counter()
    for step in range(a.steps):
        offsets = torch.randint(len(text.train) - T, (a.batch_size,), generator=gen)
        x, y = windows(data, offsets.to(dev), T)
        loss = train_step(model, opt, x, y, a, step)
        if a.log_every and ((step + 1) % a.log_every == 0 or step + 1 == a.steps):
            print(f"step {step + 1}/{a.steps}: loss {loss.item():.4f}, lr {lr_at(step, a):.3g}, "
                  f"{(step + 1) / (time.perf_counter() - t0):.2f} steps/s", flush=True)


# ---- sampling ----------------------------------------------------------------------------

@torch.no_grad()
def generate(model, text, T, a, dev):
    """Streams --generate N tokens after --prompt to stdout."""
    model.eval()
    if a.prompt is not None:
        ids = text.encode(a.prompt)
    else:  # a new line, as nanoGPT's sample.py starts, where the text has one
        ids = text.encode("\n") if text.tokens == "byte" or "\n" in text.index else [0]
    if not ids:
        raise Usage("--prompt: empty; give at least one character")
    gen = torch.Generator().manual_seed(a.seed)
    out = sys.stdout.buffer
    for _ in range(a.generate):
        ctx = torch.tensor([ids[-T:]], dtype=torch.long, device=dev)
        with autocast(a):
            logits = model(ctx)[0, -1].float().cpu()
        nxt = sample(logits, a.temperature, a.top_k, gen)
        ids.append(nxt)
        unit = text.vocab[nxt]
        out.write(unit if isinstance(unit, bytes) else unit.encode("utf-8"))
        out.flush()
    out.write(b"\n")
    out.flush()


def sample(logits, temperature, top_k, gen):
    """One token id: softmax(logits / temperature) over the top_k largest, a multinomial draw."""
    logits = logits / temperature
    if 0 < top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return int(torch.multinomial(F.softmax(logits, dim=-1), 1, generator=gen))


# ---- loading and benchmarking --------------------------------------------------------------

def checkpoint_text(path, a):
    """--data read as `cltrain eval --load path` reads it: with the checkpoint's vocabulary
    (its "vocab" metadata: byte tokens, or the characters of the text it was trained on) and
    its run's batch size (its "run" metadata) unless --batch-size is given; a plain state dict
    (--save-init's) has neither: the text's own characters, --tokens and --batch-size."""
    _, meta = load_safetensors(path)
    try:
        vocab = json.loads(meta["vocab"]) if "vocab" in meta else None
        batch = json.loads(meta.get("run", "{}")).get("batch_size")
        if vocab is not None and vocab["tokens"] not in ("char", "byte"):
            raise ValueError(vocab["tokens"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise Failure(f"{path}: metadata \"vocab\" or \"run\" is not cltrain's ({e})") from e
    if batch and not a.batch_given:
        a.batch_size = int(batch)
    if vocab is None:
        return Text(a.data, a.tokens)
    if vocab["tokens"] == "byte":
        return Text(a.data, "byte")
    return Text(a.data, "char", vocab["symbols"])


def load_checkpoint(path, a, vocab):
    """The model of a cltrain checkpoint (its spec from the metadata "model", else --model;
    its block T from the metadata "features", else the posembed table's rows, else --block),
    its weights loaded with load_state_dict(strict=True)."""
    tensors, meta = load_safetensors(path)
    weights = {k: torch.from_numpy(v.copy()) for k, v in tensors.items()
               if k.split(".")[0].isdigit()}
    spec = normalize_spec(meta.get("model") or resolve_model(a.model, a.block)[0])
    layers = split_layers(spec)
    pos = [i for i, s in enumerate(layers) if s.split()[0] == "posembed"]
    block = int(meta["features"]) if str(meta.get("features", "")).isdigit() \
        else weights[f"{pos[0]}.weight"].shape[0] if pos and f"{pos[0]}.weight" in weights \
        else resolve_model(a.model, a.block)[1]
    emb = weights.get("0.weight")
    if emb is not None and emb.shape[0] != vocab:
        raise Failure(f"{path}: its embedding has {emb.shape[0]} tokens, the vocabulary of "
                      f"--data has {vocab}")
    model = build_model(spec, vocab, block)
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as e:
        raise Failure(f"{path}: its tensors are not this model's ({spec}): "
                      + " ".join(str(e).split())) from e
    return model, spec, block


def bench(a, dev):
    """tokens/s of training steps on synthetic tokens, 3 warm-up steps excluded."""
    names = [a.model] if a.model_given else list(PRESETS)
    for name in names:
        torch.manual_seed(a.seed)
        spec, T = resolve_model(name, a.block)
        B = a.batch_size if a.batch_given else BENCH_BATCH.get(name, 12)
        model = build_model(spec, BENCH_VOCAB, T).to(dev)
        opt = make_optimizer(model, a)
        w = torch.randint(BENCH_VOCAB, (B, T + 1), device=dev)
        x, y = w[:, :-1], w[:, 1:]
        for s in range(3):
            train_step(model, opt, x, y, a, s)
        sync(dev)
        n, t0 = 0, time.perf_counter()
        while n < 2 or time.perf_counter() - t0 < a.bench:
            train_step(model, opt, x, y, a, 3 + n)
            n += 1
        sync(dev)
        rate = n / (time.perf_counter() - t0)
        label = name if name in PRESETS else "spec"
        print(f"{label} {rate:.2f} steps/s {rate * B * T:.0f} tokens/s (batch {B} x block {T}, "
              f"{n} steps, {'bf16' if a.bf16 else 'fp32'}, {dev})", flush=True)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def print_spec(model, spec):
    print(spec)
    for name, t in model.state_dict().items():
        print(f"{name} {tuple(t.shape)}")


# ---- command line ------------------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    def error(self, message):
        """One line, exit 2 (argparse's own prints the whole usage first)."""
        print(f"torch_gpt: {message} (--help lists the flags)", file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    p = Parser(
        prog="torch_gpt.py", description="cltrain's GPT models and recipe in PyTorch "
        "(see the module's docstring for the naming rule and the recipe)")
    p.add_argument("--data", metavar="FILE", help="the text (UTF-8, or any bytes with "
                   "--tokens byte); its last 10%% validates")
    p.add_argument("--tokens", choices=("char", "byte"), default="char")
    p.add_argument("--model", help="gpt-mini (default), gpt-char or a spec")
    p.add_argument("--block", type=int, help="window T (default: the preset's, 64 for a spec)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100, help="warm-up steps (default 100)")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--betas", default="0.9,0.99")
    p.add_argument("--clip-grad", type=float, default=1.0, help="global norm (0: none)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--log-every", type=int, default=100)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (cuda)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads")
    p.add_argument("--load", metavar="CKPT", help="evaluate (and sample) a cltrain checkpoint")
    p.add_argument("--save-init", metavar="FILE", help="write the initial weights (safetensors)")
    p.add_argument("--save", metavar="FILE", help="write the trained weights (safetensors)")
    p.add_argument("--generate", type=int, default=0, metavar="N", help="sample N tokens")
    p.add_argument("--prompt")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--bench", type=float, nargs="?", const=8.0, metavar="SECONDS",
                   help="time training steps per model (default 8 s each)")
    p.add_argument("--print-spec", action="store_true",
                   help="print the spec and the state dict's names and shapes, then exit")
    a = p.parse_args(argv)
    a.model_given, a.batch_given = a.model is not None, a.batch_size is not None
    a.model = a.model or "gpt-mini"
    a.batch_size = a.batch_size or 12
    try:
        betas = tuple(float(b) for b in a.betas.split(","))
        if len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError
    except ValueError:
        p.error(f"--betas: expected B1,B2 in [0, 1), got \"{a.betas}\"")
    a.betas = betas
    checks = [("--steps", a.steps >= 0), ("--batch-size", a.batch_size >= 1),
              ("--eval-batches", a.eval_batches >= 1), ("--lr", a.lr > 0),
              ("--min-lr", 0 <= a.min_lr <= a.lr), ("--warmup", a.warmup >= 0),
              ("--temperature", a.temperature > 0), ("--top-k", a.top_k >= 0),
              ("--generate", a.generate >= 0), ("--threads", a.threads >= 1),
              ("--block", a.block is None or a.block >= 1),
              ("--bench", a.bench is None or a.bench > 0)]
    for flag, ok in checks:
        if not ok:
            p.error(f"{flag}: {getattr(a, flag[2:].replace('-', '_'))} is out of range")
    if a.bf16 and not a.device.startswith("cuda"):
        p.error("--bf16 is autocast on a GPU: add --device cuda")
    if a.bench is None and not a.data:
        p.error("--data FILE is needed (or --bench)")
    return a


def main(argv):
    a = parse_args(argv)
    try:
        dev = torch.device(a.device)
        torch.zeros(1, device=dev)
    except (RuntimeError, AssertionError) as e:
        print(f"torch_gpt: --device {a.device}: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    if dev.type == "cpu":
        torch.set_num_threads(a.threads)
    try:
        if a.bench is not None:
            bench(a, dev)
            return 0
        text = checkpoint_text(a.load, a) if a.load else Text(a.data, a.tokens)
        V = len(text.vocab)
        torch.manual_seed(a.seed)
        if a.load:
            model, spec, T = load_checkpoint(a.load, a, V)
        else:
            spec, T = resolve_model(a.model, a.block)
            model = build_model(spec, V, T)
        spec = spec.replace("linear V ", f"linear {V} ")
        if a.print_spec:
            print_spec(model, spec)
            return 0
        check_splits(text, T)
        model.to(dev)
        if a.save_init:
            save_safetensors(a.save_init, state_dict_numpy(model), {"format": "pt"})
        print(f"model: {spec}; block {T}, vocabulary {V}, "
              f"{sum(p.numel() for p in model.parameters())} parameters; "
              f"{len(text.train)} training and {len(text.val)} validation tokens", flush=True)
        if not a.load and a.steps:
            train(model, text, T, a, dev)
        if a.save:
            save_safetensors(a.save, state_dict_numpy(model), {"format": "pt"})
        print(f"val loss {report(evaluate(model, text, T, a, dev), text)} "
              f"({a.eval_batches} batches of {a.batch_size} x {T})", flush=True)
        if a.generate:
            generate(model, text, T, a, dev)
    except Usage as e:
        print(f"torch_gpt: {e}", file=sys.stderr)
        return 2
    except Failure as e:
        print(f"torch_gpt: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
