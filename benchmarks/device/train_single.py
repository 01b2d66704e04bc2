"""Single-GPU training loop in a "bad" and a "fixed" variant, for profiler fixtures.

    python3 benchmarks/device/train_single.py --variant bad|fixed [--steps 40] [--warmup 3]

Same model (a small conv net), same data, same step count in both variants. Every step is one NVTX
range "train_step N" (N from 0; steps 0..warmup-1 are warm-up).
bad:   CPU batches in pageable memory, copied with a blocking .to("cuda") every step;
       loss.item() every step; torch.cuda.empty_cache() every step.
fixed: CPU batches pinned once (pin_memory()), copied with .to(non_blocking=True); the loss is summed
       on the GPU and read once at the end; no empty_cache.
Per-step wall times go to --json. With --kineto PATH, torch.profiler records steps 10..13.
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn

CUDA = os.environ.get("KS_DEVICE", "cuda") == "cuda"  # KS_DEVICE=cpu: CPU dry run of the logic only


def sync():
    if CUDA:
        torch.cuda.synchronize()


def push(name):
    if CUDA:
        torch.cuda.nvtx.range_push(name)


def pop():
    if CUDA:
        torch.cuda.nvtx.range_pop()


def build_model():
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
        nn.Conv2d(128, 256, 3, padding=1, stride=2), nn.BatchNorm2d(256), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 100),
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["bad", "fixed"], required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--hw", type=int, default=64)
    ap.add_argument("--json", default=None)
    ap.add_argument("--kineto", default=None)
    a = ap.parse_args()
    bad = a.variant == "bad"
    dev = torch.device("cuda", 0) if CUDA else torch.device("cpu")
    torch.manual_seed(0)

    model = build_model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # 8 CPU batches of 256 x 3 x 64 x 64 fp32 (12.6 MB each), cycled
    xs = [torch.randn(a.batch, 3, a.hw, a.hw) for _ in range(8)]
    ys = [torch.randint(0, 100, (a.batch,)) for _ in range(8)]
    if not bad and CUDA:
        xs = [x.pin_memory() for x in xs]
        ys = [y.pin_memory() for y in ys]

    prof = None
    if a.kineto:
        from torch.profiler import ProfilerActivity, profile, schedule
        prof = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if CUDA else []),
                       schedule=schedule(wait=9, warmup=1, active=4, repeat=1),
                       on_trace_ready=lambda p: p.export_chrome_trace(a.kineto))
        prof.start()

    sync()
    times, losses = [], []
    loss_sum = torch.zeros((), device=dev)
    t_all = time.perf_counter()
    for step in range(a.steps):
        t0 = time.perf_counter()
        push(f"train_step {step}")
        i = step % len(xs)
        if bad:
            x, y = xs[i].to(dev), ys[i].to(dev)
        else:
            x, y = xs[i].to(dev, non_blocking=True), ys[i].to(dev, non_blocking=True)
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if bad:
            losses.append(loss.item())      # host sync every step
            if CUDA:
                torch.cuda.empty_cache()     # returns cached blocks: cudaFree / cudaMalloc churn
        else:
            loss_sum += loss.detach()
        pop()
        times.append((time.perf_counter() - t0) * 1e3)
        if prof is not None:
            prof.step()
    sync()
    total_ms = (time.perf_counter() - t_all) * 1e3
    if prof is not None:
        prof.stop()
    mean_loss = (sum(losses) / len(losses)) if bad else loss_sum.item() / a.steps
    doc = {"variant": a.variant, "steps": a.steps, "warmup_steps": a.warmup, "batch": a.batch,
           "input_shape": [a.batch, 3, a.hw, a.hw],
           "device": torch.cuda.get_device_name(dev) if CUDA else "cpu",
           "torch": torch.__version__, "step_ms": times, "total_ms": total_ms, "mean_loss": mean_loss}
    print(f"{a.variant}: total {total_ms:.1f} ms for {a.steps} steps, mean loss {mean_loss:.4f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
