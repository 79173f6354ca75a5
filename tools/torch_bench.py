#!/usr/bin/env python3
"""PyTorch's training speed for the models `cltrain bench` times beside it
(tools/bench_vs_torch.sh): the cnn preset (CNN-S, batch 128) and its 64/128-channel variant
(CNN-M, batch 256), the mlp preset (MLP-S: 784-256-128-10, batch 128) and MLP-M
(784-1024-1024-10, batch 512); Adam 1e-3, cross-entropy, one synthetic batch, the model and
the batch on the device $TORCH_DEVICE names (default cpu, with every thread of the machine;
e.g. cuda), the device synchronised before each clock read. Prints one line per model:
"NAME STEPS steps/s".

usage: torch_bench.py [SECONDS [MODEL...]]   (timed seconds per model after 3 warm-up steps,
default 8; models default CNN-S CNN-M)
"""
import os
import sys
import time

import torch
import torch.nn as nn


def cnn(c1, c2, classes=10):
    """The cnn preset of cltrain's README with c1, c2 channels (PyTorch's layer defaults)."""
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(c2 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, classes))


def mlp(widths, classes=10):
    """Linear layers of these widths with ReLU between them, from 784 inputs."""
    layers, fan_in = [], 784
    for w in widths:
        layers += [nn.Linear(fan_in, w), nn.ReLU()]
        fan_in = w
    return nn.Sequential(nn.Flatten(), *layers, nn.Linear(fan_in, classes))


MODELS = {"CNN-S": (lambda: cnn(32, 64), 128), "CNN-M": (lambda: cnn(64, 128), 256),
          "MLP-S": (lambda: mlp((256, 128)), 128), "MLP-M": (lambda: mlp((1024, 1024)), 512)}


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def steps_per_s(model, batch, seconds, dev):
    torch.manual_seed(0)
    model = model.to(dev)
    x = torch.rand(batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    sync(dev)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    sync(dev)
    return n / (time.perf_counter() - t0)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
    names = sys.argv[2:] or ["CNN-S", "CNN-M"]
    for name in names:
        if name not in MODELS:
            sys.exit(f"torch_bench: unknown model {name}; expected one of {', '.join(MODELS)}")
    name_dev = os.environ.get("TORCH_DEVICE", "cpu")
    try:
        dev = torch.device(name_dev)
        torch.zeros(1, device=dev)
    except (RuntimeError, AssertionError) as e:
        sys.exit(f"torch_bench: TORCH_DEVICE={name_dev}: {str(e).splitlines()[0]}")
    if dev.type == "cpu":
        torch.set_num_threads(os.cpu_count())
    for name in names:
        make, batch = MODELS[name]
        print(f"{name} {steps_per_s(make(), batch, seconds, dev):.2f} steps/s", flush=True)


if __name__ == "__main__":
    main()
