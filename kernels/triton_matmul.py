"""A Triton matmul kernel (the blocked, grouped-ordering kernel of Triton's tutorial 03), checked
against ``torch.matmul`` in fp32.

    python -m kernels.triton_matmul --param M=4096 --param N=4096 --param K=4096 --param dtype=fp16

On a machine without a GPU the same kernel runs under Triton's interpreter (slow, for tests):
``TRITON_INTERPRET=1 python -m kernels.triton_matmul --param device=cpu --param M=40 ...``.

Triton is imported only when the workload is built; without triton (or without a GPU) building it
raises WorkloadUnavailable with one sentence, and the tests skip cleanly.
FLOP per call: 2·M·N·K.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from kernels import _common as c
from kernels.registry import Work, WorkloadUnavailable


def _kernel() -> tuple[Any, Any]:
    try:
        import triton

        from kernels._triton_kernels import matmul_kernel
    except ImportError:
        raise WorkloadUnavailable(
            "The Triton workload needs the 'triton' package (it comes with CUDA builds of PyTorch "
            "on Linux, or `pip install triton`)."
        ) from None
    return triton, matmul_kernel


def make(params: dict[str, str]) -> tuple[Any, Any]:
    torch = c.torch_module()
    dev = c.device_for(params)
    if dev.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise WorkloadUnavailable("The Triton matmul runs only on a CUDA GPU (or on CPU under Triton's "
                                  "interpreter, TRITON_INTERPRET=1).")
    triton, kernel = _kernel()
    m, n, k = (c.int_param(params, x) for x in ("M", "N", "K"))
    dtype = c.dtype_for(params["dtype"])
    g = torch.Generator(device="cpu").manual_seed(0)
    sets = [(torch.randn(m, k, generator=g).to(dev, dtype), torch.randn(k, n, generator=g).to(dev, dtype))
            for _ in range(c.rotate_count(params))]
    out = torch.empty(m, n, device=dev, dtype=dtype)
    bm, bn, bk = (c.int_param(params, x, 16) for x in ("block_m", "block_n", "block_k"))
    gm = 8

    def op(a: Any, b: Any) -> Any:
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        kernel[grid](a, b, out, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     out.stride(0), out.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm,
                     num_stages=3, num_warps=8)
        return out

    def ref(a: Any, b: Any) -> Any:
        with c.tf32(False):
            return torch.matmul(a.float(), b.float())

    rot = c.Rotation(sets, op, ref)
    return rot.fn, rot.reference


def work(params: dict[str, str]) -> Work:
    m, n, k = (int(params[x]) for x in ("M", "N", "K"))
    return Work(flop=2.0 * m * n * k, bytes=float(2 * (m * k + k * n + m * n)))


if __name__ == "__main__":
    sys.exit(c.main("triton_matmul"))
