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

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.errors import KernelscopeError
from engine.sessions.bench import BenchOptions, BenchResult, run_workload

SCHEMA = "kernelscope.calibration/1"


class CalibrationError(KernelscopeError):
    """Calibration cannot run here, or a stored calibration cannot be read."""


@dataclass(frozen=True)
class Calibration:
    """Measured ceilings of one GPU (or of the CPU with device ``cpu``). Rates per second.

    ``d2d_copy_bytes_per_s`` is bytes copied per second (what nsys shows for a Device-to-Device
    memcpy); ``dram_bytes_per_s`` counts the read and the write (2 × copy bytes), comparable with
    ncu's ``dram__bytes.sum.per_second`` and the roofline's memory ceiling.
    """

    gpu_uuid: str
    gpu_name: str
    device: str
    measured_at: str
    torch_version: str
    timer: str
    copy_bytes: int
    matmul_n: int
    d2d_copy_bytes_per_s: float | None = None
    dram_bytes_per_s: float | None = None
    h2d_pinned_bytes_per_s: float | None = None
    h2d_pageable_bytes_per_s: float | None = None
    d2h_pinned_bytes_per_s: float | None = None
    d2h_pageable_bytes_per_s: float | None = None
    bf16_flop_per_s: float | None = None
    fp16_flop_per_s: float | None = None
    tf32_flop_per_s: float | None = None
    fp32_flop_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON document with the schema name."""
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        """Inverse of :meth:`to_dict` (unknown keys ignored, so newer files still load)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def data_dir() -> Path:
    """``$KERNELSCOPE_DATA`` or the platformdirs user data dir for kernelscope."""
    env = os.environ.get("KERNELSCOPE_DATA")
    if env:
        return Path(env)
    from platformdirs import user_data_dir

    return Path(user_data_dir("kernelscope"))


def normalize_uuid(uuid: str) -> str:
    """NVML's form ``GPU-xxxxxxxx-...`` for a UUID given with or without the prefix."""
    u = uuid.strip()
    if u.lower() == "cpu":
        return "cpu"
    return u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}"


def calibration_path(uuid: str, root: Path | None = None) -> Path:
    """Where the calibration of ``uuid`` is stored."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", normalize_uuid(uuid))
    return (root or data_dir()) / "calibration" / f"{safe}.json"


def save_calibration(cal: Calibration, root: Path | None = None) -> Path:
    """Write atomically; return the path.

    Raises:
        CalibrationError: the data folder is not writable.
    """
    path = calibration_path(cal.gpu_uuid, root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(cal.to_dict(), indent=1))
        tmp.replace(path)
    except OSError as exc:
        raise CalibrationError(f"Cannot save the calibration in {path.parent} ({exc.strerror or exc}); "
                               "set KERNELSCOPE_DATA to a writable folder.") from None
    return path


def _current_gpu_uuid() -> str | None:
    from engine.telemetry.nvml import Nvml

    nvml = Nvml()
    if nvml.lib is None or nvml.query("nvmlInit", default=False) is False:
        return None
    try:
        handle = nvml.query("nvmlDeviceGetHandleByIndex", 0)
        raw = nvml.query("nvmlDeviceGetUUID", handle) if handle is not None else None
    finally:
        nvml.query("nvmlShutdown")
    if raw is None:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def load_calibration(uuid: str | None = None, root: Path | None = None) -> Calibration | None:
    """The stored calibration for a GPU.

    Args:
        uuid: GPU UUID (with or without ``GPU-``), or ``cpu``. None: GPU 0 as NVML sees it, and
            when there is no GPU/driver, the most recently measured calibration stored.
        root: Data dir override (default :func:`data_dir`).

    Returns:
        The calibration, or None when none is stored for that GPU.

    Raises:
        CalibrationError: the stored file is not a calibration (damaged or foreign).
    """
    if uuid is None:
        uuid = _current_gpu_uuid()
    if uuid is not None:
        path = calibration_path(uuid, root)
        if not path.exists():
            return None
    else:
        files = sorted((root or data_dir()).glob("calibration/*.json"), key=lambda p: p.stat().st_mtime)
        if not files:
            return None
        path = files[-1]
    try:
        doc = json.loads(path.read_text())
        if doc.get("schema") != SCHEMA:
            raise ValueError("schema")
        return Calibration.from_dict(doc)
    except (OSError, ValueError, TypeError, AttributeError):
        raise CalibrationError(f"The calibration file {path} is damaged or not a Kernelscope calibration; "
                               "delete it and run `kernelscope calibrate` again.") from None


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
    from engine.sessions.bench import _torch, measure

    torch = _torch()
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
    from engine.sessions.bench import _torch

    torch = _torch()
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
        uuid = normalize_uuid(str(raw_uuid)) if raw_uuid is not None else _current_gpu_uuid() or "GPU-unknown"
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
