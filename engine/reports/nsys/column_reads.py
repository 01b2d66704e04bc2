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
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.columns import ColumnStore, PendingColumns
    from engine.reports.nsys.export_source import ExportSource
    from engine.reports.trace_columns import ColumnsRead


#: the engine's tables and the export's others (osrt)
_TABLES: dict[str, Any] = {**TABLES, **{k: () for k in schema.TABLES if k not in TABLES}}


class _Read:
    """A read in progress whose SQLite errors become one sentence (:class:`ReportError`).

    ``keys`` maps each engine name to its cache name. With ``mapped`` (the store and table),
    columns read into memory are swapped for their cache files' mappings once written: what the
    caller holds are the OS's pages, not this process's heap (a 69M-row column is 550 MB).
    """

    def __init__(self, pending: PendingColumns, what: str, keys: dict[str, str], exprs: dict[str, str],
                 mapped: tuple[ColumnStore, str] | None = None) -> None:
        self._pending, self._what, self._keys, self._exprs = pending, what, keys, exprs
        self._mapped = mapped

    def result(self) -> dict[str, npt.NDArray[Any]]:
        """The columns (see :meth:`engine.reports.base.Trace.columns`)."""
        import numpy as np

        try:
            got = self._pending.result()
        except sqlite3.Error as exc:
            raise ReportError(f"{self._what} could not be read from the export ({exc}); "
                              "export the report again.") from exc
        if self._mapped is not None:
            store, t = self._mapped
            got = dict(got)
            for key, arr in list(got.items()):
                if not isinstance(arr, np.memmap) and len(arr):
                    cached = store.cached(t, key, self._exprs[key])
                    if cached is not None and len(cached) == len(arr):
                        got[key] = cached
        return {n: got[key] for n, key in self._keys.items()}


def _cache_key(name: str, sql: str) -> str:
    """The cache's name of a column: the stored column's own where its SQL is just that column.

    So an id column (``shortNameId`` is ``"shortName"``) shares its file with every reader of the
    stored column.
    """
    return sql[1:-1] if sql.startswith('"') and sql.endswith('"') and sql.count('"') == 2 else name


def _exprs(trace: ExportSource, table: str, names: Sequence[str], check: bool = True
           ) -> tuple[str, dict[str, str], dict[str, str], set[str]]:
    """(the export's table, engine name -> cache name, cache name -> SQL, the table's columns).

    The table is "" when the export lacks it.
    """
    if check:
        check_names(table, names, _TABLES)
    t = schema.TABLES.get(table, "")
    if not t or not trace.has_sqlite_table(t):
        return "", {}, {}, set()
    have = set(trace.column_names(t))
    keys: dict[str, str] = {}
    exprs: dict[str, str] = {}
    for n in names:
        sql = schema.column_sql(table, n, have)
        keys[n] = _cache_key(n, sql)
        exprs[keys[n]] = sql
    return t, keys, exprs, have


def _narrow(keys: dict[str, str]) -> frozenset[str]:
    return frozenset(k for n, k in keys.items() if n in schema.NARROW)


def read_columns_async(trace: ExportSource, table: str, names: Sequence[str],
                       where: str | Where | None) -> ColumnsRead:
    """Start reading ``names`` of the engine's ``table`` (see :meth:`engine.reports.base.Trace.columns`)."""
    import numpy as np

    w = resolve_where(table, where)
    t, keys, exprs, have = _exprs(trace, table, names)
    if not t:  # not captured: no rows
        return ReadyColumns({n: np.zeros(0, dtype=np.int64) for n in names})
    store = trace.column_store()
    what = f"{', '.join(keys)} of {table}"
    if w is None:
        return _Read(store.read_async(t, exprs, _narrow(keys)), what, keys, exprs, (store, t))
    if not _joined_tables_stored(trace, w):  # a semi-join on a table (column) not captured: no rows
        return ReadyColumns({n: np.zeros(0, dtype=np.int64) for n in names})
    if store.reads_pages(t):
        return _Masked(trace, table, names, w)
    return _Read(store.read_where_async(t, exprs, schema.where_sql(table, w, have)), what, keys, exprs)


