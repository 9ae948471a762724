#!/usr/bin/env python3
"""read_floor: how fast a GPU can only read N bytes, for the sizes of
issue 14's decode products (W13: Q4_0 and Q4_K 33.0 MB, Q6_K 48.2, Q8_0
62.4, bf16 117.4; and 4x each), against the device copy that `loom bench`
calls 100% (a 256 MiB device-to-device copy counting bytes read plus
written).

The reader is the simplest kernel that keeps enough loads in flight: a
Triton program per block of 16-byte words, as many programs as blocks
(so that no program has a tail), summing int32 words into one atomic; and
torch.sum over the same bytes as int32 as a second opinion. Each run is
timed as `loom bench` times one (exec/rocm DeviceTime): a spin kernel
first, so the host's launch is not on the clock, then device events
around the one launch; buffers rotate over more than the L2 holds.

Usage (on the GPU machine): python3 scripts/read_floor.py [JSON]
"""
import json
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _read(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_add(out_ptr, tl.sum(v))


def timed(fn, bufs, reps=40):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    fn(bufs[0])
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        torch.cuda._sleep(200_000)
        start.record()
        fn(bufs[i % len(bufs)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    dev = torch.device("cuda")
    n = 256 << 20
    src = torch.empty(n, dtype=torch.uint8, device=dev).fill_(0x3C)
    dst = torch.empty_like(src)
    copy_ms = timed(lambda s: dst.copy_(s), [src])
    copy = 2 * n / copy_ms / 1e6
    print(f"copy 256 MiB: {copy_ms * 1e3:.1f} us, {copy:.0f} GB/s (read + written)")
    out = torch.zeros(1, dtype=torch.int32, device=dev)
    sizes = {
        "W13 q4_0/q4_k": 4096 * 14336 // 256 * 144,
        "W13 q6_k": 4096 * 14336 // 256 * 210,
        "W13 q8_0": 4096 * 14336 // 32 * 34,
        "W13 bf16": 4096 * 14336 * 2,
    }
    res = {"copy_gbps": copy, "sizes": []}
    for name, b in list(sizes.items()) + [(k + " x4", 4 * v) for k, v in sizes.items()]:
        words = b // 4
        nbuf = max(2, -(-200_000_000 // b))  # more than the 50 MB L2, several times over
        bufs = [torch.randint(-1000, 1000, (words,), dtype=torch.int32, device=dev) for _ in range(nbuf)]
        row = {"name": name, "bytes": b}
        for block in (2048, 4096, 8192):
            grid = (triton.cdiv(words, block),)
            ms = timed(lambda x: _read[grid](x, out, words, BLOCK=block, num_warps=8), bufs)
            row[f"triton{block}_us"] = ms * 1e3
        ms = timed(lambda x: torch.sum(x), bufs)
        row["torch_sum_us"] = ms * 1e3
        best = min(v for k, v in row.items() if k.endswith("_us"))
        row["best_gbps"] = b / best / 1e3
        row["best_pct_copy"] = 100 * row["best_gbps"] / copy
        print(f"{name:16s} {b / 1e6:7.1f} MB: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items() if k.endswith("_us"))
              + f"; best {row['best_gbps']:.0f} GB/s, {row['best_pct_copy']:.0f}% of copy")
        res["sizes"].append(row)
        del bufs
    if len(sys.argv) > 1:
        json.dump(res, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
