#!/usr/bin/env python3
"""torch.distributed's AllReduce (NCCL backend, f32 sum, in place) over
every GPU of this machine, one process per GPU, for 32 KiB, 256 KiB and
1 MiB ... 1 GiB: the
median of 20 timed calls after 5 warm-ups (CUDA events, the slowest
rank), the algorithm bandwidth bytes/time and the bus bandwidth
2(N-1)/N of it (nccl-tests' definitions). The peer of exec/rocm's
TestGPUAllReduceBandwidth (LOOM_ALLREDUCE_BENCH=1), to run in the same
device call. No network beyond the loopback.

Usage: python3 scripts/peer_allreduce.py
"""
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, n, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    for size in [32 << 10, 256 << 10] + [1 << p for p in range(20, 31, 2)]:
        x = torch.zeros(size // 4, dtype=torch.float32, device="cuda")
        times = []
        for rep in range(25):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            dist.all_reduce(x)
            b.record()
            b.synchronize()
            t = torch.tensor([a.elapsed_time(b)], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            if rep >= 5:
                times.append(t.item())
        ms = statistics.median(times)
        alg = size / ms / 1e6
        if rank == 0:
            label = f"{size >> 30} GiB" if size >= 1 << 30 else f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
            print(f"torch.distributed {n} GPUs {label}: {ms:.3f} ms, algorithm {alg:.1f} GB/s, bus {alg * 2 * (n - 1) / n:.1f} GB/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    n = torch.cuda.device_count()
    mp.spawn(worker, args=(n, 29511), nprocs=n)
