#!/usr/bin/env python3
"""PyTorch's training speed on the CPU for the models `cltrain bench` times beside it
(tools/bench_vs_torch.sh): the cnn preset (CNN-S, batch 128) and its 64/128-channel variant
(CNN-M, batch 256), Adam 1e-3, cross-entropy, one synthetic batch in memory, every thread of
the machine. Prints one line per model: "NAME STEPS steps/s".

usage: torch_cnn.py [SECONDS]   (timed seconds per model after 3 warm-up steps; default 8)
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


def steps_per_s(model, batch, seconds):
    torch.manual_seed(0)
    x = torch.rand(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return n / (time.perf_counter() - t0)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
    torch.set_num_threads(os.cpu_count())
    for name, c1, c2, batch in (("CNN-S", 32, 64, 128), ("CNN-M", 64, 128, 256)):
        print(f"{name} {steps_per_s(cnn(c1, c2), batch, seconds):.2f} steps/s", flush=True)


if __name__ == "__main__":
    main()
