"""The catalogue of kernels/ workloads: what exists, its parameters, how to run it.

Importing this module never imports torch, triton or CUDA: the metadata (name, description,
parameters with defaults, argv) is plain Python, and :meth:`Workload.make` imports the heavy
modules only when a benchmark really runs.

API (used by the session runner and the benchmark harness)::

    from kernels.registry import get_workload, list_workloads
    w = get_workload("sdpa")
    w.params                      # {"B": "32", "H": "8", ...}: every parameter with its default
    w.argv({"S": "1024"})         # [sys.executable, "-m", "kernels.sdpa", "--param", "B=32", ...]
    fn, ref = w.make({"device": "cpu", "S": "64"})   # callables for the harness
    w.work({"S": "1024"})         # Work(flop=..., bytes=...) for throughput

Parameters are strings on the way in (as a command line gives them) and are validated by
:meth:`Workload.resolve`; an unknown name or a bad value raises :class:`WorkloadParamError`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from engine.system.errors import KernelscopeError


class WorkloadError(KernelscopeError):
    """A workload could not be found, configured or prepared (message is a sentence)."""


class WorkloadParamError(WorkloadError):
    """A parameter name or value is not valid for the workload."""


class WorkloadUnavailable(WorkloadError):
    """The workload needs something this machine lacks (torch, CUDA, triton, nvcc)."""


class Work(NamedTuple):
    """Work done by one call of a workload's function, for throughput (None: not meaningful)."""

    flop: float | None
    bytes: float | None


Fn = Callable[[], Any]


@dataclass(frozen=True)
class Workload:
    """One runnable workload.

    Attributes:
        name: Registry name (``kernelscope bench NAME``).
        description: One line for people.
        module: The module run by ``python -m`` (``kernels.<name>``).
        params: Every parameter with its default value, as strings.
        param_help: One line per parameter.
        choices: Allowed values for parameters that take one of a few values.
        requires: What must be installed: ``torch``, ``triton``, ``cuda``, ``nvcc``.
        timer: ``auto`` (CUDA events on a GPU, host timer on CPU) or ``host`` (the workload is
            host-bound by design, so wall time is what matters).
        cpu_params: Besides ``device=cpu``, the parameter values a run without a GPU needs (e.g.
            ``memory=pageable``: pinned memory needs CUDA).
    """

    name: str
    description: str
    module: str
    params: Mapping[str, str]
    param_help: Mapping[str, str] = field(default_factory=dict)
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    requires: tuple[str, ...] = ("torch",)
    timer: str = "auto"
    cpu_params: Mapping[str, str] = field(default_factory=dict)

    def cpu_needs(self, params: Mapping[str, str] | None = None) -> dict[str, str]:
        """The parameter values a CPU run needs that ``params`` (over the defaults) lacks."""
        if "device" not in self.params:
            return {}
        p = self.resolve(params)
        return {k: v for k, v in {"device": "cpu", **self.cpu_params}.items() if p.get(k) != v}

    def resolve(self, params: Mapping[str, str] | None = None) -> dict[str, str]:
        """Defaults overlaid with ``params``, validated.

        Raises:
            WorkloadParamError: an unknown parameter name or a value outside its choices.
        """
        out = dict(self.params)
        for k, v in (params or {}).items():
            if k not in self.params:
                raise WorkloadParamError(
                    f"Workload '{self.name}' has no parameter '{k}'; its parameters are: "
                    f"{', '.join(self.params)}."
                )
            v = str(v)
            allowed = self.choices.get(k)
            if allowed and v not in allowed:
                raise WorkloadParamError(
                    f"Parameter {k}={v} is not valid for '{self.name}'; choose one of: {', '.join(allowed)}."
                )
            out[k] = v
        return out

    def argv(self, params: Mapping[str, str] | None = None) -> list[str]:
        """The command that runs this workload standalone (for nsys/ncu to wrap); no shell."""
        argv = [sys.executable, "-m", self.module]
        for k, v in self.resolve(params).items():
            argv += ["--param", f"{k}={v}"]
        return argv

    def _impl(self) -> Any:
        return importlib.import_module(self.module)

    def make(self, params: Mapping[str, str] | None = None,
             device: str | None = None) -> tuple[Fn, Fn | None]:
        """Build the callables the harness times.

        Args:
            params: Parameter overrides (strings).
            device: ``cuda`` or ``cpu``; overrides the ``device`` parameter when given.

        Returns:
            ``(fn, reference_fn)``: ``fn()`` runs the workload once and returns its output (a
            tensor, or None for workloads with no checkable output); ``reference_fn()`` returns
            the expected output for the inputs of the most recent ``fn()`` call, or is None.

        Raises:
            WorkloadParamError: bad parameters.
            WorkloadUnavailable: torch/CUDA/triton/nvcc missing.
        """
        p = self.resolve(params)
        if device is not None:
            p["device"] = device
        fn, ref = self._impl().make(p)
        return fn, ref

    def work(self, params: Mapping[str, str] | None = None) -> Work:
        """FLOP and bytes moved by one call (for FLOP/s and bytes/s)."""
        w: Work = self._impl().work(self.resolve(params))
        return w


