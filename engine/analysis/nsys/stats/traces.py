"""``cuda_gpu_trace`` of an nsys SQLite export without pandas.

Columns come from the columnar cache, the CSV from :mod:`.csvfast`: the same bytes as the
DataFrame path and :func:`.output.to_csv`, produced a chunk of rows at a time so that the text of
a 10M-kernel report is streamed to its file in bounded memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.csvfast import (
    _CHUNK,
    FixedColumn,
    IntColumn,
    TextColumn,
    _quoted,
    _rows,
)
from engine.reports.nsys.columns import CHUNK_ROWS, has_null

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

_COMMON = ("start", "end", "correlationId", "deviceId", "contextId", "greenContextId", "streamId")
_KERNEL = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
           "staticSharedMemory", "dynamicSharedMemory")
_TABLES = {
    "kernels": ("CUPTI_ACTIVITY_KIND_KERNEL", (*_COMMON, *_KERNEL)),
    "memcpy": ("CUPTI_ACTIVITY_KIND_MEMCPY", (*_COMMON, "bytes", "copyKind", "srcKind", "dstKind")),
    "memset": ("CUPTI_ACTIVITY_KIND_MEMSET", (*_COMMON, "bytes", "memKind")),
}


class CsvTable:
    """A report rendered as ``nsys stats --format csv`` text, chunk by chunk (see :func:`gpu_trace_csv`).

    ``chunks()`` yields the UTF-8 text (header first) a bounded number of rows at a time, so a
    10M-kernel ``cuda_gpu_trace`` (several GB of text) is written to its file without ever being
    held whole; ``text`` joins the chunks (for small reports and the result cache).
    """

    def __init__(self, report: str, rows: int, chunks: Callable[[], Iterator[bytes]]) -> None:
        self.report, self.rows, self._chunks = report, rows, chunks
        self.columns = COLUMNS[report]

    @property
    def empty(self) -> bool:
        """True when the report has no rows."""
        return self.rows == 0

    def __len__(self) -> int:
        return self.rows

    def chunks(self) -> Iterator[bytes]:
        """The CSV text in pieces of at most ~131k rows (nothing when there are no rows)."""
        if self.rows:
            yield from self._chunks()

    @property
    def text(self) -> str:
        """The whole CSV text."""
        return b"".join(self.chunks()).decode("utf-8")

    def write_to(self, fh: BinaryIO) -> None:
        """Write the CSV text to a binary file, chunk by chunk."""
        for chunk in self.chunks():
            fh.write(chunk)


_GROUP = 4  # columns read from SQLite per pass: a cold read of 10M rows holds 4 columns at a time
_PASS_VALUES = 40_000_000  # values read in one pass at most, beyond _GROUP columns (320 MB)


class _Source:
    """The integer columns of one GPU table, mapped afresh from the columnar cache when asked.

    Each chunk of rows maps the cached ``.npy`` files again and lets them go, so the pages a
    chunk touched leave the process (its peak RSS stays that of one chunk). Where the cache
    cannot be written, the columns stay in memory instead. With ``where``, only the rows where
    that SQL condition holds are read (one pass, :meth:`ColumnStore.read_where`).
    """

    def __init__(self, trace: NsysSqliteTrace, table: str, exprs: dict[str, str],
                 per_pass: int = _GROUP, where: str | None = None) -> None:
        self.store, self.table, self.exprs, self.where = trace.column_store(), table, exprs, where
        # the cache's key of each column (read_where keys them with their condition)
        self.keys = {n: f"{e} WHERE {where}" if where else e for n, e in exprs.items()}
        self.held: dict[str, npt.NDArray[np.int64]] = {}
        todo = [n for n in exprs if self.store.cached(table, n, self.keys[n]) is None]
        if where is not None:
            if todo:
                self._keep(self.store.read_where(table, exprs, where))
            self.rows = len(self.column(next(iter(exprs))))
            return
        span = trace.rows(f"SELECT max(rowid) - min(rowid) + 1 FROM {table}")[0][0] if todo else 0
        rows = int(str(span)) if span is not None else 0
        # Fewer passes over a table that is not huge (each pass decodes every row again):
        # at most _PASS_VALUES values held at a time, and never fewer than per_pass columns.
        per_pass = max(per_pass, _PASS_VALUES // max(rows, 1))
        if rows <= CHUNK_ROWS and len(todo) > 1:  # one chunk: one thread a read, so two reads
            half = (len(todo) + 1) // 2
            pending = [self.store.read_async(table, {n: exprs[n] for n in g})
                       for g in (todo[:half], todo[half:])]
            for p in pending:
                self._keep(p.result())
        else:
            for k in range(0, len(todo), per_pass):
                self._keep(self.store.read(table, {n: exprs[n] for n in todo[k:k + per_pass]}))
        self.rows = len(self.column(next(iter(exprs))))

    def _keep(self, got: dict[str, npt.NDArray[np.int64]]) -> None:
        """Hold the columns of ``got`` that the cache could not take."""
        for n, arr in got.items():
            if self.store.cached(self.table, n, self.keys[n]) is None:
                self.held[n] = arr

    def column(self, name: str) -> npt.NDArray[np.int64]:
        if name in self.held:
            return self.held[name]
        arr = self.store.cached(self.table, name, self.keys[name])
        if arr is None:  # the cache went away meanwhile: read it again and keep it
            one = {name: self.exprs[name]}
            got = (self.store.read_where(self.table, one, self.where) if self.where is not None
                   else self.store.read(self.table, one))
            arr = got[name]
            self.held[name] = arr
        return arr


def _sources(trace: NsysSqliteTrace) -> dict[str, _Source] | None:
    """The three GPU tables' column sources (absent columns read as NULL)."""
    out = {}
    for name, (table, cols) in _TABLES.items():
        if not trace.has_sqlite_table(table):
            continue
        have = set(trace.column_names(table))
        exprs = {c: f'"{c}"' if c in have else "NULL" for c in cols}
        if name == "kernels":
            if not {"demangledName", "shortName"} & have:
                return None
            exprs["nameId"] = 'coalesce("demangledName", "shortName")'
        out[name] = _Source(trace, table, exprs)
    return out


