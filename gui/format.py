"""How numbers look in the GUI: durations, byte counts, rates, counts with thousands separators.

Pure functions, no Qt and no pandas, so views and tests share one formatting. Nothing here writes
scientific notation ("1.8e-08 GB"): a quantity takes the unit that suits it (:func:`nbytes`,
:func:`duration`, :func:`rate`), a bare number stays positional (:func:`decimal`).
"""

from __future__ import annotations

import math
from typing import Any

from engine.analysis.summary_text import fmt_bytes, fmt_pct, fmt_rate, fmt_time


def duration(ns: float | int | None) -> str:
    """A duration as every page prints it (the engine's one formatter): 78.9 µs, 252.04 ms, 1.61 s.

    Seconds stay seconds past a minute ('155.30 s', not '2 min 35.3 s'): the time axes count in
    seconds, and a header above one must read in the same unit.
    """
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    return fmt_time(float(ns))


def percent(p: float | None, digits: int = 1) -> str:
    """'39.8 %', '< 0.1 %' for a tiny non-zero share, or '–' when unknown."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "–"
    return fmt_pct(float(p), digits)


def nbytes(b: float | int | None) -> str:
    """Decimal byte sizes as nsys prints them (the engine's formatter): 512 B, 83.9 MB, 1.88 GB."""
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return "–"
    return fmt_bytes(float(b))


def rate(bytes_per_s: float | int | None) -> str:
    """A transfer rate (the engine's formatter): '1,262.78 GB/s', '3.1 MB/s', '4 B/s'."""
    if bytes_per_s is None or (isinstance(bytes_per_s, float) and math.isnan(bytes_per_s)):
        return "–"
    return fmt_rate(float(bytes_per_s))


def decimal(v: float, digits: int = 1) -> str:
    """A number in positional notation, never scientific: '0.00264', '1,262.8', '4.0'.

    Below ``10 ** -digits`` it keeps three significant digits ('0.000000488', not '4.88e-07').
    """
    f = float(v)
    if f != 0 and abs(f) < 10 ** -digits:
        places = min(-math.floor(math.log10(abs(f))) + 2, 15)
        return f"{f:.{places}f}"
    return f"{f:,.{digits}f}"


def distinct(items: list[str]) -> list[str]:
    """Each distinct text once, in first-seen order, with its count when repeated.

    The eight identical GPUs a Kineto trace lists read '8 × NVIDIA H100 80GB HBM3 (132 SMs)', not
    the same name eight times.
    """
    counts: dict[str, int] = {}
    for t in items:
        counts[t] = counts.get(t, 0) + 1
    return [f"{n} × {t}" if n > 1 else t for t, n in counts.items()]


def count(n: int | float | None) -> str:
    """An integer count with thousands separators."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "–"
    return f"{int(n):,}"


def is_missing(v: Any) -> bool:
    """None, NaN, pandas NA / NaT."""
    if v is None:
        return True
    if type(v).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(v, float) and math.isnan(v)


def is_number(v: Any) -> bool:
    """True for ints and floats (numpy scalars included), False for bools and everything else."""
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    # numpy scalars without importing numpy here
    return type(v).__module__ == "numpy" and hasattr(v, "dtype") and v.dtype.kind in "iuf"


def cell(v: Any, decimals: int = 1, separators: bool = True) -> str:
    """A table cell: integers with thousands separators, floats with ``decimals``, text as is."""
    if v is None:
        return ""
    if is_number(v):
        f = float(v)
        if math.isnan(f):
            return ""
        if math.isinf(f):
            return "∞" if f > 0 else "-∞"
        kind = getattr(getattr(v, "dtype", None), "kind", None)
        if isinstance(v, int) or kind in ("i", "u"):
            return f"{int(v):,}" if separators else str(int(v))
        return decimal(f, decimals)
    if type(v).__name__ in ("NAType", "NaTType"):
        return ""
    return str(v)


#: report kind (engine ``TraceInfo.kind``) -> what to call it
KIND_LABELS = {
    "nsys-sqlite": "Nsight Systems SQLite export",
    "nsys-rep": "Nsight Systems report",
    "kineto": "PyTorch profiler trace",
    "ncu": "Nsight Compute report",
}


def producer(kind: str, version: str | None) -> str:
    """'Nsight Systems 2025.3.2.0' for nsys reports; the version text as is otherwise."""
    if not version:
        return "unknown"
    if kind.startswith("nsys") and version[:1].isdigit():
        return f"Nsight Systems {version}"
    return version


def seconds_text(s: float) -> str:
    """An elapsed time: '850 ms', '12.30 s', '3 min 05 s', '1 h 02 min'."""
    if s < 60:
        return duration(s * 1e9)
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _si(v: float, unit: str, digits: int = 2) -> str:
    for scale, prefix in _SI:
        if abs(v) >= scale:
            return f"{v / scale:,.{digits}f} {prefix}{unit}"
    return f"{v:,.{digits}f} {unit}"


def human_value(value: float | int | None, unit: str | None) -> str | None:
    """An Nsight Compute metric in the unit a person reads, or None to keep ncu's own text.

    ncu's base units become scaled ones: 1,781,904,156.7 hz -> '1.78 GHz', 1.25e12 byte/s ->
    '1.25 TB/s', 46,816 ns -> '46.8 µs', 58,555,904 byte -> '58.6 MB' ('byte/block' keeps its
    '/block'). The base value stays available to the caller (tooltips and copies show it).
    """
    if value is None or unit is None or is_missing(value) or not is_number(value):
        return None
    v = float(value)
    if unit == "hz":
        return _si(v, "Hz")
    if unit in ("byte/s", "byte/second"):
        return _si(v, "B/s")
    if unit in ("ns", "nsecond"):
        return duration(v)
    if unit in ("us", "usecond"):
        return duration(v * 1e3)
    if unit in ("ms", "msecond"):
        return duration(v * 1e6)
    if unit == "byte" or unit.startswith("byte/"):
        per = unit[len("byte"):]
        return nbytes(v) + per
    return None
