"""Host↔device copy bandwidth, pageable vs pinned host memory.

    python -m kernels.bandwidth --param direction=h2d --param memory=pinned --param size_mb=256
    kernelscope bench bandwidth --sweep size_mb=1,16,256 --sweep memory=pageable,pinned

A copy from pageable memory goes through a driver staging buffer and is synchronous; a pinned
buffer is DMA'd directly (``non_blocking=True``). Bytes per call: ``size_mb`` MiB. The check
compares the destination with the source (a copy must be exact).
On ``device=cpu`` both ends are host memory (a memcpy; only pageable makes sense there).
"""

from __future__ import annotations

import sys
from typing import Any

from kernels import _common as c
from kernels.registry import Work, WorkloadUnavailable


def make(params: dict[str, str]) -> tuple[Any, Any]:
    torch = c.torch_module()
    dev = c.device_for(params)
    n = c.int_param(params, "size_mb") * (1 << 20) // 4
    pinned = params["memory"] == "pinned"
    if pinned and dev.type != "cuda":
        raise WorkloadUnavailable("Pinned host memory needs a CUDA GPU; use memory=pageable with device=cpu.")
    host = torch.arange(n, dtype=torch.float32)
    if pinned:
        host = host.pin_memory()
    other = torch.empty(n, dtype=torch.float32, device=dev)
    if params["direction"] == "h2d":
        src, dst = host, other
    else:
        other.copy_(host)
        src, dst = other, torch.empty_like(host, pin_memory=pinned)

    def fn() -> Any:
        dst.copy_(src, non_blocking=pinned)
        return dst

    def ref() -> Any:
        return src

    return fn, ref


def work(params: dict[str, str]) -> Work:
    return Work(flop=None, bytes=float(int(params["size_mb"]) * (1 << 20) // 4 * 4))


if __name__ == "__main__":
    sys.exit(c.main("bandwidth"))
