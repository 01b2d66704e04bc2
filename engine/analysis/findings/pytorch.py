"""Findings from the PyTorch views (operators, kernels, memory), in the one findings engine.

Each rule names the cause its fix removes and computes the gain from the report's own numbers,
per steady step where the steps are known (``gains.gain_from``):

- ``torch.cuda-core-math``: matrix multiplies and convolutions on CUDA cores (fp32 without TF32);
- ``torch.item-sync``: ``.item()`` / ``.cpu()`` reads that block the host and drain the GPU's queue;
- ``torch.unfused-elementwise``: runs of element-wise kernels from one module call that one fused
  kernel would replace;
- ``torch.memory-fragmentation``: memory the allocator reserves but does not use at the peak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.findings.gains import GPU, HOST, gain_from, severity_of
from engine.analysis.findings.model import Evidence, Finding, Gain, fmt_time
from engine.system.arrays import distinct

if TYPE_CHECKING:
    from engine.analysis.findings.gains import Context
    from engine.analysis.pytorch.events import TorchEvents

#: what a TF32 or bf16 tensor-core GEMM is assumed to gain over the same fp32 FFMA GEMM: the dense
#: peaks on an H100 SXM are 67 (FP32) and 495 (TF32) / 990 (BF16) TFLOP/s; real GEMMs of moderate
#: size realise 4x or more (the recorded training step: 5.2x on its GPU step with bf16 autocast)
TENSOR_CORE_SPEEDUP = 4.0
_SYNC_OPS = ("aten::item", "aten::_local_scalar_dense")
_ELEMENTWISE = ("elementwise_kernel", "vectorized_elementwise", "unrolled_elementwise")
_MIN_RUN = 3
_COPY_OPS = frozenset({"aten::copy_", "aten::_to_copy", "aten::to", "aten::clone", "aten::contiguous"})


def _events(ctx: Context) -> TorchEvents | None:
    from engine.analysis.pytorch.events import is_pytorch, torch_events

    if not is_pytorch(ctx.trace):
        return None
    ev = torch_events(ctx.trace)
    return ev if ev.has_operators() else None


def _steady(ctx: Context, t: Any) -> Any:
    if ctx.steps is None or not ctx.n_steady:
        return np.zeros(len(t), dtype=bool)
    return ctx.steady_mask(np.asarray(t, dtype=np.int64))


def rule_cuda_core_math(ctx: Context) -> list[Finding]:
    """GEMM/convolution kernels that ran on CUDA cores, with what tensor cores would save."""
    ev = _events(ctx)
    if ev is None:
        return []
    from engine.analysis.pytorch.events import KERNEL
    from engine.analysis.pytorch.kernels import is_cuda_core_math

    flags = np.array([is_cuda_core_math(n) for n in ev.gpu_names], dtype=bool)
    rows = np.flatnonzero((ev.gpu_kind == KERNEL) & flags[ev.gpu_name]) if len(flags) else np.zeros(0, int)
    dur = (ev.gpu_end - ev.gpu_start).astype(np.int64)
    kernel_ns = int(dur[ev.gpu_kind == KERNEL].sum())
    ns = int(dur[rows].sum())
    if not kernel_ns or ns < 0.05 * kernel_ns:
        return []
    steady = _steady(ctx, ev.gpu_start[rows])
    keep = 1.0 - 1.0 / TENSOR_CORE_SPEEDUP
    gain = gain_from(ctx, float(dur[rows][steady].sum()) * keep, float(dur[rows][~steady].sum()) * keep,
                     f"CUDA-core matrix math × (1 − 1/{TENSOR_CORE_SPEEDUP:g}) = {fmt_time(ns)} × {keep:.2f}",
                     overlap=GPU)
    top = max(set(ev.gpu_name[rows].tolist()), key=lambda c: int(dur[rows][ev.gpu_name[rows] == c].sum()))
    ops = [ev.label(int(o)) for o in ev.gpu_op[rows] if o >= 0]
    top_op = max(set(ops), key=ops.count) if ops else "(no operator recorded)"
    return [Finding(
        id="torch.cuda-core-math", title="Matrix math runs on CUDA cores, not tensor cores",
        severity=severity_of(gain), source="nsys",
        summary=(f"{100.0 * ns / kernel_ns:.0f} % of the kernel time ({fmt_time(ns)}) is matrix multiplies "
                 f"or convolutions in fp32 without TF32, which run on CUDA cores; on tensor cores (TF32 or "
                 f"bf16) they run several times faster."),
        evidence=[Evidence("CUDA-core matrix kernels", len(rows), "launches", "kernel names"),
                  Evidence("their GPU time", ns, "ns", "kernels"),
                  Evidence("share of kernel time", round(100.0 * ns / kernel_ns, 2), "%", "kernels"),
                  Evidence("largest", ev.gpu_names[top][:120], "", "kernels"),
                  Evidence("launched mostly by", top_op, "", "operators")],
        fix="Let the matrix math use tensor cores: allow TF32 for fp32 matmuls and convolutions, or run "
            "the forward and backward under bf16 autocast (keep the loss and optimizer in fp32).",
        fix_torch="torch.set_float32_matmul_precision('high')  # TF32\n"
                  "torch.backends.cudnn.allow_tf32 = True\n"
                  "with torch.autocast('cuda', dtype=torch.bfloat16):\n    loss = model(x)",
        gain=gain, subject=ev.gpu_names[top][:120],
        verify="Record again: the kernel view shows the GEMMs with tensor cores (nvjet / wgmma / tf32 in "
               "their names) and the step's GPU time drops.")]


def rule_item_sync(ctx: Context) -> list[Finding]:
    """Reads of a GPU value on the host (``.item()``) that wait for the GPU and leave it idle."""
    ev = _events(ctx)
    if ev is None:
        return []
    codes = [i for i, t in enumerate(ev.names) if t in _SYNC_OPS]
    calls = np.flatnonzero(np.isin(ev.name, codes) & ~ev.merged)
    calls = np.array([i for i in calls.tolist() if ev.op_parent[i] < 0 or ev.label(int(ev.op_parent[i]))
                      not in _SYNC_OPS], dtype=np.int64)
    # only reads of a GPU tensor: they copy device-to-host and wait (a CPU tensor's .item() does not)
    from engine.analysis.pytorch.events import MEMCPY

    copying = set()  # every range with a device-to-host (or any) copy launched at or below it
    for p in ev.gpu_op[(ev.gpu_kind == MEMCPY) & (ev.gpu_op >= 0)].tolist():
        while p >= 0 and p not in copying:
            copying.add(p)
            p = int(ev.op_parent[p])
    calls = calls[[i in copying for i in calls.tolist()]] if len(calls) else calls
    if not len(calls):
        return []
    gs = np.sort(ev.gpu_start)
    ends = ev.end[calls]
    nxt = np.searchsorted(gs, ends)
    idle = np.where(nxt < len(gs), gs[np.minimum(nxt, len(gs) - 1)] - ends, 0).clip(0)
    blocked = (ev.end - ev.start)[calls]
    steady = _steady(ctx, ev.start[calls])
    if float(idle.sum()) < 1e-4 * max(ctx.wall_ns, 1):
        return []
    gain = gain_from(ctx, float(idle[steady].sum()), float(idle[~steady].sum()),
                     f"GPU idle after the reads until the next GPU work = {fmt_time(float(idle.sum()))}",
                     overlap=HOST)
    per_step = f"{steady.sum() / ctx.n_steady:.1f} per step; " if ctx.n_steady else ""
    return [Finding(
        id="torch.item-sync", title="Host reads of GPU values (.item()) stall the GPU",
        severity=severity_of(gain), source="nsys",
        summary=(f"{len(calls)} reads of a GPU value on the host "
                 f"({per_step}aten::item / _local_scalar_dense) "
                 f"wait {fmt_time(float(blocked.sum()))} for the GPU to finish, and the GPU then idles "
                 f"{fmt_time(float(idle.sum()))} until the host launches more work."),
        evidence=[Evidence("reads", len(calls), "calls", "operators"),
                  Evidence("host blocked in them", int(blocked.sum()), "ns", "operators"),
                  Evidence("GPU idle after them", int(idle.sum()), "ns", "kernels")],
        fix="Keep values on the GPU: accumulate the loss in a tensor and read it every N steps (or once at "
            "the end); avoid Python control flow on GPU values inside the step.",
        fix_torch="total = total + loss.detach()   # not loss.item() every step\n"
                  "if step % 100 == 0:\n    print(total.item() / 100)",
        gain=gain, verify="Record again: the operator view shows no aten::item inside the steps, and the "
                          "GPU has no gap after each step's loss.")]


def _elementwise_runs(ev: TorchEvents) -> list[list[int]]:
    """Runs (≥3) of element-wise kernels, consecutive on their stream, from one module call.

    A forward kernel belongs to the innermost module call it was launched in; a backward kernel to
    the module whose forward operator its autograd function runs (the sequence number), so the
    backward of a GELU written out (tanh_backward, mul, mul, add ...) is a chain too.
    """
    from engine.analysis.pytorch.events import MODULE
    from engine.analysis.pytorch.modules import module_keys

    flags = np.array([any(k in n for k in _ELEMENTWISE) for n in ev.gpu_names], dtype=bool)
    if not flags.any():
        return []
    mp = module_keys(ev, ev.cat == MODULE)
    copies = [i for i, t in enumerate(ev.names) if t in _COPY_OPS]
    op = ev.gpu_op
    at = np.maximum(op, 0)
    # the key: a backward kernel's module path (negative), else its module call; casts and copies
    # move tensors, no arithmetic
    by_path = ev.backward[at] & (mp.back[at] >= 0)
    key = np.where(by_path, -2 - mp.back[at], mp.mod_of[at])
    ok = flags[ev.gpu_name] & (op >= 0) & ~np.isin(ev.name[at], copies) & (by_path | (mp.mod_of[at] >= 0))
    runs: list[list[int]] = []
    for s in distinct(ev.gpu_stream).tolist():
        idx = np.flatnonzero(ev.gpu_stream == s)
        idx = idx[np.argsort(ev.gpu_start[idx], kind="stable")]
        q, k = ok[idx], key[idx]
        goes_on = q[1:] & q[:-1] & (k[1:] == k[:-1])  # the next kernel extends the run
        first = np.flatnonzero(q & ~np.r_[False, goes_on])
        last = np.flatnonzero(q & ~np.r_[goes_on, False])
        for a, b in zip(first.tolist(), last.tolist(), strict=True):
            if b - a + 1 >= _MIN_RUN:
                runs.append(idx[a:b + 1].tolist())
    return runs


def rule_unfused_elementwise(ctx: Context) -> list[Finding]:
    """Chains of element-wise kernels (an activation written out, scale-and-add) that could be one."""
    ev = _events(ctx)
    from engine.analysis.pytorch.events import MODULE

    if ev is None or not (ev.cat == MODULE).any():  # needs module calls to tell chains apart
        return []
    runs = _elementwise_runs(ev)
    if not runs:
        return []
    dur = (ev.gpu_end - ev.gpu_start).astype(np.int64)
    saved = np.array([int(dur[r].sum() - dur[r].max()) for r in runs], dtype=np.int64)
    starts = np.array([int(ev.gpu_start[r[0]]) for r in runs], dtype=np.int64)
    steady = _steady(ctx, starts)
    kernels = sum(len(r) for r in runs)
    if float(saved.sum()) < 0.01 * max(float(ctx.summary.gpu.busy_ns), 1.0):
        return []
    gain = gain_from(ctx, float(saved[steady].sum()), float(saved[~steady].sum()),
                     f"Σ over {len(runs)} chains (chain time − its longest kernel) = "
                     f"{fmt_time(float(saved.sum()))}",
                     overlap=GPU)
    biggest = runs[int(np.argmax(saved))]
    chain = " → ".join(ev.label(int(ev.gpu_op[j])) for j in biggest[:8])
    return [Finding(
        id="torch.unfused-elementwise", title="Chains of element-wise kernels that one fused kernel would do",
        severity=severity_of(gain), source="nsys",
        summary=(f"{kernels} element-wise kernels run in {len(runs)} chains of {_MIN_RUN} or more inside one "
                 f"module call each (largest: {chain}); each reads and writes the whole tensor again, and "
                 f"each costs a launch. Fused, a chain costs about its longest kernel."),
        evidence=[Evidence("chains", len(runs), "", "kernels by module"),
                  Evidence("kernels in them", kernels, "launches", "kernels"),
                  Evidence("chain time", int(sum(int(dur[r].sum()) for r in runs)), "ns", "kernels"),
                  Evidence("launches saved", kernels - len(runs), "launches", "kernels")],
        fix="Use the fused operator (F.gelu(x, approximate='tanh'), F.silu, F.layer_norm...) instead of "
            "spelling the formula out, or compile the module so its element-wise ops become one kernel.",
        fix_torch="h = F.gelu(h, approximate='tanh')   # one kernel\n# or: model = torch.compile(model)",
        gain=gain, verify="Record again: the module's forward shows one element-wise kernel where the "
                          "chain was, and its GPU time drops.")]


def rule_memory_fragmentation(ctx: Context) -> list[Finding]:
    """Reserved memory far above what tensors use at the peak (the caching allocator's free blocks)."""
    from engine.analysis.pytorch.memory import memory_timeline

    if ctx.trace.info.kind not in ("kineto", "snapshot"):
        return []
    tl = memory_timeline(ctx.trace)
    out = []
    for c in tl.curves:
        i = c.peak_index
        if i < 0 or c.allocated is None or c.reserved is None:
            continue
        alloc, res = int(c.allocated[i]), int(max(c.reserved[i], c.peak_reserved))
        unused = res - alloc
        if res <= 0 or unused < 256 * 2**20 or unused < 0.2 * res:
            continue
        out.append(Finding(
            id="torch.memory-fragmentation", title="The allocator reserves far more memory than tensors use",
            severity="warning" if unused >= 0.35 * res else "info", source="nsys",
            summary=(f"At the peak, tensors on GPU {c.device} use {alloc / 2**30:.2f} GiB but the caching "
                     f"allocator holds {res / 2**30:.2f} GiB: {unused / 2**30:.2f} GiB "
                     f"({100.0 * unused / res:.0f} %) is cached in blocks too fragmented to reuse."),
            evidence=[Evidence("allocated at the peak", alloc, "B", "memory events"),
                      Evidence("reserved", res, "B", "memory events"),
                      Evidence("unused", unused, "B", "reserved − allocated")],
            fix="Let segments grow instead of fragmenting (expandable segments), and keep tensor shapes the "
                "same from step to step (pad variable-length batches to a few bucket sizes).",
            fix_torch="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py",
            gain=Gain(None, None, "memory, not time: the unused reserved bytes become free for larger "
                      "batches or models", "estimate"),
            subject=f"GPU {c.device}",
            verify="Record again with profile_memory=True: reserved stays close to allocated at the peak."))
    return out
