"""The CUDA C++ host-overhead demo: build ``kernels/host_overhead/host_overhead.cu`` with nvcc
(cached by source hash) and run it.

    python -m kernels.host_overhead_cuda --param variant=naive --param iters=10
    python -m kernels.host_overhead_cuda --param variant=fixed --param iters=10

``-arch=native`` by default (the GPU of the build machine); ``KERNELSCOPE_CUDA_ARCH=sm_90`` overrides.
The binary prints ``mode=... C00=... ref=...`` and exits nonzero when C[0][0] is wrong. naive
allocates with cudaMalloc and copies pageable memory synchronously every iteration; fixed keeps its
buffers and copies pinned memory asynchronously. NVTX ranges: iteration(naive|fixed) with
allocate / upload / compute / download / free inside. The recordings in
shared/fixtures/nsys/host_overhead_{naive,fixed} were made from this source on an H200.

In the harness one call = one run of the binary with ``iters`` iterations (host-timed, process
start and CUDA context creation included); use nsys to see the per-iteration split.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernels.registry import Work, WorkloadError, WorkloadUnavailable

SOURCE = Path(__file__).with_name("host_overhead") / "host_overhead.cu"


def build_argv(nvcc: str, source: Path, output: Path, arch: str | None = None) -> list[str]:
    """The nvcc command line (pure; tested)."""
    argv = [nvcc, "-O2", "-lineinfo", "-std=c++17"]
    if arch:
        argv.append(f"-arch={arch}")
    return argv + ["-o", str(output), str(source)]


def run_argv(binary: Path, params: dict[str, str]) -> list[str]:
    """The command that runs the built demo: ``BINARY naive|fixed ITERS N``."""
    return [str(binary), params["variant"], params["iters"], params["n"]]


def binary_path(cache_dir: Path) -> Path:
    """Where the build for the current source goes (keyed by the source's hash)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    return cache_dir / f"host_overhead-{digest}"


def build(cache_dir: Path | None = None, timeout_s: float = 300) -> Path:
    """Build the demo once; return the binary."""
    nvcc = shutil.which("nvcc") or next(
        (str(p) for p in sorted(Path("/usr/local").glob("cuda*/bin/nvcc"), reverse=True)), None)
    if nvcc is None:
        raise WorkloadUnavailable("The CUDA C++ demo needs nvcc (the CUDA toolkit); put it on PATH.")
    if cache_dir is None:
        from platformdirs import user_cache_dir

        cache_dir = Path(os.environ.get("KERNELSCOPE_CACHE") or user_cache_dir("kernelscope")) / "kernels"
    cache_dir.mkdir(parents=True, exist_ok=True)
    out = binary_path(cache_dir)
    if out.exists():
        return out
    tmp = out.with_suffix(".tmp")
    proc = subprocess.run(build_argv(nvcc, SOURCE, tmp, os.environ.get("KERNELSCOPE_CUDA_ARCH", "native")),
                          capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise WorkloadError(f"nvcc could not build {SOURCE.name}: {proc.stderr.strip().splitlines()[-1:]}.")
    tmp.replace(out)
    return out


def make(params: dict[str, str]) -> tuple[Any, Any]:
    if params["device"] != "cuda":
        raise WorkloadUnavailable("The CUDA C++ demo runs only on a CUDA GPU.")
    argv = run_argv(build(), params)

    def fn() -> Any:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise WorkloadError(f"The host-overhead demo failed (exit {proc.returncode}): "
                                f"{(proc.stdout + proc.stderr).strip()[-300:]}.")
        return None

    return fn, None


def work(params: dict[str, str]) -> Work:
    n, it = int(params["n"]), int(params["iters"])
    return Work(flop=2.0 * n**3 * it, bytes=None)


def main() -> int:
    import argparse

    from kernels.registry import get_workload, parse_param_args

    w = get_workload("host_overhead_cuda")
    ap = argparse.ArgumentParser(prog="python -m kernels.host_overhead_cuda", description=w.description)
    ap.add_argument("--param", action="append", metavar="K=V")
    args = ap.parse_args()
    try:
        params = w.resolve(parse_param_args(args.param))
        binary = build()
    except WorkloadError as exc:
        print(f"kernels.host_overhead_cuda: {exc}", file=sys.stderr)
        return 1
    return subprocess.call(run_argv(binary, params))


if __name__ == "__main__":
    sys.exit(main())
