"""Helpers shared by the torch workloads: lazy torch import, dtypes, NVTX, rotating inputs, and the
standalone ``python -m kernels.<name> --param k=v`` runner."""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kernels.registry import WorkloadParamError, WorkloadUnavailable, get_workload, parse_param_args

DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "float32",
               "fp64": "float64"}


def torch_module() -> Any:
    """Import torch, or say in one sentence how to get it."""
    try:
        import torch
    except ImportError:
        raise WorkloadUnavailable(
            "This workload needs PyTorch; install it with `pip install 'kernelscope[bench]'` "
            "(or `pip install torch`)."
        ) from None
    return torch


def device_for(params: dict[str, str]) -> Any:
    """The torch device named by the ``device`` parameter, checked to exist."""
    torch = torch_module()
    dev = params.get("device", "cuda")
    if dev == "cuda" and not torch.cuda.is_available():
        raise WorkloadUnavailable(
            "No CUDA GPU is visible to PyTorch; run on a GPU machine or pass --param device=cpu."
        )
    return torch.device(dev)


def dtype_for(name: str) -> Any:
    """torch dtype for fp16/bf16/fp32/tf32/fp64."""
    torch = torch_module()
    if name not in DTYPE_NAMES:
        raise WorkloadParamError(f"Unknown dtype '{name}'; use one of {', '.join(DTYPE_NAMES)}.")
    return getattr(torch, DTYPE_NAMES[name])


def int_param(params: dict[str, str], key: str, minimum: int = 1) -> int:
    """An integer parameter, at least ``minimum``."""
    try:
        v = int(params[key])
    except ValueError:
        raise WorkloadParamError(f"Parameter {key}={params[key]} must be an integer.") from None
    if v < minimum:
        raise WorkloadParamError(f"Parameter {key}={v} must be at least {minimum}.")
    return v


@contextlib.contextmanager
def nvtx_range(name: str) -> Iterator[None]:
    """An NVTX push/pop range when CUDA is available (no-op on CPU-only torch)."""
    torch = torch_module()
    if torch.cuda.is_available():
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()
    else:
        yield


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """Allow or forbid TF32 for fp32 matmuls inside the block."""
    torch = torch_module()
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


class Rotation:
    """Cycle through ``count`` input sets so repeated calls do not hit warm caches.

    ``fn()`` runs on the next set; ``reference()`` answers for the set the last ``fn()`` used.
    """

    def __init__(self, sets: Sequence[Any], op: Callable[..., Any], ref: Callable[..., Any] | None):
        self.sets = list(sets)
        self.op, self.ref = op, ref
        self.next, self.last = 0, 0

    def fn(self) -> Any:
        self.last = self.next
        self.next = (self.next + 1) % len(self.sets)
        return self.op(*self.sets[self.last])

    def reference(self) -> Any:
        assert self.ref is not None
        return self.ref(*self.sets[self.last])


def rotate_count(params: dict[str, str]) -> int:
    """How many input sets to rotate through (``rotate`` param, default 1)."""
    return int_param(params, "rotate") if "rotate" in params else 1


def synchronize(device: Any) -> None:
    """Wait for the GPU when the device is CUDA."""
    torch = torch_module()
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(name: str, argv: Sequence[str] | None = None) -> int:
    """Standalone run: ``python -m kernels.<name> [--param k=v ...] [--json]``.

    Runs warm-up then timed iterations, each in an NVTX range ``<name>`` (nsys shows them), checks
    the output against the reference once, and prints host wall time per iteration.
    """
    w = get_workload(name)
    ap = argparse.ArgumentParser(prog=f"python -m {w.module}", description=w.description)
    ap.add_argument("--param", action="append", metavar="K=V",
                    help="; ".join(f"{k} (default {v}): {w.param_help.get(k, '')}"
                                   for k, v in w.params.items()))
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    try:
        params = w.resolve(parse_param_args(args.param))
        fn, ref = w.make(params)
        torch = torch_module()
        device = torch.device(params["device"])
        iters, warmup = int_param(params, "iters"), int_param(params, "warmup", 0)
        with nvtx_range(f"{name}:warmup"):
            for _ in range(warmup):
                fn()
            synchronize(device)
        times_ns: list[int] = []
        with nvtx_range(f"{name}:timed"):
            for i in range(iters):
                t0 = time.perf_counter_ns()
                with nvtx_range(f"{name}[{i}]"):
                    out = fn()
                    synchronize(device)
                times_ns.append(time.perf_counter_ns() - t0)
        rel_err = None
        if ref is not None and out is not None:
            from kernels.verify import relative_error

            rel_err = relative_error(out, ref())
    except Exception as exc:  # noqa: BLE001 - one sentence for people, as the CLI does
        from engine.system.errors import KernelscopeError

        if not isinstance(exc, KernelscopeError):
            raise
        print(f"{w.module}: {exc}", file=sys.stderr)
        return 1
    result = {
        "workload": name, "params": params, "iters": iters, "timer": "host (perf_counter, synchronized)",
        "median_ms": statistics.median(times_ns) / 1e6, "min_ms": min(times_ns) / 1e6,
        "rel_err": rel_err,
    }
    if args.json:
        print(json.dumps(result))
    else:
        shown = " ".join(f"{k}={v}" for k, v in params.items())
        print(f"{name} {shown}: median {result['median_ms']:.3f} ms, "
              f"min {result['min_ms']:.3f} ms over {iters} iterations"
              + (f", rel. error vs reference {rel_err:.2e}" if rel_err is not None else ""))
    return 0


def dtype_bytes(name: str) -> int:
    """Bytes per element of fp16/bf16/fp32/tf32/fp64 (no torch needed)."""
    return {"fp16": 2, "bf16": 2, "fp32": 4, "tf32": 4, "fp64": 8}[name]
