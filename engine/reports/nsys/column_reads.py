"""``trace.columns`` of an nsys export: the engine's columns through the export's columnar cache.

Each column becomes its SQL expression over the export's table (:func:`engine.reports.nsys.schema.column_sql`,
NULL for a column this export lacks) and a named filter its SQL condition; the
:class:`~engine.reports.nsys.columns.ColumnStore` reads them once (the page reader, else SQLite, in
threads) and maps the cached files on every later read, by any command or the window.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.reports.base import TABLES
from engine.reports.nsys import schema
from engine.reports.trace_columns import ReadyColumns, Where, check_names, resolve_where
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.nsys.columns import ColumnStore, PendingColumns
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace
    from engine.reports.trace_columns import ColumnsRead


#: the engine's tables and the export's others (osrt)
_TABLES: dict[str, Any] = {**TABLES, **{k: () for k in schema.TABLES if k not in TABLES}}


class _Read:
    """A read in progress whose SQLite errors become one sentence (:class:`ReportError`).

    With ``mapped`` (store, table, name -> expression), columns read into memory are swapped for
    their cache files' mappings once written: what the caller holds are the OS's pages, not this
    process's heap (a 69M-row column is 550 MB).
    """

    def __init__(self, pending: PendingColumns, what: str,
                 mapped: tuple[ColumnStore, str, dict[str, str]] | None = None) -> None:
        self._pending, self._what, self._mapped = pending, what, mapped

    def result(self) -> dict[str, npt.NDArray[Any]]:
        """The columns (see :meth:`engine.reports.base.Trace.columns`)."""
        import numpy as np

        try:
            got = self._pending.result()
        except sqlite3.Error as exc:
            raise ReportError(f"{self._what} could not be read from the export ({exc}); "
                              "export the report again.") from exc
        if self._mapped is None:
            return got
        store, t, exprs = self._mapped
        out = dict(got)
        for n, arr in got.items():
            if not isinstance(arr, np.memmap) and len(arr):
                cached = store.cached(t, n, exprs[n])
                if cached is not None and len(cached) == len(arr):
                    out[n] = cached
        return out


def _exprs(trace: NsysSqliteTrace, table: str, names: Sequence[str],
           check: bool = True) -> tuple[str, dict[str, str], set[str]]:
    """(the export's table, name -> SQL, the table's columns); table "" when the export lacks it."""
    if check:
        check_names(table, names, _TABLES)
    t = schema.TABLES.get(table, "")
    if not t or not trace.has_sqlite_table(t):
        return "", {}, set()
    have = set(trace.column_names(t))
    return t, {n: schema.column_sql(table, n, have) for n in dict.fromkeys(names)}, have


def read_columns_async(trace: NsysSqliteTrace, table: str, names: Sequence[str],
                       where: str | Where | None) -> ColumnsRead:
    """Start reading ``names`` of the engine's ``table`` (see :meth:`engine.reports.base.Trace.columns`)."""
    import numpy as np

    w = resolve_where(table, where)
    t, exprs, have = _exprs(trace, table, names)
    if not t:  # not captured: no rows
        return ReadyColumns({n: np.zeros(0, dtype=np.int64) for n in names})
    store = trace.column_store()
    what = f"{', '.join(exprs)} of {table}"
    if w is None:
        return _Read(store.read_async(t, exprs, schema.NARROW & set(exprs)), what, (store, t, exprs))
    return _Read(store.read_where_async(t, exprs, schema.where_sql(table, w, have)), what)


def prefetch_columns(trace: NsysSqliteTrace, table: str, names: Sequence[str]) -> None:
    """Start reading ``names`` of ``table`` in the background; a later read of them waits for this one."""
    t, exprs, _have = _exprs(trace, table, names)
    if t:
        trace.column_store().prefetch(t, exprs, schema.NARROW & set(exprs))


def cached_columns(trace: NsysSqliteTrace, table: str,
                   names: Sequence[str]) -> dict[str, npt.NDArray[Any]] | None:
    """``names`` mapped from the columnar cache when all are cached; None otherwise (nothing is read)."""
    import numpy as np

    t, exprs, _have = _exprs(trace, table, names)
    if not t:
        return {n: np.zeros(0, dtype=np.int64) for n in names}
    store = trace.column_store()
    out = {}
    for n, e in exprs.items():
        arr = store.cached(t, n, e)
        if arr is None:
            return None
        out[n] = arr
    return out


def stores_columns(trace: NsysSqliteTrace, table: str, names: Sequence[str]) -> bool:
    """True when the export has ``table`` and every column of ``names`` (each operand of a coalesce: one)."""
    t, exprs, _have = _exprs(trace, table, names, check=False)
    return bool(t) and "NULL" not in exprs.values()
