"""Achieved throughput of every memory copy, and the ceilings to compare it with.

Every row of the ``memcpy`` table becomes one transfer with its achieved rate (bytes / duration),
its direction (from ``copyKind``, as nsys labels it) and the memory kind that limits it: the host
side of a host<->device copy (Pageable or Pinned: pageable copies are staged through a driver
buffer and run at a fraction of the pinned rate), ``Device`` for device-to-device copies.

Ceilings come from a calibration of this machine when one exists for the report's GPU
(``engine.sessions.calibrate.load_calibration``, imported lazily and optional), otherwise from the
GPU's specification (``resources/gpu_specs.toml``, matched by the GPU name in the report).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

#: (direction, memory) -> the calibration attribute holding its measured ceiling.
CALIBRATION_FIELDS: dict[tuple[str, str], str] = {
    ("Host-to-Device", "Pinned"): "h2d_pinned_bytes_per_s",
    ("Host-to-Device", "Pageable"): "h2d_pageable_bytes_per_s",
    ("Device-to-Host", "Pinned"): "d2h_pinned_bytes_per_s",
    ("Device-to-Host", "Pageable"): "d2h_pageable_bytes_per_s",
    ("Device-to-Device", "Device"): "d2d_copy_bytes_per_s",
}

#: A copy that would take less than this at its ceiling is latency-bound: its fixed per-copy cost (a
#: few microseconds of DMA setup and completion) sets its time, not the bandwidth, so a percentage
#: of the ceiling says nothing about it (a 4-byte ``loss.item()`` "reaches" 0.003 % of 64 GB/s).
LATENCY_NS = 1_000.0
#: ... and when the transfer at the ceiling would be less than this share of the copy's duration.
LATENCY_SHARE = 0.25
#: Without a ceiling (unified memory), copies up to this size count as latency-bound.
LATENCY_BYTES = 64 * 1024

TRANSFER_COLUMNS = [
    "start", "end", "duration_ns", "bytes", "bytes_per_s", "gb_per_s", "direction", "memory",
    "kind", "copyKind", "srcKindName", "dstKindName", "deviceId", "streamId", "correlationId",
]


@dataclass(frozen=True)
class GpuSpec:
    """Published numbers of one GPU model (see ``resources/gpu_specs.toml``)."""

    key: str
    name: str
    match: str
    source: str
    memory: str
    hbm_bytes_per_s: float
    pcie_gen: int
    pcie_bytes_per_s_per_direction: float
    flop_per_s: dict[str, float]  # precision ("fp64", "fp32", "bf16_tensor", ...) -> FLOP/s


@dataclass(frozen=True)
class Ceiling:
    """The best rate one kind of copy can reach on this GPU, and where that number comes from."""

    direction: str
    memory: str
    bytes_per_s: float
    source: str  # "calibration" or "spec"
    label: str  # short text for a chart: "PCIe Gen5 x16 (spec) 64.0 GB/s"
    detail: str  # where exactly the number comes from

    @property
    def gb_per_s(self) -> float:
        """The ceiling in GB/s (1e9 bytes per second)."""
        return self.bytes_per_s / 1e9


# ---------------------------------------------------------------------------------------------
# Specification data


def _load_toml(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    data: dict[str, Any] = tomllib.loads(text)
    return data


@lru_cache(maxsize=1)
def gpu_specs() -> tuple[GpuSpec, ...]:
    """Every GPU model in ``resources/gpu_specs.toml``, in matching order."""
    text = (files("resources") / "gpu_specs.toml").read_text(encoding="utf-8")
    out = []
    for g in _load_toml(text)["gpu"]:
        flops = {k[: -len("_flop_per_s")]: float(v) for k, v in g.items() if k.endswith("_flop_per_s")}
        out.append(GpuSpec(
            key=str(g["key"]), name=str(g["name"]), match=str(g["match"]), source=str(g["source"]),
            memory=str(g["memory"]), hbm_bytes_per_s=float(g["hbm_bytes_per_s"]),
            pcie_gen=int(g["pcie_gen"]),
            pcie_bytes_per_s_per_direction=float(g["pcie_bytes_per_s_per_direction"]),
            flop_per_s=flops,
        ))
    return tuple(out)


def gpu_spec(name: str | None) -> GpuSpec | None:
    """The specification of the GPU called ``name`` (as a report names it), or None if unknown."""
    if not name:
        return None
    for spec in gpu_specs():
        if re.search(spec.match, name, re.IGNORECASE):
            return spec
    return None


# ---------------------------------------------------------------------------------------------
# Transfers


def _direction(operation: str, copy_kind: Any) -> str:
    if operation:
        return operation
    return {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device", 10: "Peer-to-Peer"}.get(
        int(copy_kind) if copy_kind is not None and not _isnan(copy_kind) else -1, "Other")


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def memory_kind(direction: str, src: str, dst: str) -> str:
    """The memory kind that limits a copy: the host side for host<->device copies, else Device.

    Args:
        direction: "Host-to-Device", "Device-to-Host", "Device-to-Device", ...
        src: the source memory kind name ("Pageable", "Pinned", "Device", ...).
        dst: the destination memory kind name.

    """
    if direction.startswith(("Host-to", "Unified Host")):
        return src
    if direction.endswith("to-Host"):
        return dst
    return src if src == dst else f"{src}->{dst}"


def transfers(trace: Trace) -> pd.DataFrame:
    """One row per memory copy with its achieved rate, direction and limiting memory kind.

    Columns: :data:`TRANSFER_COLUMNS`. ``bytes_per_s`` is ``bytes / duration`` (NaN for a copy of
    zero duration), ``gb_per_s`` the same in 1e9 bytes per second, ``kind`` is
    "<direction> · <memory>". Rows are in start order.
    """
    import pandas as pd

    mc = trace.table("memcpy", ["start", "end", "bytes", "copyKind", "operation", "srcKindName",
                                "dstKindName", "deviceId", "streamId", "correlationId"])
    if not len(mc):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("bytes_per_s", "gb_per_s") else "object")
                             for c in TRANSFER_COLUMNS})
    start = mc["start"].to_numpy(dtype=np.int64)
    end = mc["end"].to_numpy(dtype=np.int64)
    dur = end - start
    nbytes = mc["bytes"].to_numpy(dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(dur > 0, nbytes / np.where(dur > 0, dur, 1) * 1e9, np.nan)
    keys = pd.DataFrame({
        "operation": mc["operation"].astype(object).where(mc["operation"].notna(), "").astype(str),
        "copyKind": mc["copyKind"].to_numpy(dtype=object),
        "src": mc["srcKindName"].astype(object).where(mc["srcKindName"].notna(), "Unknown").astype(str),
        "dst": mc["dstKindName"].astype(object).where(mc["dstKindName"].notna(), "Unknown").astype(str),
    })
    # Classify the few distinct combinations, then map back to the (possibly many) rows.
    combos = keys.drop_duplicates().reset_index(drop=True)
    combos["direction"] = [_direction(o, k) for o, k in zip(combos["operation"], combos["copyKind"],
                                                             strict=True)]
    combos["memory"] = [memory_kind(d, s, t) for d, s, t in zip(combos["direction"], combos["src"],
                                                                combos["dst"], strict=True)]
    merged = keys.merge(combos, how="left", on=["operation", "copyKind", "src", "dst"])
    direction = merged["direction"].to_numpy(dtype=object)
    memory = merged["memory"].to_numpy(dtype=object)
    out = pd.DataFrame({
        "start": start, "end": end, "duration_ns": dur, "bytes": nbytes,
        "bytes_per_s": rate, "gb_per_s": rate / 1e9,
        "direction": direction, "memory": memory,
        "kind": [f"{d} · {m}" for d, m in zip(direction, memory, strict=True)],
        "copyKind": mc["copyKind"].to_numpy(), "srcKindName": mc["srcKindName"].to_numpy(),
        "dstKindName": mc["dstKindName"].to_numpy(), "deviceId": mc["deviceId"].to_numpy(),
        "streamId": mc["streamId"].to_numpy(), "correlationId": mc["correlationId"].to_numpy(),
    })
    return out.sort_values("start", kind="stable").reset_index(drop=True)


STATS_COLUMNS = [
    "direction", "memory", "kind", "count", "bytes", "total_ns", "gb_per_s", "median_gb_per_s",
    "p10_gb_per_s", "p90_gb_per_s", "min_gb_per_s", "max_gb_per_s", "ceiling_gb_per_s",
    "ceiling_source", "pct_of_ceiling", "median_bytes", "latency_bound", "latency_ns", "l2_resident",
    "rating", "note", "union_ns",
]


def latency_bound(nbytes: np.ndarray, duration_ns: np.ndarray,
                  ceiling_bytes_per_s: float | None) -> np.ndarray:
    """Which copies are latency-bound: their fixed per-copy cost, not the bandwidth, sets their time.

    A copy is when at its ceiling it would take under :data:`LATENCY_NS` and under a quarter of the
    time it took (the rest, three quarters or more, is the fixed cost). Without a ceiling, copies
    of at most :data:`LATENCY_BYTES` are.
    """
    if ceiling_bytes_per_s is None or not ceiling_bytes_per_s > 0:
        return np.asarray(nbytes <= LATENCY_BYTES)
    at_ceiling = nbytes * 1e9 / ceiling_bytes_per_s
    return np.asarray((at_ceiling < LATENCY_NS) & (at_ceiling < LATENCY_SHARE * duration_ns))


def l2_resident(direction: str, nbytes: np.ndarray, l2_bytes: float | None) -> np.ndarray:
    """Which device-to-device copies stay in L2: source and destination together fit in it."""
    if not l2_bytes or direction != "Device-to-Device":
        return np.zeros(len(nbytes), dtype=bool)
    return np.asarray(2 * nbytes <= l2_bytes)


def kind_stats(xfers: pd.DataFrame, ceilings: list[Ceiling] | None = None,
               l2_bytes: float | None = None) -> pd.DataFrame:
    """Per (direction, memory): count, bytes, time, aggregate and per-copy rates, share of ceiling.

    ``total_ns`` is the copies' durations summed (concurrent copies each count: a sum, which can
    exceed the capture); ``union_ns`` is the time at least one of them ran (the summary's part of
    GPU busy time for the same copies). ``gb_per_s`` is total bytes over ``total_ns`` (what the
    copies achieved together); the median, p10/p90, min and max are over the per-copy rates.
    ``pct_of_ceiling`` compares the aggregate rate with the matching ceiling (NaN when there is
    none, and when every copy is latency-bound: a share of the bandwidth means nothing for copies
    whose time is their fixed cost).
    ``latency_bound`` counts the copies :func:`latency_bound` calls so, ``latency_ns`` is their
    median duration (the per-copy latency); ``l2_resident`` counts device-to-device copies whose
    source and destination fit in the GPU's L2 (``l2_bytes``): they can run above the HBM ceiling.
    ``rating`` is "latency-bound" or "L2-resident" (every copy), "bandwidth" (none) or "mixed";
    ``note`` says it in words, with the numbers.
    """
    import pandas as pd

    from engine.analysis.tables import union_sorted

    rows = []
    ceil = {(c.direction, c.memory): c for c in ceilings or []}
    for (direction, memory), g in xfers.groupby(["direction", "memory"], sort=True):
        total_ns = int(g["duration_ns"].sum())
        starts = g["start"].to_numpy(dtype=np.int64)
        order = np.argsort(starts, kind="stable")  # (transfers are in start order already)
        union_ns = union_sorted(starts[order], g["end"].to_numpy(dtype=np.int64)[order])
        nbytes = int(g["bytes"].sum())
        per = g["gb_per_s"].dropna().to_numpy(dtype=float)
        agg = nbytes / total_ns if total_ns else math.nan  # bytes/ns == GB/s
        c = ceil.get((str(direction), str(memory)))
        b = g["bytes"].to_numpy(dtype=float)
        durations = g["duration_ns"].to_numpy(dtype=float)
        lat = latency_bound(b, durations, c.bytes_per_s if c else None)
        l2 = l2_resident(str(direction), b, l2_bytes) & ~lat
        pct = 100.0 * agg / c.gb_per_s if c and not math.isnan(agg) else math.nan
        row = {
            "direction": direction, "memory": memory, "kind": f"{direction} · {memory}",
            "count": len(g), "bytes": nbytes, "total_ns": total_ns, "gb_per_s": agg,
            "median_gb_per_s": float(np.median(per)) if len(per) else math.nan,
            "p10_gb_per_s": float(np.percentile(per, 10)) if len(per) else math.nan,
            "p90_gb_per_s": float(np.percentile(per, 90)) if len(per) else math.nan,
            "min_gb_per_s": float(per.min()) if len(per) else math.nan,
            "max_gb_per_s": float(per.max()) if len(per) else math.nan,
            "ceiling_gb_per_s": c.gb_per_s if c else math.nan,
            "ceiling_source": c.source if c else "",
            "pct_of_ceiling": math.nan if lat.all() else pct,
            "median_bytes": float(np.median(b)) if len(b) else math.nan,
            "latency_bound": int(lat.sum()),
            "latency_ns": float(np.median(durations[lat])) if lat.any() else math.nan,
            "l2_resident": int(l2.sum()),
            "rating": ("latency-bound" if lat.all() else "L2-resident" if l2.all() else
                       "bandwidth" if not (lat | l2).any() else "mixed"),
            "union_ns": union_ns,
        }
        row["note"] = _note(row, c, l2_bytes, b, lat, l2)
        rows.append(row)
    return pd.DataFrame(rows, columns=STATS_COLUMNS)


def _nbytes(b: float) -> str:
    """Decimal byte sizes: '4 B', '1.6 MB', '52.4 MB' (the engine's one formatter)."""
    from engine.analysis.summary_text import fmt_bytes

    return fmt_bytes(b)


def _time(ns: float) -> str:
    """A short duration: '0.06 ns', '768 ns', '2.4 µs', '1.5 ms' (never '0.0 µs', never '6e-05 ns')."""
    from engine.analysis.summary_text import fmt_number, fmt_time

    if ns < 1:
        return f"{fmt_number(ns)} ns"
    return f"{ns:,.0f} ns" if ns < 1000 else fmt_time(ns)


def _note(row: dict[str, Any], c: Ceiling | None, l2_bytes: float | None, b: np.ndarray, lat: np.ndarray,
          l2: np.ndarray) -> str:
    """What one kind's rate means: latency-bound copies, L2-resident ones, a rate above its ceiling."""
    n = int(row["count"])
    parts = []
    if lat.any():
        biggest = float(b[lat].max())
        lat_text = f"{_time(row['latency_ns'])} per copy (median)"
        if lat.all():
            at = (f"; at the {c.gb_per_s:,.0f} GB/s ceiling even the largest ({_nbytes(biggest)}) would take "
                  f"{_time(biggest * 1e9 / c.bytes_per_s)}, so the per-copy cost sets the time, not the "
                  "bandwidth" if c else "")
            parts.append(f"latency-bound: {_nbytes(row['median_bytes'])} per copy, {lat_text}{at}")
        else:
            parts.append(f"{int(lat.sum())} of {n} copies latency-bound (≤ {_nbytes(biggest)}, "
                         f"{lat_text})")
    if l2.any() and l2_bytes:
        parts.append(f"{int(l2.sum())} of {n} copies L2-resident (≤ {_nbytes(float(b[l2].max()))}: source "
                     f"and destination fit in the {_nbytes(l2_bytes)} L2, which is faster than HBM)")
    pct = row["pct_of_ceiling"]
    if isinstance(pct, float) and not math.isnan(pct) and pct > 100.0 and c is not None:
        why = ("copies that stay in L2 run above the HBM rate" if l2.any() else
               f"the {c.source} ceiling is below what these copies reach; measure it again with "
               "`kernelscope calibrate`")
        parts.insert(0, f"above the {c.source} ceiling ({pct:,.0f} %): {why}")
    return "; ".join(parts)


def histogram(xfers: pd.DataFrame, bins: int = 30, log: bool = True) -> pd.DataFrame:
    """Counts of copies per rate bin, for each (direction, memory) kind, on shared bin edges.

    Args:
        xfers: the output of :func:`transfers`.
        bins: number of bins spanning the smallest to the largest rate.
        log: logarithmically spaced bins (rates span orders of magnitude), else linear.

    Returns:
        Columns kind, direction, memory, bin, lo_gb_per_s, hi_gb_per_s, count, bytes; one row per
        kind and bin (bins with no copies included, so every kind has the same bins).

    """
    import pandas as pd

    cols = ["kind", "direction", "memory", "bin", "lo_gb_per_s", "hi_gb_per_s", "count", "bytes"]
    x = xfers[xfers["gb_per_s"].notna() & (xfers["gb_per_s"] > 0)]
    if not len(x):
        return pd.DataFrame(columns=cols)
    rates = x["gb_per_s"].to_numpy(dtype=float)
    lo, hi = float(rates.min()), float(rates.max())
    if hi <= lo:
        lo, hi = lo * 0.95, hi * 1.05
    edges = np.geomspace(lo, hi, bins + 1) if log else np.linspace(lo, hi, bins + 1)
    rows = []
    for (direction, memory), g in x.groupby(["direction", "memory"], sort=True):
        r = g["gb_per_s"].to_numpy(dtype=float)
        counts, _ = np.histogram(r, bins=edges)
        sums, _ = np.histogram(r, bins=edges, weights=g["bytes"].to_numpy(dtype=float))
        for i in range(bins):
            rows.append({"kind": f"{direction} · {memory}", "direction": direction, "memory": memory,
                         "bin": i, "lo_gb_per_s": float(edges[i]), "hi_gb_per_s": float(edges[i + 1]),
                         "count": int(counts[i]), "bytes": int(sums[i])})
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------------------------------------
# Ceilings


#: The last sentence explaining why a stored calibration could not be used (shown as a note).
_calibration_problem: dict[str, str] = {}


def _load_calibration(uuid: str | None) -> Any:
    """The calibration of this machine's GPU ``uuid`` (None if none, or if calibration is absent)."""
    try:
        from engine.system.calibration import load_calibration
    except ImportError:
        return None
    try:
        return load_calibration(uuid)
    except Exception as exc:  # noqa: BLE001 - a damaged calibration file must not break the view; use the spec
        _calibration_problem[str(uuid)] = str(exc)
        return None


def report_l2_bytes(trace: Trace) -> float | None:
    """The L2 size of the report's first GPU in bytes (nsys ``TARGET_INFO_GPU.l2CacheSize``), or None."""
    g = trace.table("gpus", ["l2CacheSize"])
    if not len(g) or "l2CacheSize" not in g:
        return None
    try:
        v = float(g["l2CacheSize"].iloc[0])
    except (TypeError, ValueError):
        return None
    return v if v > 0 and not math.isnan(v) else None


def report_gpu(trace: Trace) -> tuple[str | None, str | None]:
    """(GPU name, GPU UUID) of the report's first GPU; None for what the report does not say."""
    g = trace.table("gpus", ["name", "uuid"])
    if not len(g):
        return None, None
    name, uuid = g["name"].iloc[0], g["uuid"].iloc[0]
    name = None if name is None or _isnan(name) else str(name)
    uuid = None if uuid is None or _isnan(uuid) else str(uuid)
    return name, uuid


def ceilings(
    gpu_name: str | None,
    gpu_uuid: str | None = None,
    *,
    calibration: Any = None,
    use_calibration: bool = True,
) -> list[Ceiling]:
    """The ceilings for host<->device and device-to-device copies on one GPU.

    A measured value from the calibration wins where it exists; otherwise the spec is used: PCIe
    per direction for host<->device copies (pinned and pageable alike: pageable copies have no
    published ceiling, PCIe is the hard limit), and half the HBM bandwidth for device-to-device
    copies (each copied byte is read and written once).

    Args:
        gpu_name: the GPU's name as the report gives it ("NVIDIA H200").
        gpu_uuid: its UUID, used to find the calibration of that very GPU.
        calibration: a calibration object to use instead of loading one (fields such as
            ``h2d_pinned_bytes_per_s``; missing or None fields fall back to the spec).
        use_calibration: False to ignore calibrations (spec only).

    """
    cal = calibration
    if cal is None and use_calibration and gpu_uuid:
        # Without the report's UUID a calibration could belong to another GPU: use the spec.
        cal = _load_calibration(gpu_uuid)
    spec = gpu_spec(gpu_name)
    out: list[Ceiling] = []
    for (direction, memory), attr in CALIBRATION_FIELDS.items():
        measured = getattr(cal, attr, None) if cal is not None else None
        if isinstance(measured, (int, float)) and measured > 0 and not math.isnan(float(measured)):
            where = getattr(cal, "gpu_name", None) or getattr(cal, "name", None) or "this GPU"
            when = getattr(cal, "measured_at", None)
            detail = f"measured by `kernelscope calibrate` on {where}" + (f" ({when})" if when else "")
            out.append(Ceiling(direction, memory, float(measured), "calibration",
                               f"calibrated {float(measured) / 1e9:,.1f} GB/s", detail))
            continue
        if spec is None:
            continue
        if direction == "Device-to-Device":
            v = spec.hbm_bytes_per_s / 2
            out.append(Ceiling(direction, memory, v, "spec",
                               f"{spec.memory} {spec.hbm_bytes_per_s / 1e12:.2f} TB/s ÷ 2 (spec) "
                               f"{v / 1e9:,.0f} GB/s",
                               f"{spec.source}: {spec.memory} bandwidth / 2, a copy reads and writes"))
        else:
            v = spec.pcie_bytes_per_s_per_direction
            out.append(Ceiling(direction, memory, v, "spec",
                               f"PCIe Gen{spec.pcie_gen} x16 (spec) {v / 1e9:,.0f} GB/s",
                               f"{spec.source}: PCIe Gen{spec.pcie_gen} x16 per direction"))
    return out


def trace_ceilings(trace: Trace, *, calibration: Any = None, use_calibration: bool = True) -> list[Ceiling]:
    """:func:`ceilings` for the GPU named in ``trace`` (empty when the GPU is unknown)."""
    name, uuid = report_gpu(trace)
    return ceilings(name, uuid, calibration=calibration, use_calibration=use_calibration)


@dataclass(frozen=True)
class BandwidthAnalysis:
    """Everything the Bandwidth view shows for one report (typed tables; ``to_json()`` for JSON)."""

    transfers: pd.DataFrame
    stats: pd.DataFrame
    histogram: pd.DataFrame
    ceilings: list[Ceiling]
    gpu_name: str | None
    notes: list[str]
    l2_bytes: float | None = None  # the GPU's L2 (what decides whether a device copy stays in it)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (schema ``kernelscope.bandwidth/1``, strict JSON: null, never NaN).

        The per-kind statistics, the histogram and the ceilings; the per-copy table is summarised by
        its row count (it can have millions of rows: read it from ``transfers``).
        """
        from dataclasses import asdict

        from engine.analysis.summary_model import strict

        doc: dict[str, Any] = strict({
            "schema": "kernelscope.bandwidth/1", "gpu_name": self.gpu_name, "notes": list(self.notes),
            "l2_bytes": self.l2_bytes,
            "transfers": len(self.transfers),
            "ceilings": [{**asdict(c), "gb_per_s": c.gb_per_s} for c in self.ceilings],
            "stats": self.stats.to_dict("records"), "histogram": self.histogram.to_dict("records"),
        })
        return doc


def analyze(trace: Trace, *, calibration: Any = None, use_calibration: bool = True,
            bins: int = 30) -> BandwidthAnalysis:
    """Transfers, per-kind statistics, histogram and ceilings of a report, with notes for people.

    The notes say in words what is missing: no copies recorded, no GPU name, a GPU without
    specification data.
    """
    x = transfers(trace)
    name, uuid = report_gpu(trace)
    _calibration_problem.pop(str(uuid), None)
    ceil = ceilings(name, uuid, calibration=calibration, use_calibration=use_calibration)
    notes: list[str] = []
    if str(uuid) in _calibration_problem:
        notes.append(_calibration_problem.pop(str(uuid)))
    if not len(x):
        why = trace.missing.get("memcpy")
        notes.append(f"This report has no memory copies ({why})." if why
                     else "This report has no memory copies.")
    if name is None:
        notes.append("The report does not name its GPU, so no ceilings can be drawn.")
    elif not ceil:
        notes.append(f"No specification data for {name} and no calibration; "
                     "run `kernelscope calibrate` on that machine to measure its ceilings.")
    elif all(c.source == "spec" for c in ceil):
        notes.append("Ceilings are the GPU's specification; run `kernelscope calibrate` on that "
                     "machine for measured ones.")
    l2 = report_l2_bytes(trace)
    return BandwidthAnalysis(x, kind_stats(x, ceil, l2), histogram(x, bins=bins), ceil, name, notes, l2)
