"""PyTorch twin of the host-overhead demo (kernels/host_overhead/host_overhead.cu).

One iteration = upload A, B (n×n fp32) and x (``vec`` floats), C = A @ B and y = 2x + y, download C.

* ``variant=naive``: new device buffers every iteration with the caching allocator emptied
  (``torch.cuda.empty_cache()``, so each iteration really calls cudaMalloc/cudaFree), pageable host
  tensors, synchronous copies (``.to(device)``, ``.cpu()``).
* ``variant=fixed``: device buffers allocated once, pinned host tensors, ``copy_(non_blocking=True)``
  on the current stream, one synchronize at the end.

NVTX ranges per phase (allocate / upload / compute / download / free) as in the CUDA version, so
``kernelscope summary`` on an nsys report shows where the iteration goes.

    python -m kernels.host_overhead --param variant=naive --param iters=10
    python -m kernels.host_overhead --param variant=fixed --param iters=10

The harness times this one with a host timer: the point is the wall time the host spends.
"""

from __future__ import annotations

import sys
from typing import Any

from kernels import _common as c
from kernels.registry import Work


def make(params: dict[str, str]) -> tuple[Any, Any]:
    torch = c.torch_module()
    dev = c.device_for(params)
    n, vn = c.int_param(params, "n"), c.int_param(params, "vec")
    fixed = params["variant"] == "fixed"
    cuda = dev.type == "cuda"
    i = torch.arange(n * n, dtype=torch.float32)
    h_a = ((i % 7) * 0.25).reshape(n, n)
    h_b = ((i % 5) * 0.5).reshape(n, n)
    h_x = (torch.arange(vn) % 3).float()
    h_c = torch.empty(n, n)
    if fixed and cuda:
        h_a, h_b, h_x, h_c = (t.pin_memory() for t in (h_a, h_b, h_x, h_c))
    nvtx = c.nvtx_range
    label = "iteration(fixed)" if fixed else "iteration(naive)"

    if fixed:
        d_a, d_b, d_c = (torch.empty(n, n, device=dev) for _ in range(3))
        d_x, d_y = torch.empty(vn, device=dev), torch.empty(vn, device=dev)

        def fn() -> Any:
            with nvtx(label):
                with nvtx("upload"):
                    d_a.copy_(h_a, non_blocking=True)
                    d_b.copy_(h_b, non_blocking=True)
                    d_x.copy_(h_x, non_blocking=True)
                    d_y.zero_()
                with nvtx("compute"):
                    torch.matmul(d_a, d_b, out=d_c)
                    d_y.add_(d_x, alpha=2.0)
                with nvtx("download"):
                    h_c.copy_(d_c, non_blocking=True)
                    c.synchronize(dev)
            return h_c
    else:
        def fn() -> Any:
            with nvtx(label):
                with nvtx("allocate"):
                    bufs = [torch.empty(n, n, device=dev) for _ in range(3)]
                    d_x, d_y = torch.empty(vn, device=dev), torch.empty(vn, device=dev)
                with nvtx("upload"):
                    bufs[0].copy_(h_a)  # pageable source: synchronous
                    bufs[1].copy_(h_b)
                    d_x.copy_(h_x)
                    d_y.zero_()
                with nvtx("compute"):
                    torch.matmul(bufs[0], bufs[1], out=bufs[2])
                    d_y.add_(d_x, alpha=2.0)
                with nvtx("download"):
                    out = bufs[2].cpu()
                    c.synchronize(dev)
                with nvtx("free"):
                    del bufs, d_x, d_y
                    if cuda:
                        torch.cuda.empty_cache()  # hand memory back so the next iteration cudaMallocs
            return out

    def ref() -> Any:
        with c.tf32(False):
            return torch.matmul(h_a.double(), h_b.double())

    return fn, ref


def work(params: dict[str, str]) -> Work:
    n, vn = int(params["n"]), int(params["vec"])
    return Work(flop=2.0 * n**3 + 2.0 * vn, bytes=float(4 * (3 * n * n + vn)))


if __name__ == "__main__":
    sys.exit(c.main("host_overhead"))