_COMMON = {"device": "cuda", "iters": "20", "warmup": "5", "rotate": "1"}
_COMMON_HELP = {
    "device": "cuda or cpu (cpu: tiny sizes, for tests)",
    "iters": "timed iterations when run standalone (python -m)",
    "warmup": "untimed iterations first when run standalone",
    "rotate": "number of input sets cycled through call by call (defeats warm caches)",
}
_COMMON_CHOICES = {"device": ("cuda", "cpu")}
_DTYPES = ("fp16", "bf16", "fp32", "tf32", "fp64")


def _w(name: str, description: str, params: dict[str, str], help_: dict[str, str],
       choices: dict[str, tuple[str, ...]] | None = None, requires: tuple[str, ...] = ("torch",),
       timer: str = "auto", module: str | None = None, cpu_params: dict[str, str] | None = None) -> Workload:
    return Workload(
        name=name, description=description, module=module or f"kernels.{name}",
        params={**params, **_COMMON}, param_help={**help_, **_COMMON_HELP},
        choices={**(choices or {}), **_COMMON_CHOICES}, requires=requires, timer=timer,
        cpu_params=cpu_params or {},
    )


_WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        _w("host_overhead",
           "PyTorch twin of the host-overhead demo: naive (allocate every iteration, pageable "
           "synchronous copies) vs fixed (persistent buffers, pinned async copies)",
           {"variant": "naive", "n": "2048", "vec": "16777216"},
           {"variant": "naive or fixed", "n": "square fp32 matrix size of the GEMM",
            "vec": "elements of the saxpy vectors"},
           {"variant": ("naive", "fixed")}, timer="host"),
        _w("host_overhead_cuda",
           "The CUDA C++ host-overhead demo (kernels/host_overhead/host_overhead.cu, built with nvcc)",
           {"variant": "naive", "n": "2048"},
           {"variant": "naive or fixed", "n": "square matrix size"},
           {"variant": ("naive", "fixed")}, requires=("nvcc", "cuda"), timer="host"),
        _w("bandwidth",
           "Host<->device copy bandwidth, pageable vs pinned",
           {"direction": "h2d", "memory": "pinned", "size_mb": "256"},
           {"direction": "h2d or d2h", "memory": "pageable or pinned",
            "size_mb": "copy size in MiB"},
           {"direction": ("h2d", "d2h"), "memory": ("pageable", "pinned")},
           cpu_params={"memory": "pageable"}),
        _w("sdpa",
           "torch scaled_dot_product_attention (seeds: B=32 H=8 S=512 D=64 fp16; B=16 H=96 S=4096 D=128/64)",
           {"B": "32", "H": "8", "S": "512", "D": "64", "dtype": "fp16", "causal": "0"},
           {"B": "batch", "H": "heads", "S": "sequence length", "D": "head dimension",
            "dtype": "fp16, bf16 or fp32", "causal": "1 for a causal mask"},
           {"dtype": ("fp16", "bf16", "fp32"), "causal": ("0", "1")}),
        _w("gemm",
           "torch matmul C = A @ B (bf16 by default)",
           {"M": "8192", "N": "8192", "K": "8192", "dtype": "bf16"},
           {"M": "rows of A", "N": "columns of B", "K": "inner dimension",
            "dtype": "bf16, fp16, tf32, fp32 or fp64"},
           {"dtype": _DTYPES}),
        _w("triton_matmul",
           "A Triton matmul kernel (the tutorial's blocked kernel) checked against torch",
           {"M": "4096", "N": "4096", "K": "4096", "dtype": "fp16", "block_m": "128", "block_n": "128",
            "block_k": "64"},
           {"M": "rows of A", "N": "columns of B", "K": "inner dimension", "dtype": "fp16 or bf16",
            "block_m": "tile rows", "block_n": "tile columns",
            "block_k": "tile depth (all powers of 2, >= 16)"},
           {"dtype": ("fp16", "bf16")}, requires=("torch", "triton", "cuda")),
    ]
}


def list_workloads() -> list[Workload]:
    """Every workload, in a stable order."""
    return list(_WORKLOADS.values())


def get_workload(name: str) -> Workload:
    """The workload called ``name``.

    Raises:
        WorkloadError: no such workload (the message lists the known ones).
    """
    try:
        return _WORKLOADS[name]
    except KeyError:
        raise WorkloadError(
            f"There is no workload called '{name}'; known workloads: {', '.join(_WORKLOADS)}."
        ) from None


def parse_param_args(items: list[str] | None) -> dict[str, str]:
    """``["k=v", "k2=v2"]`` → dict; raises WorkloadParamError on an item without '='."""
    out: dict[str, str] = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise WorkloadParamError(f"Parameter '{item}' is not of the form name=value.")
        out[k.strip()] = v.strip()
    return out
