"""A small transformer (or conv net) training loop recorded for the PyTorch views (issue 23).

Modes: ``kineto`` (torch.profiler with shapes, stacks, memory and modules; writes the Chrome trace and
``key_averages()`` as JSON), ``snapshot`` (``torch.cuda.memory._dump_snapshot`` pickle), ``plain`` (for a
run under ``nsys --pytorch``; NVTX ranges come from nsys). Variants: ``base`` (fp32 GEMMs on CUDA cores,
a GELU written as six element-wise ops, pageable ``.to()`` copies, ``loss.item()`` every step, a
sequence length that changes every step), ``fixed`` (bf16 autocast, F.gelu, pinned non-blocking copies,
one ``item()`` at the end, a fixed length), ``conv`` (a conv net, held out of the tuning).
Every run writes ``TAG_truth.json``: the GPU step time from CUDA events and torch's memory peaks.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class Mlp(nn.Module):
    def __init__(self, d: int, fused: bool) -> None:
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)
        self.fused = fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if self.fused:
            h = F.gelu(h, approximate="tanh")
        else:  # the tanh GELU spelled out: six element-wise kernels instead of one
            h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h * h * h)))
        return self.down(h)


class Attention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, fused: bool) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = Mlp(d, fused)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, fused: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, fused) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
            nn.Conv2d(128, 256, 3, padding=1, stride=2), nn.BatchNorm2d(256), nn.ReLU(),
        )
        self.classifier = nn.Linear(256, 100)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("kineto", "snapshot", "plain"))
    p.add_argument("--variant", choices=("base", "fixed", "conv"), default="base")
    p.add_argument("--out", default=".")
    p.add_argument("--tag", default="run")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--fixes", default="", help="base with only these fixes: tc (bf16 autocast), "
                   "gelu (F.gelu), pinned (pinned non-blocking copies), noitem (no .item() per step), "
                   "len (fixed length)")
    return p.parse_args()


#: the CUDA events around each step used: (starts, ends)
Events = tuple[list[torch.cuda.Event], list[torch.cuda.Event]]


class Workload:
    """The model, its optimizer and its training step, timed with CUDA events (``starts``, ``ends``)."""

    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        torch.manual_seed(0)
        self.dev = dev = torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        fixed = a.variant == "fixed"
        chosen = set(a.fixes.split(",")) - {""} if a.fixes else set()
        self.on = on = {f: fixed or f in chosen for f in ("tc", "gelu", "pinned", "noitem", "len")}
        vocab, d, batch = 8192, 768, 16
        self.vocab, self.batch = vocab, batch
        if a.variant == "conv":
            model: nn.Module = ConvNet().to(dev)
        else:
            model = TinyGPT(vocab, d, 12, a.layers, fused=on["gelu"]).to(dev)
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        self.lengths = [512, 384, 448, 320, 512, 256, 480, 416]
        self.starts: list[torch.cuda.Event] = []
        self.ends: list[torch.cuda.Event] = []
        self.losses: list[object] = []

    def batch_for(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        a, on, dev, vocab, batch, lengths = self.a, self.on, self.dev, self.vocab, self.batch, self.lengths
        if a.variant == "conv":
            x = torch.randn(64, 3, 64, 64)
            y = torch.randint(0, 100, (64,))
        else:
            s = 512 if on["len"] else lengths[i % len(lengths)]
            x = torch.randint(0, vocab, (batch, s))
            y = torch.randint(0, vocab, (batch, s))
        if on["pinned"]:
            return x.pin_memory().to(dev, non_blocking=True), y.pin_memory().to(dev, non_blocking=True)
        return x.to(dev), y.to(dev)

    def step(self, i: int) -> None:
        on, model, opt = self.on, self.model, self.opt
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x, y = self.batch_for(i)
        ev0.record()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=on["tc"]):
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ev1.record()
        self.starts.append(ev0)
        self.ends.append(ev1)
        self.losses.append(loss.detach() if on["noitem"] else loss.item())


def run_kineto(a: argparse.Namespace, work: Workload) -> Events:
    """The steps under torch.profiler: the Chrome trace and key_averages() written; the steps' events."""
    from torch.profiler import ProfilerActivity, profile, schedule

    trace = f"{a.out}/{a.tag}.json"
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=0, warmup=1, active=a.steps - 1, repeat=1),
                 record_shapes=True, with_stack=True, profile_memory=True, with_modules=True,
                 on_trace_ready=lambda pr: pr.export_chrome_trace(trace)) as prof:
        for i in range(a.steps):
            if i == 1:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            work.step(i)
            prof.step()
    torch.cuda.synchronize()
    write_key_averages(a, prof)
    return work.starts[1:], work.ends[1:]


