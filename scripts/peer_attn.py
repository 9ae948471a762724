#!/usr/bin/env python3
"""PyTorch's decode-step attention, the peer of `loom bench -workloads
W-attn` (run it in the same device call): bf16 q [1, 32, 1, 64] over k and
v [1, 8, 1024, 64] (grouped-query heads, every key visible), through
F.scaled_dot_product_attention (enable_gqa) and through the eager
product, softmax and product a llama decoder runs; CUDA-event medians of
200 runs after 20 warm-ups, bytes counted as the keys and values read, and
the device copy bandwidth for the ratio. No network."""
import statistics

import torch
import torch.nn.functional as F


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
copy = 2 * n / timed(lambda: dst.copy_(src), reps=20, warm=3) / 1e6
H, KV, S, D = 32, 8, 1024, 64
q = torch.randn(1, H, 1, D, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, KV, S, D, device="cuda", dtype=torch.bfloat16)
v = torch.randn(1, KV, S, D, device="cuda", dtype=torch.bfloat16)
nbytes = 2 * KV * S * D * 2


def eager():
    kk = k.repeat_interleave(H // KV, dim=1)
    vv = v.repeat_interleave(H // KV, dim=1)
    s = (q @ kk.transpose(2, 3)) * D**-0.5
    return torch.softmax(s.float(), dim=-1).to(q.dtype) @ vv


for name, f in [("sdpa", lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)), ("eager", eager)]:
    ms = timed(f)
    gbps = nbytes / ms / 1e6
    print(f"W-attn PyTorch {name}: {ms:.4f} ms {gbps:.0f} GB/s {100 * gbps / copy:.0f}% of copy {copy:.0f} GB/s")