class _Masked:
    """A filtered read as a mask over whole columns (for a table the page reader handles).

    The whole columns (the wanted ones and the filter's) are read as any column is, into the
    columnar cache, shared with every other reader; :meth:`Where.mask` (the same test the pandas
    tables take) picks the rows, gathered a chunk at a time into int64 arrays (what SQLite's
    filtered scan gave) with the mapped pages handed back as it goes. 20M NVTX ranges: one scan of
    the pages instead of SQLite parsing five values a row as text.
    """

    def __init__(self, trace: ExportSource, table: str, names: Sequence[str], where: Where) -> None:
        self._names = list(names)
        self._where = where
        need = list(dict.fromkeys([*names, *where.needs]))
        self._full = read_columns_async(trace, table, need, None)
        self._others = {f"{c.of}.{c.column}": read_columns_async(trace, c.of, [c.column], None)
                        for c in where.clauses if c.op == "in table"}

    def result(self) -> dict[str, npt.NDArray[Any]]:
        """The columns of the rows that pass (see :meth:`engine.reports.base.Trace.columns`)."""
        import numpy as np

        full = self._full.result()
        others = {k: r.result()[k.split(".", 1)[1]] for k, r in self._others.items()}
        rows = np.flatnonzero(self._where.mask({c: full[c] for c in self._where.needs}, others))
        return {n: gather(full[n], rows) for n in self._names}


def gather(col: npt.NDArray[Any], rows: npt.NDArray[np.int64], chunk: int = 1 << 21) -> npt.NDArray[np.int64]:
    """``col[rows]`` as int64, a chunk at a time, the mapped pages read handed back after each."""
    import numpy as np

    from engine.system.shared_maps import release

    out = np.empty(len(rows), dtype=np.int64)
    mapped = isinstance(col, np.memmap) or isinstance(getattr(col, "base", None), np.memmap)
    for lo in range(0, len(rows), chunk):
        out[lo:lo + chunk] = col[rows[lo:lo + chunk]]
        if mapped:
            release()
    return out


def _joined_tables_stored(trace: ExportSource, where: Where) -> bool:
    """True when the export has the table and column of every ``in table`` clause of ``where``."""
    for c in where.clauses:
        if c.op == "in table":
            t = schema.TABLES.get(c.of, "")
            if not t or not trace.has_sqlite_table(t) or c.column not in set(trace.column_names(t)):
                return False
    return True


def prefetch_columns(trace: ExportSource, table: str, names: Sequence[str]) -> None:
    """Start reading ``names`` of ``table`` in the background; a later read of them waits for this one."""
    t, keys, exprs, _have = _exprs(trace, table, names)
    if t:
        trace.column_store().prefetch(t, exprs, _narrow(keys))


def cached_columns(trace: ExportSource, table: str,
                   names: Sequence[str]) -> dict[str, npt.NDArray[Any]] | None:
    """``names`` mapped from the columnar cache when all are cached; None otherwise (nothing is read)."""
    import numpy as np

    t, keys, exprs, _have = _exprs(trace, table, names)
    if not t:
        return {n: np.zeros(0, dtype=np.int64) for n in names}
    store = trace.column_store()
    out = {}
    for n, key in keys.items():
        arr = store.cached(t, key, exprs[key])
        if arr is None:
            return None
        out[n] = arr
    return out


def stores_columns(trace: ExportSource, table: str, names: Sequence[str]) -> bool:
    """True when the export has ``table`` and every column of ``names`` (each operand of a coalesce: one)."""
    t, _keys, exprs, _have = _exprs(trace, table, names, check=False)
    return bool(t) and "NULL" not in exprs.values()


def stored_rows(trace: ExportSource, table: str, names: Sequence[str],
                limit: int | None = None) -> list[tuple[object, ...]]:
    """The rows of a small table as the export stores them (ids as ids, texts as text), no pandas.

    ``names`` are the engine's columns (text ones too); one the export lacks is None. Empty when
    the export lacks the table.
    """
    t = schema.TABLES.get(table, "")
    if not t or not trace.has_sqlite_table(t):
        return []
    have = set(trace.column_names(t))
    parts = [schema.column_sql(table, n, have) + f' AS "{n}"' for n in names]
    return trace.rows(f"SELECT {', '.join(parts)} FROM {t}" + (f" LIMIT {int(limit)}" if limit else ""))