def write_key_averages(a: argparse.Namespace, prof: Any) -> None:
    """``key_averages()`` (by name, then by name and shapes) as JSON, and its table as text."""
    rows = []
    for by_shape in (False, True):
        for e in prof.key_averages(group_by_input_shape=by_shape):
            shapes = str(e.input_shapes) if by_shape else ""
            rows.append({"key": e.key, "by_shapes": by_shape, "shapes": shapes,
                         "count": e.count, "cpu_time_total_us": e.cpu_time_total,
                         "self_cpu_time_total_us": e.self_cpu_time_total,
                         "device_time_total_us": getattr(e, "device_time_total", 0.0),
                         "self_device_time_total_us": getattr(e, "self_device_time_total", 0.0)})
    with open(f"{a.out}/{a.tag}_key_averages.json", "w") as f:
        json.dump(rows, f)
    with open(f"{a.out}/{a.tag}_key_averages.txt", "w") as f:
        f.write(prof.key_averages().table(sort_by="self_device_time_total", row_limit=40))


def run_snapshot(a: argparse.Namespace, work: Workload) -> Events:
    """The steps with the CUDA allocator's history on: its snapshot pickle written; the steps' events."""
    torch.cuda.memory._record_memory_history(max_entries=200000)
    for i in range(a.steps):
        work.step(i)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(f"{a.out}/{a.tag}.pickle")
    torch.cuda.memory._record_memory_history(enabled=None)
    return work.starts, work.ends


def run_plain(a: argparse.Namespace, work: Workload) -> Events:
    """The steps alone (under ``nsys --pytorch``, say); the steps' events."""
    for i in range(a.steps):
        work.step(i)
    torch.cuda.synchronize()
    return work.starts, work.ends


def write_truth(a: argparse.Namespace, work: Workload, starts_used: list[torch.cuda.Event],
                ends_used: list[torch.cuda.Event]) -> None:
    """``TAG_truth.json``: the GPU step times from the CUDA events and torch's memory peaks; printed too."""
    gpu = [s.elapsed_time(e) for s, e in zip(starts_used, ends_used, strict=True)]
    period = [s.elapsed_time(t) for s, t in zip(starts_used, starts_used[1:], strict=False)]
    truth = {"tag": a.tag, "mode": a.mode, "variant": a.variant,
             "fixes": sorted(k for k, v in work.on.items() if v), "steps": len(gpu),
             "gpu_step_ms_median": statistics.median(gpu), "gpu_period_ms_median": statistics.median(period),
             "gpu_step_ms": gpu, "max_memory_allocated": torch.cuda.max_memory_allocated(),
             "max_memory_reserved": torch.cuda.max_memory_reserved(),
             "memory_allocated_end": torch.cuda.memory_allocated(),
             "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    with open(f"{a.out}/{a.tag}_truth.json", "w") as f:
        json.dump(truth, f, indent=1)
    print(json.dumps({k: v for k, v in truth.items() if k != "gpu_step_ms"}))


def main() -> int:
    a = parse_args()
    work = Workload(a)
    warm = 3
    for i in range(warm):
        work.step(i)
    torch.cuda.synchronize()
    work.starts.clear()
    work.ends.clear()
    torch.cuda.reset_peak_memory_stats()
    run = {"kineto": run_kineto, "snapshot": run_snapshot, "plain": run_plain}[a.mode]
    starts_used, ends_used = run(a, work)
    write_truth(a, work, starts_used, ends_used)
    return 0


if __name__ == "__main__":
    sys.exit(main())
