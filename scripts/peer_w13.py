#!/usr/bin/env python3
"""PyTorch's W13 decode mat-vec (bf16 x[1,4096] @ W[4096,14336]) and the
device-to-device copy bandwidth, timed with CUDA events (median of 200
after 20 warm-ups): the peer of `loom bench -workloads W13-*`, to run in
the same device call (scripts/gpu-measure peerw13). No network."""
import statistics

import torch


def timed(f, reps=200, warm=20):
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
ms = timed(lambda: dst.copy_(src), reps=20, warm=3)
copy = 2 * n / ms / 1e6
x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
W = torch.randn(4096, 14336, device="cuda", dtype=torch.bfloat16)
ms = timed(lambda: x @ W)
gbps = 4096 * 14336 * 2 / ms / 1e6
print(f"copy {copy:.0f} GB/s (read + write); W13 bf16 PyTorch {ms:.4f} ms {gbps:.0f} GB/s {100 * gbps / copy:.0f}% of copy")
