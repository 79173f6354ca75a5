#!/usr/bin/env python3
"""Reproduces a cltrain checkpoint's predictions with numpy alone (no cltrain, no PyTorch).

usage: checkpoint_numpy.py CHECKPOINT IDX_IMAGES[.gz] [PREDICTIONS.csv]
       checkpoint_numpy.py --state-dict CHECKPOINT OUT [--format-pt]

Reads the safetensors file by hand (8-byte header length, JSON header, raw little-endian data),
rebuilds the layer list from the spec in __metadata__, scales the inputs as the metadata says,
and prints the predicted class of every image. With PREDICTIONS.csv (from `cltrain predict`)
it compares classes and probabilities and exits non-zero on a mismatch.

--state-dict writes the checkpoint's model weights as PyTorch writes a state dict with
safetensors.torch.save_file(model.state_dict(), OUT): only the "{i}.weight"/"{i}.bias" tensors
(F32, nn.Sequential's names), no optimizer state, no cltrain metadata (with --format-pt, the
{"format": "pt"} metadata that Hugging Face's save_pretrained adds), header padded with spaces
to 8 bytes. `cltrain train --init OUT --model SPEC` must accept it.
"""
import gzip
import json
import struct
import sys

import numpy as np


def load_safetensors(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop('__metadata__', {})
    data = raw[8 + n:]
    dtypes = {'F32': np.float32, 'F16': np.float16, 'I32': np.int32, 'U8': np.uint8}
    tensors = {}
    for name, t in header.items():
        b, e = t['data_offsets']
        tensors[name] = np.frombuffer(data[b:e], dtypes[t['dtype']]).reshape(t['shape'])
    return tensors, meta


def load_idx(path):
    raw = (gzip.open if path.endswith('.gz') else open)(path, 'rb').read()
    ndim = raw[3]
    dims = struct.unpack('>' + 'I' * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw[4 + 4 * ndim:], np.uint8).reshape(dims[0], -1)


def forward(tensors, spec, x):
    acts = {'relu': lambda v, _: np.maximum(v, 0), 'tanh': lambda v, _: np.tanh(v),
            'sigmoid': lambda v, _: 1 / (1 + np.exp(-v)),
            'gelu': lambda v, _: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi)
                                                        * (v + 0.044715 * v**3))),
            'silu': lambda v, _: v / (1 + np.exp(-v)),
            # the canonical spec always writes the slope; 0.01 is the parser's default
            'leakyrelu': lambda v, args: np.where(v > 0, v, float(args[0] if args else 0.01) * v)}
    for i, layer in enumerate(l.strip() for l in spec.split(',')):
        word, *args = layer.split()
        if word == 'linear':
            x = x @ tensors[f'{i}.weight'].T.astype(np.float64)
            if f'{i}.bias' in tensors:
                x = x + tensors[f'{i}.bias']
        elif word in acts:
            x = acts[word](x, args)
        # dropout and flatten are the identity at inference
    return x


def save_safetensors(path, tensors, meta=None):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name], dtype='<f4').tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(tensors[name].shape),
                        'data_offsets': [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if meta:
        header['__metadata__'] = meta
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h + b''.join(blobs))


def state_dict(args):
    tensors, _ = load_safetensors(args[0])
    weights = {k: v for k, v in tensors.items()
               if k.split('.')[0].isdigit() and k.split('.')[-1] in ('weight', 'bias')}
    save_safetensors(args[1], weights, {'format': 'pt'} if '--format-pt' in args[2:] else None)
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--state-dict':
        return state_dict(sys.argv[2:])
    tensors, meta = load_safetensors(sys.argv[1])
    pixels = load_idx(sys.argv[2]).astype(np.float64)
    x = (pixels * float(meta['input_scale']) - np.array(json.loads(meta['input_mean']))) \
        / np.array(json.loads(meta['input_std']))
    logits = forward(tensors, meta['model'], x)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    pred = p.argmax(1)
    if len(sys.argv) < 4:
        for c in pred:
            print(c)
        return 0
    rows = np.loadtxt(sys.argv[3], delimiter=',', skiprows=1)
    classes, probs = rows[:, 1].astype(int), rows[:, 2:]
    agree = (classes == pred).mean()
    err = np.abs(probs - p).max()
    print(f'numpy vs cltrain: {agree * 100:.2f}% same class, max probability difference {err:.2e}')
    # fp32 on the device against float64 here: classes can differ only where two are tied
    return 0 if agree >= 0.999 and err < 1e-4 else 1


if __name__ == '__main__':
    sys.exit(main())
