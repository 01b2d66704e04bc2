"""Programs of many shapes for step detection (issue 22), each with its ground truth measured on the GPU.

One process (or one rank under torchrun) runs one variant and writes VARIANT[_rankR]_truth.json with
the GPU step period measured by CUDA events recorded on the compute stream at each step's start (the
events never synchronize the host, so they time the GPU's pace, not the host's), the host-side step
times, and what was injected. Variants:

  outer      training loop, NVTX "train_step N" around each step and phases inside, sync per step
  phases     the same, only the phases "data", "forward+backward", "optimizer" (no outer range)
  nonvtx     the same loop with no NVTX at all
  perop      torch.autograd.profiler.emit_nvtx: one NVTX range per aten op, no step range
  ahead      phases + outer range, no synchronization in the loop: the host runs ahead of the GPU
  stall      outer range, every 5th step the host stalls 25 ms (a checkpoint-like pause)
  decode     a small transformer decoding 48 tokens greedily, one .item() per token, no NVTX
  graph      a training step captured in a CUDA graph and replayed (one cudaGraphLaunch per step)
  infer      one inference forward pass of a big MLP/attention model: no steps at all
  launch     a launch-bound loop: many tiny layers (~390 kernels per step), no sync in the loop
  launch_graph  the same loop with the whole step in a CUDA graph (the fix for launch)
  varlen     a transformer trained on sequence lengths taken in turn (8), no NVTX; varlen_phases with
             the phases; varlen_accum 3 micro-batches per step (lengths keep cycling); serve:
             inference requests of those lengths (copy in, forward, result out), no optimizer
  ddp        (torchrun) DDP with phases only; --straggler R adds --extra-gemm N matmuls per step on
             rank R (GPU-side), or --sleep-ms on rank R's data phase (host-side); --moving makes
             the sleeping rank step % world (a straggler that moves); --nvtx none|phases|outer

    python3 steps_zoo.py VARIANT --out DIR [--steps N]
    torchrun --nproc_per_node 2 steps_zoo.py ddp --out DIR --straggler 1 --extra-gemm 6
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn

NVTX = {"on": True}


def push(name):
    if NVTX["on"]:
        torch.cuda.nvtx.range_push(name)


def pop():
    if NVTX["on"]:
        torch.cuda.nvtx.range_pop()


class Marks:
    """CUDA events at each step's start on the current stream: the GPU's own step period."""

    def __init__(self):
        self.ev = []
        self.host = []

    def mark(self):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        self.ev.append(e)
        self.host.append(time.perf_counter())

    def periods_ms(self):
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in zip(self.ev, self.ev[1:], strict=False)]

    def host_ms(self):
        return [(b - a) * 1e3 for a, b in zip(self.host, self.host[1:], strict=False)]


def mlp(width, depth, dim=1024):
    layers = [nn.Linear(dim, width), nn.GELU()]
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    layers += [nn.Linear(width, dim)]
    return nn.Sequential(*layers)


def write(a, doc, rank=None):
    os.makedirs(a.out, exist_ok=True)
    tag = (a.tag or a.variant) if rank is None else f"{a.tag or a.variant}_rank{rank}"
    doc.update({"variant": a.variant, "argv": vars(a), "torch": torch.__version__,
                "device": torch.cuda.get_device_name()})
    p = doc.get("gpu_period_ms") or []
    steady = p[a.warmup:] if len(p) > a.warmup else p
    if steady:
        s = sorted(steady)
        doc["gpu_period_median_ms"] = s[len(s) // 2]
    with open(os.path.join(a.out, f"{tag}_truth.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(tag, {k: v for k, v in doc.items() if k.endswith("median_ms")}, flush=True)


def train_loop(a, *, outer, phases, sync, stall_every=0, stall_ms=0.0):
    dev = torch.device("cuda")
    model = mlp(4096, 3).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.MSELoss()
    xs_cpu = [torch.randn(a.batch, 1024).pin_memory() for _ in range(4)]
    ys_cpu = [torch.randn(a.batch, 1024).pin_memory() for _ in range(4)]
    marks = Marks()
    stalls = []
    torch.cuda.synchronize()
    for step in range(a.steps):
        marks.mark()
        if outer:
            push(f"train_step {step}")
        if phases:
            push("data")
        x = xs_cpu[step % 4].to(dev, non_blocking=True)
        y = ys_cpu[step % 4].to(dev, non_blocking=True)
        if stall_every and step % stall_every == stall_every - 1:
            time.sleep(stall_ms / 1e3)
            stalls.append(step)
        if phases:
            pop()
            push("forward+backward")
        loss = loss_fn(model(x), y)
        loss.backward()
        if phases:
            pop()
            push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        if phases:
            pop()
        if sync:
            torch.cuda.synchronize()
        if outer:
            pop()
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms(), "stall_steps": stalls,
            "stall_ms": stall_ms, "per_step_copies": "2 pinned H2D (x, y)"}


def perop(a, width=2048, depth=2):
    dev = torch.device("cuda")
    model = mlp(width, depth).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(a.batch, 1024).pin_memory()
    y = torch.randn(a.batch, 1024).pin_memory()
    marks = Marks()
    torch.cuda.synchronize()
    with torch.autograd.profiler.emit_nvtx(record_shapes=True):
        for _ in range(a.steps):
            marks.mark()
            xd, yd = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            loss = nn.functional.mse_loss(model(xd), yd)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms()}


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        q = self.ln1(x)
        x = x + self.attn(q, q, q, need_weights=False, is_causal=False)[0]
        return x + self.ff(self.ln2(x))


def decode(a):
    dev = torch.device("cuda")
    d, vocab = 1024, 32000
    emb = nn.Embedding(vocab, d).to(dev).half()
    blocks = nn.Sequential(*[Block(d, 16) for _ in range(8)]).to(dev).half().eval()
    head = nn.Linear(d, vocab).to(dev).half()
    tokens = [1]
    marks = Marks()
    torch.cuda.synchronize()
    with torch.no_grad():
        for _ in range(a.steps):
            marks.mark()
            ids = torch.tensor([tokens[-64:]], device=dev)
            h = blocks(emb(ids))
            nxt = int(head(h[:, -1]).argmax(-1).item())  # one D2H sync per token
            tokens.append(nxt)
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms(), "tokens": len(tokens) - 1}


def graph_step(a, model, loss_fn, opt, xs, ys):
    dev = torch.device("cuda")
    sx, sy = xs[0].clone(), ys[0].clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(sx), sy).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        loss_fn(model(sx), sy).backward()
        opt.step()
    marks = Marks()
    torch.cuda.synchronize()
    for step in range(a.steps):
        marks.mark()
        sx.copy_(xs[step % len(xs)], non_blocking=True)
        sy.copy_(ys[step % len(ys)], non_blocking=True)
        g.replay()
    marks.mark()
    del dev
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms()}


def graph(a):
    dev = torch.device("cuda")
    model = mlp(4096, 3).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    xs = [torch.randn(a.batch, 1024, device=dev) for _ in range(4)]
    ys = [torch.randn(a.batch, 1024, device=dev) for _ in range(4)]
    return graph_step(a, model, nn.MSELoss(), opt, xs, ys)


def infer(a):
    dev = torch.device("cuda")
    d = 2048
    x = torch.randn(8, 512, d).pin_memory()
    layers = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.LayerNorm(4 * d), nn.Linear(4 * d, d),
                           nn.Softmax(-1)).to(dev).half().eval()
    conv = nn.Conv1d(d, d, 3, padding=1).to(dev).half().eval()
    marks = Marks()
    torch.cuda.synchronize()
    with torch.no_grad():
        marks.mark()
        h = layers(x.to(dev, non_blocking=True).half())
        h = conv(h.transpose(1, 2)).transpose(1, 2)
        out = torch.topk(h.float().mean(1), 5).indices.cpu()
    marks.mark()
    return {"gpu_period_ms": [], "whole_run_ms": marks.periods_ms(), "output": out.tolist()}


def infer_layers(a):
    """One inference pass through 12 identical transformer blocks: the layers repeat, steps do not."""
    dev = torch.device("cuda")
    blocks = nn.Sequential(*[Block(1024, 16) for _ in range(12)]).to(dev).half().eval()
    x = torch.randn(8, 256, 1024).pin_memory()
    marks = Marks()
    torch.cuda.synchronize()
    with torch.no_grad():
        marks.mark()
        y = blocks(x.to(dev, non_blocking=True).half())
        out = y.float().mean().item()
    marks.mark()
    return {"gpu_period_ms": [], "whole_run_ms": marks.periods_ms(), "output": out, "layers": 12}


def tiny_model():
    layers = []
    for _ in range(48):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return nn.Sequential(*layers)


def launch(a, use_graph):
    dev = torch.device("cuda")
    model = tiny_model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    loss_fn = nn.MSELoss()
    xs = [torch.randn(32, 64, device=dev) for _ in range(4)]
    ys = [torch.randn(32, 64, device=dev) for _ in range(4)]
    if use_graph:
        return graph_step(a, model, loss_fn, opt, xs, ys)
    marks = Marks()
    torch.cuda.synchronize()
    for step in range(a.steps):
        marks.mark()
        loss = loss_fn(model(xs[step % 4]), ys[step % 4])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms()}


def accum(a, micro=4):
    """Gradient accumulation: 4 micro-batches (each with its own pinned H2D copy) per optimizer step."""
    dev = torch.device("cuda")
    model = mlp(2048, 2).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    xs = [torch.randn(a.batch, 1024).pin_memory() for _ in range(micro)]
    marks = Marks()
    torch.cuda.synchronize()
    for _ in range(a.steps):
        marks.mark()
        for m in range(micro):
            x = xs[m].to(dev, non_blocking=True)
            (model(x).float().pow(2).mean() / micro).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms(), "micro_batches": micro}


def conv(a):
    """A conv net fed by a DataLoader with workers and pinned memory; loss read every 10 steps."""
    dev = torch.device("cuda")
    net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                        nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    data = torch.utils.data.TensorDataset(torch.randn(a.steps * 64, 3, 64, 64),
                                          torch.randint(0, 10, (a.steps * 64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=64, num_workers=2, pin_memory=True)
    marks = Marks()
    torch.cuda.synchronize()
    for i, (x, y) in enumerate(loader):
        marks.mark()
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i % 10 == 9:
            loss.item()
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms()}


def bench(a):
    """A micro-benchmark: one GEMM timed 100 times between two events, one sync at the end."""
    dev = torch.device("cuda")
    x = torch.randn(4096, 4096, device=dev)
    t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    t0.record()
    for _ in range(100):
        y = x @ x
    t1.record()
    torch.cuda.synchronize()
    return {"gpu_period_ms": [], "gemm_ms": t0.elapsed_time(t1) / 100, "checksum": float(y[0, 0])}


def gpu_stall(a):
    """No NVTX, host ahead; every 7th step the GPU also runs a 'checkpoint' (8 extra GEMMs)."""
    dev = torch.device("cuda")
    model = mlp(2048, 2).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    xs = [torch.randn(a.batch, 1024, device=dev) for _ in range(4)]
    big = torch.randn(4096, 4096, device=dev) / 64
    marks = Marks()
    stalls = []
    torch.cuda.synchronize()
    for step in range(a.steps):
        marks.mark()
        loss = model(xs[step % 4]).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 7 == 6:
            e = big
            for _ in range(8):
                e = e @ big
            stalls.append(step)
        if step % 10 == 9:
            loss.item()
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms(), "stall_steps": stalls}


def ddp(a):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1 + rank)
    model = DDP(mlp(a.width, 2).to(dev), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.MSELoss()
    xs_cpu = [torch.randn(a.batch, 1024).pin_memory() for _ in range(4)]
    ys_cpu = [torch.randn(a.batch, 1024).pin_memory() for _ in range(4)]
    extra = torch.randn(4096, 4096, device=dev) / 64
    slow = rank == a.straggler
    marks = Marks()
    outer, phases = a.nvtx == "outer", a.nvtx in ("phases", "outer")
    slow_steps = []
    torch.cuda.synchronize()
    dist.barrier()
    for step in range(a.steps):
        marks.mark()
        if outer:
            push(f"train_step {step}")
        if phases:
            push("data")
        sleeper = (step % world == rank) if a.moving else slow
        if a.sleep_ms and sleeper and step >= a.warmup:
            time.sleep(a.sleep_ms / 1e3)
            slow_steps.append(step)
        x = xs_cpu[step % 4].to(dev, non_blocking=True)
        y = ys_cpu[step % 4].to(dev, non_blocking=True)
        if phases:
            pop()
            push("forward+backward")
        out = model(x)
        if slow and a.extra_gemm:
            e = extra
            for _ in range(a.extra_gemm):
                e = e @ extra
            out = out + e[: out.shape[0], : out.shape[1]].mean() * 0
        loss = loss_fn(out, y)
        loss.backward()
        if phases:
            pop()
            push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        if phases:
            pop()
        if a.sync_every and step % a.sync_every == 0:
            loss.item()
        if outer:
            pop()
    marks.mark()
    doc = {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms(), "rank": rank, "world": world,
           "straggler": a.straggler, "extra_gemm": a.extra_gemm if slow else 0, "sleep_ms": a.sleep_ms,
           "moving": a.moving, "slow_steps": slow_steps, "nvtx": a.nvtx}
    # what the extra GEMMs cost on the GPU, measured apart after the loop
    if slow and a.extra_gemm:
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
        for _ in range(10):
            e = extra
            for _ in range(a.extra_gemm):
                e = e @ extra
        t1.record()
        torch.cuda.synchronize()
        doc["extra_gemm_ms_per_step"] = t0.elapsed_time(t1) / 10
    dist.barrier()
    write(a, doc, rank)
    dist.destroy_process_group()


#: sequence lengths taken in turn (a bucketed data loader): each step of the cycle runs other GEMMs
LENGTHS = (512, 384, 448, 320, 512, 256, 480, 416)


def varlen(a, phases=False, micro=1):
    """A transformer trained on batches whose sequence length cycles through LENGTHS (bf16 autocast).

    ``micro`` > 1: that many micro-batches (each the next length) per optimizer step. The loss is read
    with .item() every step (one sync per step). No NVTX unless ``phases``.
    """
    dev = torch.device("cuda")
    d = 1024
    model = nn.Sequential(*[Block(d, 16) for _ in range(4)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = max(1, a.batch // 256)
    xs = [torch.randn(batch, n, d).pin_memory() for n in LENGTHS]
    marks = Marks()
    k = 0
    torch.cuda.synchronize()
    for _ in range(a.steps):
        marks.mark()
        total = 0.0
        for _m in range(micro):
            if phases:
                push("data")
            x = xs[k % len(LENGTHS)].to(dev, non_blocking=True)
            k += 1
            if phases:
                pop()
                push("forward+backward")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean() / micro
            loss.backward()
            total += loss.item()
            if phases:
                pop()
        if phases:
            push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        if phases:
            pop()
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms(), "lengths": list(LENGTHS),
            "micro_batches": micro}


def serve(a):
    """Inference requests of cycling lengths (LENGTHS): copy in, forward, copy the result out (.cpu())."""
    dev = torch.device("cuda")
    d = 1024
    model = nn.Sequential(*[Block(d, 16) for _ in range(6)]).to(dev).half().eval()
    batch = max(1, a.batch // 256)
    xs = [torch.randn(batch, n, d).half().pin_memory() for n in LENGTHS]
    marks = Marks()
    torch.cuda.synchronize()
    with torch.no_grad():
        for i in range(a.steps):
            marks.mark()
            x = xs[i % len(LENGTHS)].to(dev, non_blocking=True)
            model(x)[:, -1].float().cpu()
    marks.mark()
    return {"gpu_period_ms": marks.periods_ms(), "host_step_ms": marks.host_ms(), "lengths": list(LENGTHS)}


#: variant -> (program, whether it records NVTX ranges)
VARIANTS = {
    "outer": (lambda a: train_loop(a, outer=True, phases=True, sync=True), True),
    "phases": (lambda a: train_loop(a, outer=False, phases=True, sync=True), True),
    "nonvtx": (lambda a: train_loop(a, outer=False, phases=False, sync=True), False),
    "ahead": (lambda a: train_loop(a, outer=True, phases=True, sync=False), True),
    "stall": (lambda a: train_loop(a, outer=True, phases=False, sync=True, stall_every=5, stall_ms=25.0),
              True),
    "perop": (perop, True),
    "perop_busy": (lambda a: perop(a, width=4096, depth=3), True),
    "infer_layers": (infer_layers, False),
    "decode": (decode, False),
    "graph": (graph, False),
    "infer": (infer, False),
    "accum": (accum, False),
    "conv": (conv, False),
    "bench": (bench, False),
    "gpu_stall": (gpu_stall, False),
    "varlen": (varlen, False),
    "varlen_phases": (lambda a: varlen(a, phases=True), True),
    "varlen_accum": (lambda a: varlen(a, micro=3), False),
    "serve": (serve, False),
    "launch": (lambda a: launch(a, False), False),
    "launch_graph": (lambda a: launch(a, True), False),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variant", choices=(*VARIANTS, "ddp"))
    ap.add_argument("--out", default=".")
    ap.add_argument("--tag", default="")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--straggler", type=int, default=-1)
    ap.add_argument("--extra-gemm", type=int, default=0)
    ap.add_argument("--sleep-ms", type=float, default=0.0)
    ap.add_argument("--moving", action="store_true")
    ap.add_argument("--nvtx", default="phases", choices=("none", "phases", "outer"))
    ap.add_argument("--sync-every", type=int, default=0)
    ap.add_argument("--width", type=int, default=4096)
    a = ap.parse_args()
    if a.variant == "ddp":
        NVTX["on"] = a.nvtx != "none"
        return ddp(a)
    program, nvtx = VARIANTS[a.variant]
    NVTX["on"] = nvtx and a.nvtx != "none"
    torch.manual_seed(0)
    doc = program(a)
    torch.cuda.synchronize()
    write(a, doc)
    return None


if __name__ == "__main__":
    main()
