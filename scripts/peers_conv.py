# Peer baselines for Loom's convolution workloads (issue 13; `loom bench
# -workloads W12,...`): the same graphs through PyTorch, on the CPU at the
# CPU sizes and, where CUDA is present, on the GPU with cuDNN.
#
#   CPU  (threads = LOOM_THREADS or the cores; torch.set_num_threads):
#        W12 conv 3x3 pad 1, N=8 C=64->64 56x56 f32, NCHW and channels_last;
#        W12-crb conv+bias+relu eager (and torch.compile where it exists);
#        W12b and W12c below, at their fixed shapes.
#   CUDA (cuDNN; TF32 off for f32): W12 N=32 C=256->256 56x56 f32 and bf16,
#        NCHW and channels_last; W12-crb conv+bias+relu eager and
#        torch.compile, f32 and bf16; W12b conv1d 16x384x3000 k3 p1;
#        W12c conv_transpose2d 16x128x64x64 -> 64 k4 s2 p1; max_pool2d 3x3
#        s2 p1 on 32x256x112x112; upsample bilinear x2 on 8x256x112x112.
#
# GPU times: triton.testing.do_bench (median, device events) when Triton is
# there, else CUDA events around each call, median. CPU times: host clock
# around each call, median. Prints JSON in the shape of shared/peers/*.py:
# {"device", "torch", "results": [{name, ms, tflops, gbs}]}, plus "on"
# ("cpu" or "cuda") and "threads" per result.
#
# usage: python3 scripts/peers_conv.py [--cpu-only|--gpu-only] [--no-fixed] [OUT.json]
# (--no-fixed skips W12b and W12c on the CPU, which take seconds there)
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

args = [a for a in sys.argv[1:] if not a.startswith("--")]
flags = {a for a in sys.argv[1:] if a.startswith("--")}
torch.manual_seed(0)
res = []


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def cpu_time(fn, warmup=3, reps=20):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return median(ts)


def gpu_time(fn):
    try:
        from triton.testing import do_bench
        return do_bench(fn, warmup=25, rep=200, return_mode="median")
    except ImportError:
        for _ in range(10):
            fn()
        ts = []
        for _ in range(50):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
        return median(ts)


def rec(on, name, fn, flops=0.0, nbytes=0.0):
    try:
        with torch.no_grad():
            ms = cpu_time(fn) if on == "cpu" else gpu_time(fn)
        res.append(dict(name=name, on=on, threads=torch.get_num_threads() if on == "cpu" else None, ms=ms,
                        tflops=flops / ms / 1e9 if flops else None, gbs=nbytes / ms / 1e6 if nbytes else None))
    except Exception as e:  # a peer that cannot run is reported, not fatal
        res.append(dict(name=name, on=on, ms=None, err=repr(e)[:200]))
        print("ERR", name, repr(e)[:300], file=sys.stderr)


def conv_flops(n, c, o, hw, k=3):
    return 2 * n * c * o * k * k * hw * hw


def compiled(fn):
    if not hasattr(torch, "compile"):
        return None
    try:
        return torch.compile(fn)
    except Exception as e:
        print("ERR torch.compile", repr(e)[:200], file=sys.stderr)
        return None


def w12bc(on):
    dev = "cpu" if on == "cpu" else "cuda"
    x1 = torch.randn(16, 384, 3000, device=dev)
    w1 = torch.randn(384, 384, 3, device=dev) * 0.05
    rec(on, "W12b conv1d 16x384x3000 k3 p1 f32", lambda: F.conv1d(x1, w1, padding=1),
        flops=2 * 16 * 384 * 3000 * 384 * 3)
    del x1, w1
    xt = torch.randn(16, 128, 64, 64, device=dev)
    wt = torch.randn(128, 64, 4, 4, device=dev) * 0.05
    rec(on, "W12c conv_transpose2d 16x128x64^2 -> 64 k4 s2 p1 f32",
        lambda: F.conv_transpose2d(xt, wt, stride=2, padding=1), flops=2 * 16 * 128 * 64 * 64 * 64 * 16)


def w12(on, n, c, hw, dtypes):
    dev = "cpu" if on == "cpu" else "cuda"
    for dt, nm in dtypes:
        x = torch.randn(n, c, hw, hw, device=dev, dtype=dt)
        w = torch.randn(c, c, 3, 3, device=dev, dtype=dt) * 0.05
        b = torch.randn(c, device=dev, dtype=dt)
        fl = conv_flops(n, c, c, hw)
        size = f"{n}x{c}x{hw}^2"
        rec(on, f"W12 conv3x3 {nm} NCHW {size}", lambda: F.conv2d(x, w, padding=1), flops=fl)
        xl, wl = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        rec(on, f"W12 conv3x3 {nm} NHWC {size}", lambda: F.conv2d(xl, wl, padding=1), flops=fl)

        def crb(x):
            return F.relu(F.conv2d(x, w, b, padding=1))
        rec(on, f"W12-crb conv3x3+bias+relu {nm} eager {size}", lambda: crb(x), flops=fl)
        cc = compiled(crb)
        if cc is not None:
            rec(on, f"W12-crb conv3x3+bias+relu {nm} inductor {size}", lambda: cc(x), flops=fl)
        del x, xl, w, wl


out = {"torch": torch.__version__, "results": res}
if "--gpu-only" not in flags:
    threads = int(os.environ.get("LOOM_THREADS", os.cpu_count() or 1))
    torch.set_num_threads(threads)
    out["cpu"] = {"threads": threads, "mkldnn": torch.backends.mkldnn.is_available()}
    w12("cpu", 8, 64, 56, ((torch.float32, "f32"),))
    if "--no-fixed" not in flags:
        w12bc("cpu")
if "--cpu-only" not in flags and torch.cuda.is_available():
    out["device"] = torch.cuda.get_device_name()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    out["cudnn"] = torch.backends.cudnn.version()
    w12("cuda", 32, 256, 56, ((torch.float32, "f32"), (torch.bfloat16, "bf16")))
    w12bc("cuda")
    xp = torch.randn(32, 256, 112, 112, device="cuda")
    rec("cuda", "max_pool2d 3x3 s2 p1 32x256x112^2 f32", lambda: F.max_pool2d(xp, 3, 2, 1),
        nbytes=xp.numel() * 4 * 1.25)
    xu = xp[:8].contiguous()
    del xp
    rec("cuda", "upsample bilinear x2 8x256x112^2 f32",
        lambda: F.interpolate(xu, scale_factor=2, mode="bilinear", align_corners=False),
        nbytes=xu.numel() * 4 * 5)
    del xu
elif "device" not in out:
    out["device"] = "cpu: " + (open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
                              if os.path.exists("/proc/cpuinfo") else "unknown")

print(json.dumps(out, indent=1))
if args:  # optional: also write the JSON to this path
    json.dump(out, open(args[0], "w"), indent=1)
