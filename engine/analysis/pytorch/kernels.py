"""The kernel view for PyTorch: each kernel with its launching operator and tensor-core use.

Each kernel has the operator that launched it, whether it ran on tensor cores, its grid and
block, and its share of the GPU time; the table also has the run's tensor-core share.

Tensor-core use is read from the kernel's name, as the profiler's TensorBoard plugin did: cuBLAS,
cuBLASLt (nvjet), CUTLASS and cuDNN name their MMA kernels by the instruction or tile they use
(``wgmma``, ``hmma``, ``s16816gemm``, ``tensorop``, ``nvjet``, ``flash``...); their CUDA-core
kernels say ``sgemm``, ``simt``, ``gemv``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.analysis.pytorch.events import KERNEL, TorchEvents

_TENSOR_RE = re.compile(
    r"wgmma|hmma|imma|xmma|tensorop|_mma|mma_|1688|16816|16832|nvjet|flash|fmha|"
    r"sm90_.*(?:gemm|conv)|sm80_.*(?:gemm|conv)|cutlass3x|bf16.*gemm|gemm.*bf16|h(?:s|h)gemm|"
    r"f16.*gemm|gemm.*f16|tf32", re.IGNORECASE)
# fp32 operands without TF32 (cuBLAS's xmma "f32f32_f32f32", CUTLASS's simt, fp32 attention) run on FMA units
_CUDA_CORE_MATH_RE = re.compile(r"sgemm|dgemm|simt|gemv|gemmk1|gemmSN|implicit_convolve_sgemm|"
                                r"conv2d_grouped_direct|direct_conv|f32f32_f32f32|fmha_cutlass[FB]_f32|"
                                r"cutlass::Kernel2<cutlass_80_simt", re.IGNORECASE)
_MATH_RE = re.compile(r"gemm|conv|matmul|wgrad|dgrad|fprop", re.IGNORECASE)


def uses_tensor_cores(name: str) -> bool:
    """True when the kernel's name says it runs on tensor cores."""
    return bool(_TENSOR_RE.search(name)) and not _CUDA_CORE_MATH_RE.search(name)


def is_cuda_core_math(name: str) -> bool:
    """True for matrix-multiply or convolution kernels that run on CUDA cores (fp32/fp64 SIMT)."""
    return bool(_CUDA_CORE_MATH_RE.search(name)) or (bool(_MATH_RE.search(name))
                                                     and not uses_tensor_cores(name)
                                                     and "elementwise" not in name)


@dataclass
class KernelRow:
    """One kernel name: its calls, times, tensor-core use, launching operator, grid and block."""

    name: str
    calls: int
    total_ns: int
    mean_ns: int
    share: float  # of all kernel time, 0..1
    tensor_cores: bool
    cuda_core_math: bool
    op: str  # the operator that launched most calls ("" when none was recorded)
    top_op: str  # that operator's outermost operator (e.g. aten::linear for aten::addmm)
    grid: str
    block: str

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict."""
        return {"name": self.name, "calls": self.calls, "total_ns": self.total_ns, "mean_ns": self.mean_ns,
                "share_of_kernel_time": self.share, "tensor_cores": self.tensor_cores,
                "cuda_core_math": self.cuda_core_math, "operator": self.op, "top_operator": self.top_op,
                "grid": self.grid, "block": self.block}


@dataclass
class KernelTable:
    """The kernel rows of one program, with the total kernel, tensor-core and CUDA-core math time."""

    rows: list[KernelRow]
    kernel_ns: int
    tensor_ns: int
    cuda_core_math_ns: int

    @property
    def tensor_share(self) -> float:
        """The fraction of kernel time spent in tensor-core kernels (0 when there is none)."""
        return self.tensor_ns / self.kernel_ns if self.kernel_ns else 0.0


def _top(ev: TorchEvents, i: int) -> int:
    while ev.op_parent[i] >= 0 and ev.cat[ev.op_parent[i]] == ev.cat[i]:
        i = int(ev.op_parent[i])
    return i


def kernel_table(ev: TorchEvents) -> KernelTable:
    """Every kernel name with its launching operator and tensor-core use, by total time."""
    kern = np.flatnonzero(ev.gpu_kind == KERNEL)
    dur = (ev.gpu_end - ev.gpu_start).astype(np.int64)
    total = int(dur[kern].sum())
    groups: dict[int, list[int]] = {}
    for j in kern.tolist():
        groups.setdefault(int(ev.gpu_name[j]), []).append(j)
    rows = []
    for code, members in groups.items():
        name = ev.gpu_names[code]
        d = dur[np.asarray(members)]
        ops = Counter(int(ev.gpu_op[j]) for j in members)
        launcher = max((o for o in ops if o >= 0), key=lambda o: ops[o], default=-1)
        op_names = Counter(ev.label(int(ev.gpu_op[j])) for j in members if ev.gpu_op[j] >= 0)
        top_names = Counter(ev.label(_top(ev, int(ev.gpu_op[j]))) for j in members if ev.gpu_op[j] >= 0)
        grids = Counter(ev.gpu_grid[j] for j in members)
        blocks = Counter(ev.gpu_block[j] for j in members)
        rows.append(KernelRow(
            name=name, calls=len(members), total_ns=int(d.sum()), mean_ns=int(d.mean()),
            share=float(d.sum()) / total if total else 0.0, tensor_cores=uses_tensor_cores(name),
            cuda_core_math=is_cuda_core_math(name),
            op=op_names.most_common(1)[0][0] if launcher >= 0 else "",
            top_op=top_names.most_common(1)[0][0] if launcher >= 0 else "",
            grid=grids.most_common(1)[0][0], block=blocks.most_common(1)[0][0]))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return KernelTable(rows=rows, kernel_ns=total, tensor_ns=sum(r.total_ns for r in rows if r.tensor_cores),
                       cuda_core_math_ns=sum(r.total_ns for r in rows if r.cuda_core_math))

