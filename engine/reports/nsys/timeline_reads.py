"""What a timeline reads from a big Nsight Systems export, column-wise, through the columnar cache.

The window draws a big report's CUDA lanes (kernels, copies, memsets per GPU stream; API calls per
CPU thread) from integer columns, not from pandas tables. This module says which columns of which
tables those are (read through ``trace.columns``: the engine's cache files, shared by the summary,
the reports and the window, so the app holds no second copy of a kernel table), how a row's position
maps to its SQLite rowid, and how many launches of the same kernel came before one.

Usage::

    reads = TimelineReads(trace)               # an NsysSqliteTrace
    pending = reads.read("kernels")            # started in threads; None when not captured
    cols = pending.result()                    # {"start", "end", "deviceId", "streamId", "nameId"}
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.nsys import schema

if TYPE_CHECKING:
    from engine.reports.trace_columns import ColumnsRead

#: the tables a timeline reads column-wise (the engine's names) and the columns it reads of each
COLUMNS: dict[str, tuple[str, ...]] = {
    "kernels": ("start", "end", "deviceId", "streamId", "nameId"),
    "memcpy": ("start", "end", "deviceId", "streamId", "copyKind"),
    "memset": ("start", "end", "deviceId", "streamId"),
    "api": ("start", "end", "globalTid", "nameId"),
}
TABLES = tuple(COLUMNS)
#: the big tables whose rows :func:`cached_row_count` counts by a cached column (one row per row)
COUNTED_BY_COLUMN = (*TABLES, "sync", "nvtx")
#: the tables a timeline stage reads: "gpu" (kernels, copies, memsets) and "api" (CUDA API calls)
STAGES = {"gpu": ("kernels", "memcpy", "memset"), "api": ("api",)}
NULL = schema.NULL
#: bump when the meaning of the arrays a timeline keeps beside the columns (:meth:`TimelineReads.keep`)
#: changes: the directory's name carries it, so an older one is not read
KEPT_FORMAT = 1


class TimelineReads:
    """The column reads of one nsys SQLite trace's timeline, and rows found back by position.

    The columns are the trace's own (``trace.columns``: the engine's cache files, memory-mapped once
    written); what is added here is the rowid of a row by its position and the launch count of one
    kernel (for the link to Nsight Compute), both in SQL over the export.

    Args:
        trace: an :class:`engine.reports.nsys.sqlite_trace.NsysSqliteTrace`.

    """

    def __init__(self, trace: Any) -> None:
        self.trace = trace
        #: engine table -> first rowid (contiguous rowids) or each row's rowid (found on first use)
        self._rowids: dict[str, Any] = {}
        self._span: dict[str, tuple[int, int]] = {}

    @property
    def cache_dir(self) -> Any:
        """Where the columns are cached (None when caching is off)."""
        return self.trace.column_store().cache_dir

    def cached(self, stage: str) -> bool:
        """True when every column stage ``stage`` ("gpu" or "api") reads is in the cache already."""
        return all(self.trace.columns_cached(name, COLUMNS[name]) is not None for name in STAGES[stage])

    def kept(self, name: str) -> dict[str, Any] | None:
        """The arrays :meth:`keep` kept under ``name`` for this report (memory-mapped), or None.

        They sit beside the cached columns (the same report's identity: a changed file gets a new
        cache directory), so they are only as old as the columns they were worked out from.
        """
        where = self._kept_dir(name)
        if where is None or not where.is_dir():
            return None
        import numpy as np

        try:
            return {f.stem: np.load(f, mmap_mode="r") for f in sorted(where.glob("*.npy"))}
        except (OSError, ValueError):
            return None

    def keep(self, name: str, arrays: dict[str, Any]) -> None:
        """Keep small arrays worked out from the columns (the first paint's) for the next open.

        Written to a fresh directory that is then renamed into place, so a reader sees all of them or
        none; a failure (no cache, read-only, full disk) keeps nothing.
        """
        where = self._kept_dir(name)
        if where is None or where.is_dir():
            return
        import numpy as np

        tmp = None
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{where.name}-", dir=where.parent))
            for key, arr in arrays.items():
                np.save(tmp / f"{key}.npy", np.ascontiguousarray(arr), allow_pickle=False)
            os.rename(tmp, where)
        except OSError:
            pass
        finally:
            if tmp is not None and tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def _kept_dir(self, name: str) -> Path | None:
        cache = self.cache_dir
        return None if cache is None else Path(cache) / f"timeline-{name}-v{KEPT_FORMAT}"

    def read(self, name: str) -> ColumnsRead | None:
        """Start reading engine table ``name``'s timeline columns (None when it was not captured)."""
        if not self.trace.has(name):
            return None
        table = schema.table(name)
        # two queries: SQLite answers each from the b-tree's end, but scans for both in one
        ends = [self.trace.rows(f"SELECT rowid FROM {table} ORDER BY rowid {o} LIMIT 1")
                for o in ("", "DESC")]
        self._span[name] = (int(ends[0][0][0]), int(ends[1][0][0])) if ends[0] else (1, 0)
        read: ColumnsRead = self.trace.columns_async(name, COLUMNS[name])
        return read

    def rowid(self, name: str, row: int) -> int:
        """SQLite rowid of row ``row`` (position in rowid order) of table ``name`` (read before)."""
        base = self._rowids.get(name)
        if base is None:
            import numpy as np

            first, last = self._span[name]
            n = len(self.trace.columns(name, ["start"])["start"])  # mapped: the cached column
            base = first if n == last - first + 1 else np.asarray(  # gaps: each row's rowid
                self.trace.columns(name, ["rowid"])["rowid"])
            self._rowids[name] = base
        return base + row if isinstance(base, int) else int(base[row])

    def launch_index(self, row: int) -> int:
        """Launches of kernels of the same name before kernels-table ``row`` (start order).

        Counted by SQLite for the one row asked (a scan of the kernel table: only done for the ncu
        link, when an ncu report is open). The name is the short name, else the demangled one.
        """
        rowid = self.rowid("kernels", row)
        t = schema.KERNEL
        have = set(self.trace.column_names(t))
        cols = [f'"{c}"' for c in ("shortName", "demangledName") if c in have]
        name = f"coalesce({', '.join(cols)}, NULL)"
        got = self.trace.rows(f'SELECT {name}, "start" FROM {t} WHERE rowid = ?', (rowid,))
        if not got:
            return 0
        key, start = got[0]
        n = self.trace.rows(f'SELECT count(*) FROM {t} WHERE {name} IS ? AND ("start" < ? OR '
                            '("start" = ? AND rowid < ?))', (key, start, start, rowid))
        return int(n[0][0]) if n else 0

    def strings(self) -> dict[int, str]:
        """The export's string table: id -> text (names of kernels and API calls)."""
        strings: dict[int, str] = self.trace.strings()
        return strings

    def copy_labels(self) -> dict[int, str]:
        """``copyKind`` -> its label ("HtoD", "DtoH", ...), as the memcpy table's ``operation``."""
        from engine.reports.nsys.sqlite_trace import COPY_KIND_LABELS

        labels: dict[int, str] = self.trace.enum_labels(schema.ENUM_MEMCPY_OPER, COPY_KIND_LABELS)
        return labels


def cached_row_count(trace: Any, name: str) -> int | None:
    """Rows of big table ``name`` from the length of its cached ``start`` column, without an SQL count.

    ``name`` is kernels, memcpy, memset, api, sync or nvtx (a count walks the table's leaf pages: 4 s
    for big10m's 20M NVTX events and 5M syncs at load 9; 0.75 s for the syncs alone with the file
    out of the page cache). Where that column is not cached, the count an earlier open kept
    (:func:`keep_row_counts`). None when neither is there (or ``trace`` has no column store).
    """
    if (name not in COUNTED_BY_COLUMN or getattr(trace, "column_store", None) is None
            or not trace.has_sqlite_table(schema.table(name))):
        return None
    got = trace.columns_cached(name, ["start"])
    if got is not None:
        return len(got["start"])
    kept = TimelineReads(trace).kept(f"rows-{name}")
    return None if kept is None or "rows" not in kept else int(kept["rows"][0])


def keep_row_counts(trace: Any) -> None:
    """Keep the counts of the big tables that :func:`cached_row_count` cannot take from a column.

    For the next open of the same report (beside its cached columns); a table this open has not
    counted yet is counted now (the timeline calls this after its first paint).
    """
    import numpy as np

    if getattr(trace, "column_store", None) is None:
        return
    reads = TimelineReads(trace)
    for name in COUNTED_BY_COLUMN:
        if trace.has_sqlite_table(schema.table(name)) and cached_row_count(trace, name) is None:
            n = trace.row_count(name)  # (the store remembers what this open counted)
            if n is not None:
                reads.keep(f"rows-{name}", {"rows": np.array([n], dtype=np.int64)})


def cuda_events_over(trace: Any, rows: dict[str, int | None], min_events: int) -> bool:
    """True when ``trace`` is an nsys SQLite report with more than ``min_events`` CUDA events.

    CUDA events are kernels, copies, memsets and API calls, counted in ``rows``.
    """
    info = getattr(trace, "info", None)
    if getattr(info, "sqlite_path", None) is None or not str(getattr(info, "kind", "")).startswith("nsys"):
        return False
    return sum(int(rows.get(t) or 0) for t in TABLES) > min_events


def pid_tid(global_tid: int) -> tuple[int, int]:
    """(pid, tid) of a ``globalTid``; NULL gives (NULL, NULL)."""
    if global_tid == NULL:
        return NULL, NULL
    pid, tid = schema.decode_global_tid(global_tid)
    return int(pid), int(tid)
