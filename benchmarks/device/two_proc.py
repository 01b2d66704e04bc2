"""Two processes sharing GPU 0, started by one parent, for a multi-process nsys fixture.

    python3 benchmarks/device/two_proc.py [--iters 30]

The parent never touches CUDA: it starts two children (this file with --child 0 / --child 1, each
with CUDA_VISIBLE_DEVICES=0) at the same time and waits for both. Child 0 runs fp32 matmuls
(2048^3) and child 1 runs bf16 matmuls (4096^3) plus 64 MiB pinned H2D copies; each iteration is
an NVTX range "proc{K} iter N". Both children run concurrently on the same GPU, so their kernels
interleave (time-sliced) on the one device.
"""
import argparse
import os
import subprocess
import sys
import time


def child(k, iters):
    import torch
    dev = torch.device("cuda", 0)
    torch.backends.cuda.matmul.allow_tf32 = False
    if k == 0:
        a = torch.randn(2048, 2048, device=dev)
        b = torch.randn(2048, 2048, device=dev)
    else:
        a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        h = torch.randn(16 * 1024 * 1024).pin_memory()
        d = torch.empty_like(h, device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(iters):
        torch.cuda.nvtx.range_push(f"proc{k} iter {i}")
        for _ in range(4):
            c = a @ b
        if k == 1:
            d.copy_(h, non_blocking=True)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        time.sleep(0.002)
    print(f"child {k} pid {os.getpid()}: {iters} iters in {(time.perf_counter() - t0) * 1e3:.1f} ms "
          f"(checksum {float(c.float().sum()):.3e})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", type=int, default=None)
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args()
    if a.child is not None:
        child(a.child, a.iters)
        return 0
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", str(k),
                               "--iters", str(a.iters)], env=env) for k in (0, 1)]
    rcs = [p.wait() for p in procs]
    print(f"parent pid {os.getpid()}: children {[p.pid for p in procs]} exited {rcs}", flush=True)
    return max(rcs)


if __name__ == "__main__":
    sys.exit(main())
