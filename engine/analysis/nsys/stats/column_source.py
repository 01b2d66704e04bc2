"""Integer columns of an nsys export's table, mapped from the columnar cache a chunk of rows at a time.

:class:`TraceColumnSource` is how the long trace reports (``cuda_gpu_trace``, ``cuda_api_trace``,
``cuda_kern_exec_trace``) read millions of rows in bounded memory on any trace (``trace.columns``);
:class:`ColumnSource` reads SQL expressions of an export's table (``cuda_gpu_kern_gb_sum``);
:func:`distinct`, :func:`factorize` and :func:`lookup` are the sort-based set operations they label
rows with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.reports.nsys.columns import CHUNK_ROWS
from engine.reports.nsys.sorted_sets import distinct, factorize
from engine.reports.nsys.stats_reads import gpu_names, row_span

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace
    from engine.reports.trace_columns import ColumnsRead, Where


_GROUP = 4  # columns read from SQLite per pass: a cold read of 10M rows holds 4 columns at a time
_PASS_VALUES = 40_000_000  # values read in one pass at most, beyond _GROUP columns (320 MB)


class ColumnSource:
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
        rows = row_span(trace, table) if todo else 0
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
        """The whole column ``name`` (mapped from the cache; read again if the cache went away)."""
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


def lookup(uniq: npt.NDArray[np.int64], codes: npt.NDArray[np.int64],
            values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``codes[i]`` where ``values == uniq[i]``; -1 for values not in ``uniq``."""
    import numpy as np

    if not len(uniq):
        return np.full(len(values), -1, np.int64)
    pos = np.clip(np.searchsorted(uniq, values), 0, len(uniq) - 1)
    return np.where(uniq[pos] == values, codes[pos], -1)


class TraceColumnSource:
    """One table's integer columns (``trace.columns``, any trace), mapped afresh from its cache when asked.

    Each chunk of rows maps the cached columns again and lets them go, so the pages a chunk touched
    leave the process (its peak RSS stays that of one chunk). A trace without such a cache (a
    Kineto trace, an export whose cache cannot be written) keeps the columns it read, and so does a
    read of only the rows a filter ``where`` passes (``trace.columns``'s ``where``).
    """

    def __init__(self, trace: Trace, table: str, names: Sequence[str],
                 where: str | Where | None = None, started: ColumnsRead | None = None) -> None:
        """Read the columns (``started``: this read, begun by ``trace.columns_async``)."""
        self.trace, self.table, self.exprs = trace, table, tuple(names)
        got = started.result() if started is not None else trace.columns(table, list(names), where=where)
        self.rows = len(got[names[0]])
        cached = trace.columns_cached(table, list(names)) if where is None else None
        self.held: dict[str, npt.NDArray[np.int64]] = got if cached is None else {}
        del got, cached

    def column(self, name: str) -> npt.NDArray[np.int64]:
        """The whole column ``name``."""
        if name in self.held:
            return self.held[name]
        got = self.trace.columns_cached(self.table, [name])
        if got is None:  # the cache went away meanwhile: read it again and keep it
            got = self.trace.columns(self.table, [name])
            self.held[name] = got[name]
        return got[name]


__all__ = ["ColumnSource", "TraceColumnSource", "distinct", "factorize", "gpu_names", "lookup"]