def gpu_trace_csv(trace: NsysSqliteTrace) -> CsvTable | None:
    """``cuda_gpu_trace`` as CSV, or None where the general path must handle it (NULL times).

    Rows are sorted by start, then kernels before copies before memsets, then table order
    (a stable sort), as :func:`engine.analysis.nsys.stats.frames._cuda_gpu_trace` sorts them.
    Only the row order (8 bytes a row) is held; each chunk of rows gathers its columns from the
    columnar cache and is formatted on its own.
    """
    import sqlite3

    import numpy as np

    from engine.reports.nsys.columns import NULL
    from engine.reports.nsys.sqlite_trace import _MEM_KIND_LABELS, COPY_KIND_LABELS

    try:
        srcs = _sources(trace)
    except sqlite3.Error:
        return None
    if srcs is None:
        return None
    srcs = {k: v for k, v in srcs.items() if v.rows}
    if not srcs:
        return CsvTable("cuda_gpu_trace", 0, lambda: iter(()))
    if any(has_null(s.column("start")) or has_null(s.column("end")) for s in srcs.values()):
        return None
    names = list(srcs)
    offsets = np.cumsum([0] + [srcs[n].rows for n in names])
    start_all = np.concatenate([np.asarray(srcs[n].column("start")) for n in names])
    kinds_all = np.concatenate([np.full(srcs[n].rows, ("kernels", "memcpy", "memset").index(n),
                                        np.int8) for n in names])
    order = np.lexsort((kinds_all, start_all))
    del start_all, kinds_all

    # Labels, each over the distinct values of a whole column (one pass, before the chunks).
    strings = trace.strings()
    copy_labels = trace.enum_labels("ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS)
    mem_labels = trace.enum_labels("ENUM_CUDA_MEM_KIND", _MEM_KIND_LABELS)
    labels: list[str] = []
    name_lut: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    if "kernels" in srcs:
        uniq = np.unique(srcs["kernels"].column("nameId"))
        if (uniq == NULL).any() or any(int(i) not in strings for i in uniq.tolist()):
            return None
        name_lut["kernels"] = (uniq, np.arange(len(uniq), dtype=np.int64))
        labels += [strings[int(i)] for i in uniq.tolist()]
    if "memcpy" in srcs:
        uniq = np.unique(srcs["memcpy"].column("copyKind"))
        name_lut["memcpy"] = (uniq, np.arange(len(uniq), dtype=np.int64) + len(labels))
        labels += [f"[CUDA memcpy {copy_labels.get(int(k), 'Unknown')}]" for k in uniq.tolist()]
    if "memset" in srcs:
        name_lut["memset"] = (np.zeros(1, np.int64), np.full(1, len(labels), np.int64))
        labels.append("[CUDA memset]")
    kind_ids = sorted(mem_labels)
    kind_names = [mem_labels[k] for k in kind_ids]
    gpus = _gpu_names(trace)
    dev_ids = sorted(set().union(*(np.unique(s.column("deviceId")).tolist() for s in srcs.values()))
                     - {NULL})
    dev_arr = np.array(dev_ids, dtype=np.int64)
    dev_labels = [f"{gpus[d]} ({d})" if d in gpus else f"GPU {d}" for d in dev_ids]
    if any("\n" in t for t in [*kind_names, *dev_labels]):
        return None  # a text column before the last one holds a newline: the general path

    def chunks() -> Iterator[bytes]:
        yield ",".join(_quoted(h).decode() for h in COLUMNS["cuda_gpu_trace"]).encode() + b"\n"
        for lo in range(0, len(order), _CHUNK):
            idx = order[lo:lo + _CHUNK]
            yield _chunk(srcs, names, offsets, idx, labels, name_lut, kind_ids, kind_names,
                         dev_arr, dev_labels)

    return CsvTable("cuda_gpu_trace", len(order), chunks)


def distinct(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The distinct values, ascending: ``np.unique`` by a sort.

    numpy 2.4's hash-based unique takes 3 s on 3M distinct int64s, a sort 30 ms.
    """
    import numpy as np

    s = np.sort(values)
    if not len(s):
        return s
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def factorize(values: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(distinct values ascending, each value's index among them).

    ``np.unique(values, return_inverse=True)`` without its argsort: a sort and a binary search.
    """
    import numpy as np

    uniq = distinct(values)
    return uniq, np.searchsorted(uniq, values).astype(np.int64)


def _lookup(uniq: npt.NDArray[np.int64], codes: npt.NDArray[np.int64],
            values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``codes[i]`` where ``values == uniq[i]``; -1 for values not in ``uniq``."""
    import numpy as np

    if not len(uniq):
        return np.full(len(values), -1, np.int64)
    pos = np.clip(np.searchsorted(uniq, values), 0, len(uniq) - 1)
    return np.where(uniq[pos] == values, codes[pos], -1)


def _chunk(srcs: dict[str, _Source], names: list[str], offsets: npt.NDArray[np.int64],
           idx: npt.NDArray[np.intp], labels: list[str],
           name_lut: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]],
           kind_ids: list[int], kind_names: list[str], dev_arr: npt.NDArray[np.int64],
           dev_labels: list[str]) -> bytes:
    """One chunk of rows (``idx``: positions in the tables' concatenation) as CSV bytes."""
    import numpy as np

    from engine.reports.nsys.columns import NULL

    n = len(idx)
    which = np.searchsorted(offsets, idx, side="right") - 1
    sel = {name: (which == i, idx[which == i] - offsets[i]) for i, name in enumerate(names)}

    def col(name: str) -> npt.NDArray[np.int64]:
        out = np.full(n, NULL, np.int64)
        for t, (mask, rows) in sel.items():
            if name in srcs[t].exprs and mask.any():
                arr = srcs[t].column(name)
                out[mask] = arr[rows]
                del arr
        return out

    def ints(name: str, zero_null: bool = False) -> IntColumn:
        v = col(name)
        null = v == NULL
        if zero_null:
            null |= v == 0
        return IntColumn(v, null if null.any() else None)

    def mb(v: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return np.where(v == NULL, np.nan, v.astype(np.float64) / 1e6)

    start = col("start")
    dur = col("end") - start
    nbytes = mb(col("bytes"))
    dur_f = dur.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput = np.where(dur_f > 0, nbytes * (1e9 // dur_f), np.nan)
    name_codes = np.full(n, -1, np.int64)
    key = {"kernels": "nameId", "memcpy": "copyKind", "memset": None}
    for t, (mask, _) in sel.items():
        if mask.any():
            uniq, codes = name_lut[t]
            k = key[t]
            vals = col(k)[mask] if k else np.zeros(int(mask.sum()), np.int64)
            name_codes[mask] = _lookup(uniq, codes, vals)
    kind_arr = np.array(kind_ids, dtype=np.int64)
    kind_codes = np.arange(len(kind_ids), dtype=np.int64)
    src_v = col("srcKind")
    if "memset" in sel:
        src_v = np.where(sel["memset"][0], col("memKind"), src_v)
    kern = sel["kernels"][0] if "kernels" in sel else np.zeros(n, bool)
    cols: list[IntColumn | FixedColumn | TextColumn] = [
        IntColumn(start), IntColumn(dur), ints("correlationId"),
        *(ints(c) for c in ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                            "registersPerThread")),
        FixedColumn(np.where(kern, mb(col("staticSharedMemory")), np.nan), 3),
        FixedColumn(np.where(kern, mb(col("dynamicSharedMemory")), np.nan), 3),
        FixedColumn(nbytes, 3), FixedColumn(throughput, 3),
        TextColumn(_lookup(kind_arr, kind_codes, src_v), kind_names),
        TextColumn(_lookup(kind_arr, kind_codes, col("dstKind")), kind_names),
        TextColumn(_lookup(dev_arr, np.arange(len(dev_arr), dtype=np.int64), col("deviceId")),
                   dev_labels),
        ints("contextId", zero_null=True), ints("greenContextId", zero_null=True),
        ints("streamId", zero_null=True),
        TextColumn(name_codes, labels),
    ]
    return _rows(cols[:-1], 0, n, cols[-1])  # type: ignore[arg-type]


def _aligned(
    parts: dict[str, dict[str, npt.NDArray[np.int64]]],
) -> list[dict[str, npt.NDArray[np.int64]] | None]:
    return [parts.get(k) for k in ("kernels", "memcpy", "memset")]


def _gpu_names(trace: NsysSqliteTrace) -> dict[int, str]:
    if not trace.has_sqlite_table("TARGET_INFO_GPU"):
        return {}
    have = set(trace.column_names("TARGET_INFO_GPU"))
    if not {"id", "name"} <= have:
        return {}
    rows = trace.rows("SELECT id, name FROM TARGET_INFO_GPU")
    return {int(str(i)): str(n) for i, n in rows if i is not None and n is not None}


def api_trace_csv(trace: NsysSqliteTrace) -> CsvTable | None:
    """``cuda_api_trace`` as CSV chunks, or None where the general path must handle it (NULLs).

    The same bytes as :func:`engine.analysis.nsys.stats.more.cuda_api_trace` + ``to_csv``: rows by
    start (stable), names without their ``_vNNNN`` suffix, the thread's priority and name from
    ThreadNames (its first row per thread). Only the row order is held; 69M calls of a 10M-kernel
    report are read two columns per pass and formatted a chunk at a time.
    """
    import sqlite3

    import numpy as np

    from engine.analysis.nsys.stats.catalog import _API_SUFFIX

    table = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if not trace.has_sqlite_table(table):
        return None
    have = set(trace.column_names(table))
    need = ("start", "end", "nameId", "correlationId", "globalTid")
    if not set(need) <= have:
        return None
    exprs = {c: f'"{c}"' for c in need}
    exprs["returnValue"] = '"returnValue"' if "returnValue" in have else "NULL"
    try:
        src = _Source(trace, table, exprs, per_pass=2)
    except sqlite3.Error:
        return None
    if not src.rows:
        return CsvTable("cuda_api_trace", 0, lambda: iter(()))
    if any(has_null(src.column(c)) for c in ("start", "end", "nameId", "globalTid")):
        return None
    order = np.argsort(src.column("start"), kind="stable")
    strings = trace.strings()
    name_ids = np.unique(src.column("nameId"))
    names = [_API_SUFFIX.sub("", str(strings.get(int(i), f"<unknown {int(i)}>")))
             for i in name_ids.tolist()]
    gtids = np.unique(src.column("globalTid"))
    prio: dict[int, object] = {}
    tname: dict[int, object] = {}
    if trace.has_sqlite_table("ThreadNames"):
        rows = trace.rows("SELECT t.globalTid, t.priority, s.value FROM ThreadNames AS t "
                          "LEFT JOIN StringIds AS s ON s.id = t.nameId")
        for g, p, n in rows:
            if g is not None and int(str(g)) not in prio:
                prio[int(str(g))], tname[int(str(g))] = p, n
    gl = gtids.tolist()
    pri_vals = np.array([int(str(prio[g])) if prio.get(g) is not None else 0 for g in gl], np.int64)
    pri_null = np.array([prio.get(g) is None for g in gl], dtype=bool)
    thread_labels = sorted({str(tname[g]) for g in gl if tname.get(g) is not None})
    thread_code = np.array([thread_labels.index(str(tname[g])) if tname.get(g) is not None else -1
                            for g in gl], dtype=np.int64)
    if any("\n" in t for t in names):
        return None  # a text column before the last one holds a newline: the general path

    def chunks() -> Iterator[bytes]:
        from engine.reports.nsys.columns import NULL

        yield ",".join(_quoted(h).decode() for h in COLUMNS["cuda_api_trace"]).encode() + b"\n"
        for lo in range(0, len(order), _CHUNK):
            idx = order[lo:lo + _CHUNK]
            start = np.asarray(src.column("start")[idx])
            gtid = np.asarray(src.column("globalTid")[idx])
            g = np.searchsorted(gtids, gtid)
            ret = np.asarray(src.column("returnValue")[idx])
            corr = np.asarray(src.column("correlationId")[idx])
            cols: list[IntColumn | FixedColumn | TextColumn] = [
                IntColumn(start), IntColumn(np.asarray(src.column("end")[idx]) - start),
                TextColumn(np.searchsorted(name_ids, np.asarray(src.column("nameId")[idx])), names),
                IntColumn(ret, ret == NULL), IntColumn(corr, corr == NULL),
                IntColumn((gtid >> 24) & 0xFFFFFF), IntColumn(gtid & 0xFFFFFF),
                IntColumn(pri_vals[g], pri_null[g]),
                TextColumn(thread_code[g], thread_labels),
            ]
            yield _rows(cols[:-1], 0, len(idx), cols[-1])  # type: ignore[arg-type]

    return CsvTable("cuda_api_trace", len(order), chunks)
