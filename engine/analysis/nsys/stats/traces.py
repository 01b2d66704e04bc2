"""``cuda_gpu_trace`` of an nsys SQLite export without pandas.

Columns come from the columnar cache, the CSV from :mod:`.csvfast`: the same bytes as the
DataFrame path and :func:`.output.to_csv`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.csvfast import FixedColumn, IntColumn, TextColumn, to_csv_bytes

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys_sqlite import NsysSqliteTrace

_COMMON = ("start", "end", "correlationId", "deviceId", "contextId", "greenContextId", "streamId")
_KERNEL = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
           "staticSharedMemory", "dynamicSharedMemory")
_TABLES = {
    "kernels": ("CUPTI_ACTIVITY_KIND_KERNEL", (*_COMMON, *_KERNEL)),
    "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", (*_COMMON, "bytes", "copyKind", "srcKind", "dstKind")),
    "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", (*_COMMON, "bytes", "memKind")),
}


class CsvTable:
    """A report already rendered as ``nsys stats --format csv`` text (see :func:`gpu_trace_csv`)."""

    def __init__(self, report: str, text: str, rows: int) -> None:
        self.report, self.text, self.rows = report, text, rows
        self.columns = COLUMNS[report]

    @property
    def empty(self) -> bool:
        """True when the report has no rows."""
        return self.rows == 0

    def __len__(self) -> int:
        return self.rows


def _read(trace: NsysSqliteTrace) -> dict[str, dict[str, npt.NDArray[np.int64]]] | None:
    """The integer columns of the three GPU tables (absent columns read as NULL)."""
    store = trace.column_store()
    pending = {}
    for name, (table, cols) in _TABLES.items():
        if not trace.has_sqlite_table(table):
            continue
        have = set(trace.columns(table))
        exprs = {c: f'"{c}"' if c in have else "NULL" for c in cols}
        if name == "kernels":
            if not {"demangledName", "shortName"} & have:
                return None
            exprs["nameId"] = 'coalesce("demangledName", "shortName")'
        pending[name] = store.read_async(table, exprs)
    return {name: p.result() for name, p in pending.items()}


def gpu_trace_csv(trace: NsysSqliteTrace) -> CsvTable | None:
    """``cuda_gpu_trace`` as CSV text, or None where the general path must handle it (NULL times).

    Rows are sorted by start, then kernels before copies before memsets, then table order
    (a stable sort), as :func:`engine.analysis.nsys.stats.frames._cuda_gpu_trace` sorts them.
    """
    import sqlite3

    import numpy as np

    from engine.reports.columns import NULL
    from engine.reports.nsys_sqlite import _MEM_KIND_LABELS, COPY_KIND_LABELS

    try:
        parts = _read(trace)
    except sqlite3.Error:
        return None
    if parts is None:
        return None
    parts = {k: v for k, v in parts.items() if len(v["start"])}
    if not parts:
        return CsvTable("cuda_gpu_trace", "", 0)
    if any((p["start"] == NULL).any() or (p["end"] == NULL).any() for p in parts.values()):
        return None

    def col(name: str) -> npt.NDArray[np.int64]:
        return np.concatenate([p[name] if name in p else np.full(len(p["start"]), NULL, np.int64)
                               for p in parts.values()])

    kinds = np.concatenate([np.full(len(p["start"]), i, np.int64)
                            for i, p in zip((0, 1, 2), _aligned(parts), strict=True) if p is not None])
    start = col("start")
    order = np.lexsort((kinds, start))
    start = start[order]
    dur = col("end")[order] - start
    kinds = kinds[order]

    def ints(name: str, zero_null: bool = False) -> IntColumn:
        v = col(name)[order]
        null = v == NULL
        if zero_null:
            null |= v == 0
        return IntColumn(v, null if null.any() else None)

    def mb(name: str) -> npt.NDArray[np.float64]:
        v = col(name)[order]
        return np.where(v == NULL, np.nan, v.astype(np.float64) / 1e6)

    nbytes = mb("bytes")
    dur_f = dur.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput = np.where(dur_f > 0, nbytes * (1e9 // dur_f), np.nan)

    # Names: kernels' StringIds, then memcpy operation labels, then "[CUDA memset]".
    strings = trace.strings()
    copy_labels = trace.enum_labels("ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS)
    mem_labels = trace.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)
    labels: list[str] = []
    if "kernels" in parts:
        ids = parts["kernels"]["nameId"]
        uniq, inv = np.unique(ids, return_inverse=True)
        if (uniq == NULL).any() or any(int(i) not in strings for i in uniq.tolist()):
            return None
        labels += [strings[int(i)] for i in uniq.tolist()]
        kernel_codes = inv.astype(np.int64)
    else:
        kernel_codes = np.zeros(0, np.int64)
    memcpy_codes = np.zeros(0, np.int64)
    if "memcpy" in parts:
        ck = parts["memcpy"]["copyKind"]
        uniq, inv = np.unique(ck, return_inverse=True)
        memcpy_codes = inv.astype(np.int64) + len(labels)
        labels += [f"[CUDA memcpy {copy_labels.get(int(k), 'Unknown')}]" for k in uniq.tolist()]
    memset_codes = np.zeros(0, np.int64)
    if "memset" in parts:
        memset_codes = np.full(len(parts["memset"]["start"]), len(labels), np.int64)
        labels.append("[CUDA memset]")
    name_codes = np.concatenate([c for k, c in (("kernels", kernel_codes), ("memcpy", memcpy_codes),
                                                ("memset", memset_codes)) if k in parts])[order]

    # Memory kinds: memcpy src/dst, memset's kind in SrcMemKd.
    kind_ids = sorted(mem_labels)
    lut_size = max([*kind_ids, 0]) + 2

    def kind_codes(vals: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        lut = np.full(lut_size, -1, dtype=np.int64)
        for i, k in enumerate(kind_ids):
            lut[k] = i
        ok = (vals >= 0) & (vals < lut_size - 1)
        return np.where(ok, lut[np.clip(vals, 0, lut_size - 1)], -1)

    kind_names = [mem_labels[k] for k in kind_ids]
    src = col("srcKind") if "memcpy" in parts else None
    mk = col("memKind") if "memset" in parts else None
    src_v = np.full(len(start), NULL, np.int64)
    if src is not None:
        src_v = src
    if mk is not None:
        src_v = np.where(np.concatenate([np.full(len(p["start"]), n == "memset")
                                         for n, p in parts.items()]), mk, src_v)
    src_codes = kind_codes(src_v[order])
    dst_codes = kind_codes(col("dstKind")[order]) if "memcpy" in parts else np.full(len(start), -1)

    gpus = _gpu_names(trace)
    dev = col("deviceId")[order]
    dev_ids = sorted(set(np.unique(dev).tolist()) - {NULL})
    dev_labels = [f"{gpus[d]} ({d})" if d in gpus else f"GPU {d}" for d in dev_ids]
    dev_lut = {d: i for i, d in enumerate(dev_ids)}
    dev_codes = np.full(len(dev), -1, np.int64)
    for d, i in dev_lut.items():
        dev_codes[dev == d] = i

    kern = kinds == 0
    cols: list[IntColumn | FixedColumn | TextColumn] = [
        IntColumn(start), IntColumn(dur), ints("correlationId"),
        *(ints(c) for c in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                            "registersPerThread")),
        FixedColumn(np.where(kern, mb("staticSharedMemory"), np.nan), 3),
        FixedColumn(np.where(kern, mb("dynamicSharedMemory"), np.nan), 3),
        FixedColumn(nbytes, 3), FixedColumn(throughput, 3),
        TextColumn(src_codes, kind_names), TextColumn(dst_codes, kind_names),
        TextColumn(dev_codes, dev_labels), ints("contextId", zero_null=True),
        ints("greenContextId", zero_null=True), ints("streamId", zero_null=True),
        TextColumn(name_codes, labels),
    ]
    data = to_csv_bytes(COLUMNS["cuda_gpu_trace"], cols)
    return CsvTable("cuda_gpu_trace", data.decode("utf-8"), len(start))


def _aligned(
    parts: dict[str, dict[str, npt.NDArray[np.int64]]],
) -> list[dict[str, npt.NDArray[np.int64]] | None]:
    return [parts.get(k) for k in ("kernels", "memcpy", "memset")]


def _gpu_names(trace: NsysSqliteTrace) -> dict[int, str]:
    if not trace.has_sqlite_table("TARGET_INFO_GPU"):
        return {}
    have = set(trace.columns("TARGET_INFO_GPU"))
    if not {"id", "name"} <= have:
        return {}
    rows = trace.rows("SELECT id, name FROM TARGET_INFO_GPU")
    return {int(str(i)): str(n) for i, n in rows if i is not None and n is not None}
