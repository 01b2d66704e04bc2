"""The calibration store: this machine's measured ceilings, one JSON file per GPU UUID.

Saved as ``<data dir>/calibration/<GPU UUID>.json`` (data dir: ``$KERNELSCOPE_DATA`` or the
platformdirs user data dir). Measuring is :mod:`engine.sessions.calibrate`; readers (bandwidth,
roofline, findings) use :func:`load_calibration`. Field names carry their units.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from engine.system.atomic import atomic_write_text
from engine.system.errors import KernelscopeError

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
        atomic_write_text(path, json.dumps(cal.to_dict(), indent=1))
    except OSError as exc:
        raise CalibrationError(f"Cannot save the calibration in {path.parent} ({exc.strerror or exc}); "
                               "set KERNELSCOPE_DATA to a writable folder.") from None
    return path


def current_gpu_uuid() -> str | None:
    """UUID of GPU 0 as NVML reports it, or None without a GPU or driver."""
    from engine.system.nvml import Nvml

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
        uuid = current_gpu_uuid()
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
