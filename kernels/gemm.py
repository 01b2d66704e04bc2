"""bf16 (or fp16/tf32/fp32/fp64) GEMM: ``C = A @ B`` with torch.matmul.

    python -m kernels.gemm --param M=8192 --param N=8192 --param K=8192 --param dtype=bf16

FLOP per call: 2·M·N·K. The reference is the same product in fp32 (fp64 for fp64), so the check
measures the low-precision rounding, not a different algorithm.
"""

from __future__ import annotations

import sys
from typing import Any

from kernels import _common as c
from kernels.registry import Work


def make(params: dict[str, str]) -> tuple[Any, Any]:
    torch = c.torch_module()
    dev = c.device_for(params)
    m, n, k = (c.int_param(params, x) for x in ("M", "N", "K"))
    name = params["dtype"]
    dtype = c.dtype_for(name)
    ref_dtype = torch.float64 if name == "fp64" else torch.float32
    g = torch.Generator(device="cpu").manual_seed(0)
    sets = []
    for _ in range(c.rotate_count(params)):
        a = torch.randn(m, k, generator=g).to(dev, dtype)
        b = torch.randn(k, n, generator=g).to(dev, dtype)
        sets.append((a, b))

    def op(a: Any, b: Any) -> Any:
        with c.tf32(name == "tf32"):
            return torch.matmul(a, b)

    def ref(a: Any, b: Any) -> Any:
        with c.tf32(False):
            return torch.matmul(a.to(ref_dtype), b.to(ref_dtype))

    rot = c.Rotation(sets, op, ref)
    return rot.fn, rot.reference


def work(params: dict[str, str]) -> Work:
    m, n, k = (int(params[x]) for x in ("M", "N", "K"))
    size = c.dtype_bytes(params["dtype"])
    return Work(flop=2.0 * m * n * k, bytes=float(size * (m * k + k * n + m * n)))


if __name__ == "__main__":
    sys.exit(c.main("gemm"))
