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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.pytorch.events import KERNEL, TorchEvents
from engine.analysis.pytorch.nesting import chain_tops
from engine.analysis.tables import small_codes

if TYPE_CHECKING:
    import numpy.typing as npt

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


def _modes(group: npt.NDArray[np.int64], value: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.int64]:
    """Each group's most frequent value, ties to the one seen first (``Counter.most_common``); -1: none."""
    out = np.full(k, -1, dtype=np.int64)
    if not len(group):
        return out
    width = int(value.max()) + 1
    pairs, first, count = np.unique(group * width + value, return_index=True, return_counts=True)
    g = pairs // width
    best = np.lexsort((first, -count, g))
    lead = best[np.r_[True, g[best][1:] != g[best][:-1]]]
    out[g[lead]] = pairs[lead] % width
    return out


def kernel_table(ev: TorchEvents) -> KernelTable:
    """Every kernel name with its launching operator and tensor-core use, by total time."""
    kern = np.flatnonzero(ev.gpu_kind == KERNEL)
    dur = (ev.gpu_end - ev.gpu_start).astype(np.int64)
    total = int(dur[kern].sum())
    # the kernel names in order of their first launch
    group16, name_of = small_codes(ev.gpu_name[kern])
    group = group16.astype(np.int64)
    k = len(name_of)
    calls = np.bincount(group, minlength=k)
    sums = np.zeros(k, dtype=np.int64)
    np.add.at(sums, group, dur[kern])
    op = ev.gpu_op[kern]
    linked = op >= 0
    tops = chain_tops(ev.op_parent, ev.cat)
    op_name = _modes(group[linked], ev.name[op[linked]].astype(np.int64), k)
    top_name = _modes(group[linked], ev.name[tops[op[linked]]].astype(np.int64), k)
    grid = _modes(group, ev.gpu_grid.codes[kern].astype(np.int64), k)
    block = _modes(group, ev.gpu_block.codes[kern].astype(np.int64), k)
    rows = []
    for g in range(k):
        name = ev.gpu_names[int(name_of[g])]
        n, t = int(calls[g]), int(sums[g])
        rows.append(KernelRow(
            name=name, calls=n, total_ns=t, mean_ns=int(t / n),
            share=float(t) / total if total else 0.0, tensor_cores=uses_tensor_cores(name),
            cuda_core_math=is_cuda_core_math(name),
            op=ev.names[int(op_name[g])] if op_name[g] >= 0 else "",
            top_op=ev.names[int(top_name[g])] if top_name[g] >= 0 else "",
            grid=ev.gpu_grid.texts[int(grid[g])], block=ev.gpu_block.texts[int(block[g])]))
    rows.sort(key=lambda r: (-r.total_ns, r.name))
    return KernelTable(rows=rows, kernel_ns=total, tensor_ns=sum(r.total_ns for r in rows if r.tensor_cores),
                       cuda_core_math_ns=sum(r.total_ns for r in rows if r.cuda_core_math))

