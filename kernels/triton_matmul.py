"""A Triton matmul kernel (the blocked, grouped-ordering kernel of Triton's tutorial 03), checked
against ``torch.matmul`` in fp32.

    python -m kernels.triton_matmul --param M=4096 --param N=4096 --param K=4096 --param dtype=fp16

Triton is imported only when the workload is built; without triton (or without a GPU) building it
raises WorkloadUnavailable with one sentence, and the tests skip cleanly.
FLOP per call: 2·M·N·K.
"""

from __future__ import annotations

import sys
from typing import Any

from kernels import _common as c
from kernels.registry import Work, WorkloadUnavailable

_KERNEL: Any = None


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    try:
        import triton
        import triton.language as tl
    except ImportError:
        raise WorkloadUnavailable(
            "The Triton workload needs the 'triton' package (it comes with CUDA builds of PyTorch "
            "on Linux, or `pip install triton`)."
        ) from None

    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,  # noqa: N803 - names as in the tutorial
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,  # noqa: N803
                      GROUP_M: tl.constexpr):  # noqa: N803
        pid = tl.program_id(axis=0)
        num_pid_m = tl.cdiv(M, BLOCK_M)
        num_pid_n = tl.cdiv(N, BLOCK_N)
        num_pid_in_group = GROUP_M * num_pid_n
        group_id = pid // num_pid_in_group
        first_pid_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
        pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
        pid_n = (pid % num_pid_in_group) // group_size_m
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        out = acc.to(c_ptr.dtype.element_ty)
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        tl.store(c_ptrs, out, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))

    _KERNEL = (triton, matmul_kernel)
    return _KERNEL


def make(params: dict[str, str]) -> tuple[Any, Any]:
    torch = c.torch_module()
    dev = c.device_for(params)
    if dev.type != "cuda":
        raise WorkloadUnavailable("The Triton matmul runs only on a CUDA GPU; there is no CPU fallback.")
    triton, kernel = _kernel()
    m, n, k = (c.int_param(params, x) for x in ("M", "N", "K"))
    dtype = c.dtype_for(params["dtype"])
    g = torch.Generator(device="cpu").manual_seed(0)
    sets = [(torch.randn(m, k, generator=g).to(dev, dtype), torch.randn(k, n, generator=g).to(dev, dtype))
            for _ in range(c.rotate_count(params))]
    out = torch.empty(m, n, device=dev, dtype=dtype)
    bm, bn, bk, gm = 128, 128, 64, 8

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
