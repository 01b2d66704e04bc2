"""Calibration: this machine's measured ceilings, stored per GPU UUID for plots and rooflines.

``kernelscope calibrate`` measures, with the benchmark harness and the kernels/ workloads:
device-to-device copy bandwidth, host↔device bandwidth (pinned and pageable), and matmul rates
in bf16, fp16, tf32 and fp32. Each number is the rate at the median time of its run. The result is
saved as JSON in ``<data dir>/calibration/<GPU UUID>.json`` (data dir: ``$KERNELSCOPE_DATA`` or the
platformdirs user data dir). Readers use :func:`load_calibration`; field names carry their units.

``--device cpu`` runs the same machinery on the host CPU at small sizes (for tests; pinned memory
and tf32 do not exist there, so those fields are None).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from engine.sessions.bench import BenchOptions, BenchResult, run_workload
from engine.system.calibration import (  # noqa: F401 - the store, re-exported for callers
    SCHEMA,
    Calibration,
    CalibrationError,
    calibration_path,
    current_gpu_uuid,
    data_dir,
    load_calibration,
    normalize_uuid,
    save_calibration,
)


#: (field, workload, params) measured on a GPU; sizes shrink on CPU (see _plan).
def _plan(device: str) -> tuple[int, int, list[tuple[str, str, dict[str, str]]]]:
    gpu = device == "cuda"
    copy_mb = 256 if gpu else 8
    n = 8192 if gpu else 128
    plan: list[tuple[str, str, dict[str, str]]] = []
    for direction in ("h2d", "d2h"):
        for memory in ("pinned", "pageable") if gpu else ("pageable",):
            plan.append((f"{direction}_{memory}_bytes_per_s", "bandwidth",
                         {"direction": direction, "memory": memory, "size_mb": str(copy_mb)}))
    for dtype in ("bf16", "fp16", "tf32", "fp32") if gpu else ("bf16", "fp16", "fp32"):
        plan.append((f"{dtype}_flop_per_s", "gemm", {"M": str(n), "N": str(n), "K": str(n), "dtype": dtype}))
    return copy_mb << 20, n, plan


def _d2d(device: str, nbytes: int, options: BenchOptions) -> BenchResult:
    from engine.sessions.bench import measure, require_torch

    torch = require_torch()
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)

    def fn() -> Any:
        dst.copy_(src)
        return dst

    return measure(fn, lambda: src, device=device, options=options, name="d2d_copy",
                   params={"size_bytes": str(nbytes)})


def calibrate(device: str = "cuda", options: BenchOptions | None = None,
              progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure this machine's ceilings.

    Args:
        device: ``cuda`` (GPU 0) or ``cpu`` (the machinery on the host, small sizes).
        options: Harness options per measurement (default: 2 % CI target, 3 s budget each).
        progress: Called with the name of each measurement before it runs.

    Raises:
        CalibrationError: no GPU (with device ``cuda``), or torch missing.
    """
    from engine.sessions.bench import require_torch

    torch = require_torch()
    if device == "cuda" and not torch.cuda.is_available():
        raise CalibrationError("There is no CUDA GPU here to calibrate (PyTorch sees none); run "
                               "`kernelscope calibrate` on the GPU machine, or --device cpu to test.")
    if device not in ("cuda", "cpu"):
        raise CalibrationError(f"Device '{device}' is unknown; use cuda or cpu.")
    opts = options or BenchOptions(warmup=2, min_repeats=5, max_repeats=200, target_rel_ci=0.02, budget_s=3.0)
    nbytes, n, plan = _plan(device)
    values: dict[str, float | None] = {}
    if progress:
        progress("d2d_copy")
    d2d = _d2d(device, nbytes, opts)
    _ensure_ok(d2d)
    values["d2d_copy_bytes_per_s"] = nbytes / (d2d.stats.median * 1e-9)
    values["dram_bytes_per_s"] = 2 * nbytes / (d2d.stats.median * 1e-9)
    for field_name, workload, params in plan:
        if progress:
            progress(field_name)
        r = run_workload(workload, {**params, "device": device}, opts)
        _ensure_ok(r)
        values[field_name] = r.flop_per_s if workload == "gemm" else r.bytes_per_s
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        raw_uuid = getattr(props, "uuid", None)
        uuid = normalize_uuid(str(raw_uuid)) if raw_uuid is not None else current_gpu_uuid() or "GPU-unknown"
        name = str(torch.cuda.get_device_name(0))
    else:
        uuid, name = "cpu", d2d.device_name
    return Calibration(
        gpu_uuid=uuid, gpu_name=name, device=device,
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        torch_version=str(torch.__version__), timer=d2d.timer, copy_bytes=nbytes, matmul_n=n, **values,
    )


def _ensure_ok(r: BenchResult) -> None:
    if r.check.ok is False:
        raise CalibrationError(f"Calibration stopped: {r.workload} {r.params} gave a wrong result "
                               f"({r.check.note}); the GPU or driver may be faulty.")


_ROWS = [
    ("Device-to-device copy", "d2d_copy_bytes_per_s", "GB/s"),
    ("DRAM (read+write)", "dram_bytes_per_s", "GB/s"),
    ("Host-to-device pinned", "h2d_pinned_bytes_per_s", "GB/s"),
    ("Host-to-device pageable", "h2d_pageable_bytes_per_s", "GB/s"),
    ("Device-to-host pinned", "d2h_pinned_bytes_per_s", "GB/s"),
    ("Device-to-host pageable", "d2h_pageable_bytes_per_s", "GB/s"),
    ("bf16 matmul", "bf16_flop_per_s", "TFLOP/s"),
    ("fp16 matmul", "fp16_flop_per_s", "TFLOP/s"),
    ("tf32 matmul", "tf32_flop_per_s", "TFLOP/s"),
    ("fp32 matmul", "fp32_flop_per_s", "TFLOP/s"),
]


def format_calibration(cal: Calibration) -> str:
    """A readable table of the ceilings."""
    lines = [f"{cal.gpu_name} ({cal.gpu_uuid}), measured {cal.measured_at}, torch {cal.torch_version}, "
             f"timer {cal.timer}; copies {cal.copy_bytes >> 20} MiB, matmul {cal.matmul_n}^3"]
    for label, key, unit in _ROWS:
        v = getattr(cal, key)
        scale = 1e9 if unit == "GB/s" else 1e12
        shown = "       n/a" if v is None else f"{v / scale:10.2f} {unit}"
        lines.append(f"  {label:<26} {shown}")
    return "\n".join(lines)
