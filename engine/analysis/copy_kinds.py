"""Copies by direction and host memory kind, and their achieved rates (the summary's bandwidth rows)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis import summary_model as sm
from engine.analysis.ops import copy_columns
from engine.analysis.steps import factorize_rows
from engine.analysis.sums import median
from engine.analysis.tables import trace_cache

if TYPE_CHECKING:
    import pandas as pd

    from engine.analysis.ops import CopyColumns
    from engine.reports.base import Trace


def host_kind(row_op: str, src: str, dst: str) -> str:
    """The memory kind that matters for a copy's speed: the host side (or Device for D2D)."""
    if row_op.startswith("Host-to") or row_op.startswith("Unified Host"):
        return str(src)
    if row_op.endswith("to-Host"):
        return str(dst)
    return str(src) if src == dst else f"{src}->{dst}"


def durations(df: pd.DataFrame) -> np.ndarray:
    """Each row's end − start (ns)."""
    d: np.ndarray = df["end"].to_numpy(dtype=np.int64) - df["start"].to_numpy(dtype=np.int64)
    return d


def copy_kinds(trace: Trace, mc: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, str, str]]]:
    """:func:`_kinds` of the trace's copies, computed once per trace (``mc``: its memcpy table)."""
    out: tuple[np.ndarray, list[tuple[str, str, str]]] = trace_cache(trace, "summary_copy_kinds",
                                                                       lambda: _kinds(mc))
    return out


def _kinds(mc: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, str, str]]]:
    """Codes of each copy's (operation, source kind, destination kind), and the distinct triples."""
    codes, uniq = factorize_rows(*(mc[c].astype(str).to_numpy(dtype=object)
                                   for c in ("operation", "srcKindName", "dstKindName")))
    return codes, [(str(o), str(a), str(b)) for o, a, b in uniq]


def _row(op: str, mem: str, count: int, nbytes: int, tot: int, per: np.ndarray) -> sm.BandwidthRow:
    """One bandwidth row: bytes over the summed durations, and the per-copy median, min and max."""
    return sm.BandwidthRow(
        op, mem, count, nbytes, tot, round(nbytes / tot * 1e9, 1) if tot else None,
        round(nbytes / tot, 3) if tot else None, round(median(per), 3),
        round(float(per.min()), 3), round(float(per.max()), 3))


#: copies per step of :func:`bandwidth_columns`
_CHUNK = 1 << 21


def bandwidth_columns(cc: CopyColumns) -> tuple[sm.BandwidthRow, ...]:
    """:func:`bandwidth_rows` from the copies' integer columns (no table of the copies)."""
    if not cc.n:
        return ()
    pairs: dict[tuple[str, str], int] = {}
    lut = np.full(len(cc.kinds) + 1, -1, dtype=np.int16)
    for i, ((op, a, b), known) in enumerate(zip(cc.kinds, cc.known, strict=True)):
        if known:  # an unknown operation is NaN in the table: its copies form no group
            lut[i] = pairs.setdefault((op, host_kind(op, a, b)), len(pairs))
    # a chunk of copies at a time: no full-length group, duration or selection columns (20M copies:
    # ~0.45 GB less at the summary's peak); each group's rates, in row order, for its median
    count, nbytes, total = (np.zeros(len(pairs), dtype=np.int64) for _ in range(3))
    rates: list[list[np.ndarray]] = [[] for _ in pairs]
    for lo in range(0, cc.n, _CHUNK):
        group = lut[cc.codes[lo:lo + _CHUNK]]
        dur = cc.end[lo:lo + _CHUNK] - cc.start[lo:lo + _CHUNK]
        nb_all = cc.nbytes[lo:lo + _CHUNK]
        for k in range(len(pairs)):
            sel = group == k
            d, nb = dur[sel], nb_all[sel]
            count[k] += len(d)
            nbytes[k] += int(nb.sum())
            total[k] += int(d.sum())
            rates[k].append(nb.astype(float) / np.maximum(d.astype(float), 1))
    out = []
    for (op, mem), k in pairs.items():
        per = np.concatenate(rates[k])
        rates[k] = []
        out.append(_row(op, mem, int(count[k]), int(nbytes[k]), int(total[k]), per))
    out.sort(key=lambda b: (b.direction, b.memory))
    return tuple(out)


def bandwidth_rows(trace: Trace) -> tuple[sm.BandwidthRow, ...]:
    """The achieved copy rate per direction and host memory kind (from the integer columns when cached)."""
    cc = copy_columns(trace)
    return bandwidth_columns(cc) if cc is not None else bandwidth_table(trace)


def bandwidth_table(trace: Trace) -> tuple[sm.BandwidthRow, ...]:
    """:func:`bandwidth_rows` from the ``memcpy`` table (traces without the integer columns)."""
    mc = trace.table("memcpy", ["start", "end", "bytes", "operation", "srcKindName", "dstKindName"])
    if not len(mc):
        return ()
    m = mc.assign(duration_ns=durations(mc), nbytes=mc["bytes"].astype(float).fillna(0))
    codes, uniq = copy_kinds(trace, mc)
    m["memory"] = np.array([host_kind(o, a, b) for o, a, b in uniq], dtype=object)[codes]
    out = []
    for (op, mem), g in m.groupby(["operation", "memory"], sort=False):
        tot = int(g["duration_ns"].sum())
        nbytes = int(g["nbytes"].sum())
        per = g["nbytes"].to_numpy(dtype=float) / np.maximum(g["duration_ns"].to_numpy(float), 1)
        out.append(_row(str(op), str(mem), len(g), nbytes, tot, per))
    out.sort(key=lambda b: (b.direction, b.memory))
    return tuple(out)


def with_unions(rows: tuple[sm.BandwidthRow, ...], parts: tuple[sm.GpuPart, ...]
                 ) -> tuple[sm.BandwidthRow, ...]:
    """The rows with the union of their copies: the GPU part of the same direction and memory kind."""
    unions = {p.part: p.union_ns for p in parts}
    return tuple(replace(b, union_ns=unions.get(f"memcpy {b.direction} ({b.memory})")) for b in rows)
