#!/usr/bin/env python3
"""PyTorch's peer of `loom bench -workloads W12f` (run it in the same device
call): y = max_pool2d(relu(x + b), 3, 2, 1) + r on f32 x [32, 256, 112, 112],
b [1, 256, 1, 1], r [32, 256, 56, 56], eager and torch.compile; CUDA-event
medians of 50 runs after 10 warm-ups; bytes counted as x and r read once
and y written once, against the device copy bandwidth. No network."""
import statistics

import torch
import torch.nn.functional as F


def timed(f, reps=50, warm=10):
    for _ in range(warm):
        f()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


n = 1 << 30
src = torch.empty(n, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(src)
copy = 2 * n / timed(lambda: dst.copy_(src), reps=20, warm=3) / 1e6
del src, dst
x = torch.randn(32, 256, 112, 112, device="cuda")
b = torch.randn(1, 256, 1, 1, device="cuda")
r = torch.randn(32, 256, 56, 56, device="cuda")
nbytes = 4 * (x.numel() + 2 * r.numel())


def stage(x, b, r):
    return F.max_pool2d(F.relu(x + b), 3, 2, 1) + r


compiled = torch.compile(stage)
for name, f in [("eager", lambda: stage(x, b, r)), ("torch.compile", lambda: compiled(x, b, r))]:
    ms = timed(f)
    gbps = nbytes / ms / 1e6
    print(f"W12f PyTorch {name}: {ms:.4f} ms {gbps:.0f} GB/s {100 * gbps / copy:.0f}% of copy {copy:.0f} GB/s")
