"""Two-GPU DDP training job with a deliberate straggler, for profiler fixtures.

Run with torchrun (one process per GPU):
    torchrun --standalone --nproc_per_node 2 benchmarks/device/train_ddp.py --out-dir DIR

Every step is one NVTX range "train_step N" (N from 0; steps 0..warmup-1 are warm-up steps).
The rank named by --slow-rank sleeps --delay-ms on the host after the forward pass and before
backward, every step (warm-up steps included), so the other rank waits inside the NCCL all-reduce
that DDP issues during backward. Each step ends with torch.cuda.synchronize() (as a logging loop
would), so per-step wall times are comparable between ranks; they are written to
DIR/ddp_steps_rank{R}.json. With --kineto, torch.profiler (CPU+CUDA) records steps
[kineto_start, kineto_start+kineto_active) and writes DIR/ddp_rank{R}_kineto.json.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

CUDA = os.environ.get("KS_DEVICE", "cuda") == "cuda"  # KS_DEVICE=cpu: gloo/CPU dry run of the logic only


def sync():
    if CUDA:
        torch.cuda.synchronize()


def push(name):
    if CUDA:
        torch.cuda.nvtx.range_push(name)


def pop():
    if CUDA:
        torch.cuda.nvtx.range_pop()


def build_model(width):
    return nn.Sequential(
        nn.Linear(1024, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, 1024),
    )


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--tag", default="ddp")
    ap.add_argument("--kineto", action="store_true")
    ap.add_argument("--kineto-start", type=int, default=10)
    ap.add_argument("--kineto-active", type=int, default=4)
    return ap.parse_args()


def init_process_group():
    """This process's rank joined to the job (NCCL on its GPU, or gloo on the CPU); (local rank, device)."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if CUDA:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    return local_rank, dev


def start_profiler(a, rank):
    """With --kineto: torch.profiler started, recording steps [kineto_start, kineto_start+kineto_active)."""
    if not a.kineto:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule
    trace_path = os.path.join(a.out_dir, f"{a.tag}_rank{rank}_kineto.json")
    prof = profile(
        activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else []),
        schedule=schedule(wait=max(0, a.kineto_start - 1), warmup=1, active=a.kineto_active, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(trace_path),
    )
    prof.start()
    return prof


def train(a, model, opt, loss_fn, xs, ys, delay, prof):
    """The steps, each one NVTX range ending in a synchronize; each step's wall time (ms)."""
    times = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        push(f"train_step {step}")
        i = step % len(xs)
        out = model(xs[i])
        loss = loss_fn(out, ys[i])
        if delay:
            time.sleep(delay)  # the injected straggler delay (host side, before backward)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        pop()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof is not None:
            prof.step()
    return times


def write_steps(a, rank, world, dev, model, times):
    """DIR/TAG_steps_rank{R}.json: the run's settings and its step times; one line printed."""
    steady = times[a.warmup:]
    doc = {
        "rank": rank, "world_size": world, "device": torch.cuda.get_device_name(dev) if CUDA else "cpu",
        "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())) if CUDA else None,
        "steps": a.steps, "warmup_steps": a.warmup, "slow_rank": a.slow_rank,
        "injected_delay_ms": a.delay_ms if rank == a.slow_rank else 0.0,
        "batch": a.batch, "width": a.width,
        "params": sum(p.numel() for p in model.parameters()),
        "step_ms": times,
        "steady_step_ms_mean": sum(steady) / max(1, len(steady)),
    }
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, f"{a.tag}_steps_rank{rank}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(f"rank {rank}: steady step mean {doc['steady_step_ms_mean']:.2f} ms, "
          f"delay {doc['injected_delay_ms']} ms",
          flush=True)


def main():
    a = parse_args()
    local_rank, dev = init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234 + rank)

    model = DDP(build_model(a.width).to(dev), device_ids=[local_rank] if CUDA else None)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.MSELoss()
    xs = [torch.randn(a.batch, 1024, device=dev) for _ in range(4)]
    ys = [torch.randn(a.batch, 1024, device=dev) for _ in range(4)]
    delay = a.delay_ms / 1000.0 if rank == a.slow_rank else 0.0

    prof = start_profiler(a, rank)
    sync()
    dist.barrier()
    times = train(a, model, opt, loss_fn, xs, ys, delay, prof)
    if prof is not None:
        prof.stop()
    dist.barrier()
    write_steps(a, rank, world, dev, model, times)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
