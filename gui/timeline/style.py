"""Colours and texts of the timeline (no Qt): which colour an event gets, tooltips, details."""

from __future__ import annotations

import math
from typing import Any

from gui import format as fmt

#: colours by index; events store an index into this list
PALETTE = (
    "#3a7bd5",  # 0 kernel
    "#d35400",  # 1 memcpy host-to-device
    "#8e44ad",  # 2 memcpy device-to-host
    "#16a085",  # 3 memcpy device-to-device / peer
    "#7f8c8d",  # 4 memcpy other
    "#d4a017",  # 5 memset
    "#c0392b",  # 6 API: synchronization
    "#7b8d42",  # 7 API: copies and memsets
    "#2e9e5b",  # 8 API: launches
    "#a0522d",  # 9 API: allocation
    "#95a5a6",  # 10 API: other
    "#e67e22",  # 11 NVTX
)
#: colour of each event kind when a lane is drawn aggregated (model.KIND_*). Copies of every direction
#: and API calls of every category are merged there, so they get colours of their own (not H→D's or
#: D→H's), each with a legend entry
API_COVERAGE_COLOR = "#34495e"
COPY_COVERAGE_COLOR = "#ad1457"
KIND_COLORS = {0: "#3a7bd5", 1: COPY_COVERAGE_COLOR, 2: "#d4a017", 3: API_COVERAGE_COLOR, 4: "#e67e22"}
GROUP_TINT = {"api": "#f6f3fa", "gpu": "#f2f6fc", "nvtx": "#fdf6ee", "metric": "#f0f7f9"}


def color_index(kind: int, name: str) -> int:
    """The palette index of an event of kind ``kind`` (model.KIND_*) called ``name``."""
    if kind == 0:
        return 0
    if kind == 1:
        if "Host-to-Device" in name:
            return 1
        if "Device-to-Host" in name:
            return 2
        if "Device-to-Device" in name or "Peer" in name:
            return 3
        return 4
    if kind == 2:
        return 5
    if kind == 3:
        low = name.lower()
        if "synchron" in low or "wait" in low or "query" in low:
            return 6
        if "memcpy" in low or "memset" in low:
            return 7
        if "launch" in low:
            return 8
        if "alloc" in low or "free" in low or "malloc" in low:
            return 9
        return 10
    return 11


def time_point(ns: float) -> str:
    """A time since capture start to the microsecond: '616.956 ms' (durations use gui.format)."""
    return f"{ns / 1e6:,.3f} ms"


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _dims(rec: dict[str, Any], prefix: str) -> str:
    parts = [_num(rec.get(f"{prefix}{a}")) for a in "XYZ"]
    if any(p is None for p in parts):
        return "–"
    return " × ".join(str(int(p)) for p in parts if p is not None)


def bandwidth(rec: dict[str, Any]) -> float | None:
    """Bytes per second of a copy or memset (None when unknown or instantaneous)."""
    b = _num(rec.get("bytes"))
    d = float(rec["end"] - rec["start"])
    if b is None or d <= 0:
        return None
    return b / (d * 1e-9)


def fmt_bandwidth(bps: float | None) -> str:
    if bps is None:
        return "–"
    return f"{bps / 1e9:,.2f} GB/s" if bps >= 1e8 else f"{bps / 1e6:,.1f} MB/s"


def facts(rec: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines describing one event, in the order the details panel shows them."""
    kind = rec["kind"]
    dur = rec["end"] - rec["start"]
    out: list[tuple[str, str]] = [("Kind", {
        "kernel": "CUDA kernel", "memcpy": "Memory copy", "memset": "Memset",
        "api": "CUDA API call", "nvtx": "NVTX range", "metric": "GPU metric sample",
    }[kind])]
    if kind == "metric":
        out += [("Value", f"{rec['value']:,.4g} {rec['unit']}".rstrip()),
                ("At", time_point(rec["start"]))]
        return out
    out += [("Duration", fmt.duration(dur)), ("Start", time_point(rec["start"])),
            ("End", time_point(rec["end"]))]
    if kind == "kernel":
        out += [("Grid", _dims(rec, "grid")), ("Block", _dims(rec, "block")),
                ("Registers / thread", fmt.cell(rec.get("registersPerThread"), 0)),
                ("Shared memory", f"{fmt.nbytes(_num(rec.get('staticSharedMemory')))} static, "
                                  f"{fmt.nbytes(_num(rec.get('dynamicSharedMemory')))} dynamic")]
    if kind in ("memcpy", "memset"):
        out += [("Bytes", fmt.nbytes(_num(rec.get("bytes")))),
                ("Bandwidth", fmt_bandwidth(bandwidth(rec)))]
    if kind == "memcpy":
        out += [("Direction", str(rec.get("operation") or "–")),
                ("Memory", f"{rec.get('srcKindName') or '?'} → {rec.get('dstKindName') or '?'}")]
    if kind == "memset":
        out += [("Memory", str(rec.get("memKindName") or "–"))]
    if kind in ("kernel", "memcpy", "memset"):
        out += [("Device / stream", f"{_int(rec.get('deviceId'))} / {_int(rec.get('streamId'))}")]
    if kind in ("kernel", "memcpy", "memset", "api"):
        out += [("Correlation id", _int(rec.get("correlationId")))]
    if kind in ("api", "nvtx"):
        out += [("Process / thread", f"{_int(rec.get('pid'))} / {_int(rec.get('tid'))}")]
    if kind == "nvtx" and rec.get("domain"):
        out += [("Domain", str(rec["domain"]))]
    return out


def _int(v: Any) -> str:
    f = _num(v)
    return "–" if f is None else str(int(f))


def tooltip_text(rec: dict[str, Any]) -> str:
    """The hover tooltip: the name on the first line, then the facts that matter for its kind."""
    keep = {"Duration", "Grid", "Block", "Bytes", "Bandwidth", "Direction", "Value", "At"}
    lines = [str(rec["name"])]
    lines += [f"{k}: {v}" for k, v in facts(rec) if k in keep]
    return "\n".join(lines)
