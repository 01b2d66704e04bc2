"""The columns the pandas-free ``nsys stats`` summaries read of a big table, in the background.

For ``api`` and ``kernels``: ``duration`` (end - start) and ``nameId`` (a StringIds id); ``memcpy``
adds ``bytes`` and ``copyKind``, ``memset`` ``bytes`` (the SQL of each here, over the export's
table). They come from the export's :class:`~engine.reports.nsys.columns.ColumnStore` (read once
in threads, then memory-mapped from the cache), so the caller's own work overlaps the read.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from engine.reports.nsys import schema
from engine.reports.nsys.columns import PendingColumns, has_null

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.export_source import ExportSource

#: Integer columns the pandas-free summaries read (:func:`read_summary_columns`): name -> SQL
#: expression over the export's table. A kernel's name is its demangled name, else its short name.
_SUMMARY_EXPRS: dict[str, dict[str, str]] = {
    "api": {"duration": '"end" - "start"', "nameId": '"nameId"'},
    "kernels": {
        "duration": '"end" - "start"', "nameId": 'coalesce("demangledName", "shortName")',
    },
    "memcpy": {"duration": '"end" - "start"', "bytes": '"bytes"', "copyKind": '"copyKind"'},
    "memset": {"duration": '"end" - "start"', "bytes": '"bytes"'},
}
_SUMMARY_RAW: dict[str, list[str]] = {
    "api": ["start", "end", "nameId"],
    "kernels": ["start", "end", "demangledName", "shortName"],
    "memcpy": ["start", "end", "bytes", "copyKind"],
    "memset": ["start", "end", "bytes"],
}


class SummaryColumns:
    """A column-wise read of integer expressions (see ``read_summary_columns``).

    :meth:`result` waits for it and returns {name: int64 array}, or None when a value is NULL (or
    SQLite could not read it), in which case callers use the general, pandas-based path.
    """

    def __init__(self, pending: PendingColumns | None, names: list[str]) -> None:
        self._pending, self._names = pending, names

    def result(self) -> dict[str, npt.NDArray[np.int64]] | None:
        """Wait for the read; the columns in row order, or None (see the class docstring)."""
        if self._pending is None:
            return None
        try:
            cols = self._pending.result()
        except sqlite3.Error:
            return None
        if any(has_null(cols[n]) for n in self._names):
            return None
        return {n: cols[n] for n in self._names}


def read_summary_columns(trace: ExportSource, name: str) -> SummaryColumns | None:
    """Start reading what the pandas-free summaries need of a big table, column-wise.

    For ``api`` and ``kernels``: ``duration`` (end - start) and ``nameId`` (a StringIds id);
    ``memcpy`` adds ``bytes`` and ``copyKind``, ``memset`` ``bytes``. The columns come from
    the export's :class:`~engine.reports.nsys.columns.ColumnStore` (read once in threads, then
    memory-mapped from the cache), so the caller's own work overlaps the read.

    Returns:
        A handle whose ``result()`` gives the columns (None there when a value is NULL or the
        table lacks a column: callers fall back), or None when the table was not captured or
        has no rows (the reports are empty).

    """
    t = schema.TABLES[name]
    if not trace.has_sqlite_table(t):
        return None
    exprs = _SUMMARY_EXPRS[name]
    if not set(_SUMMARY_RAW[name]) <= set(trace.column_names(t)):
        return SummaryColumns(None, list(exprs))
    try:
        if not trace.rows(f"SELECT 1 FROM {t} LIMIT 1"):
            return None  # no rows
    except sqlite3.Error:
        return SummaryColumns(None, list(exprs))
    narrow = frozenset({"nameId", "copyKind"})  # ids and kinds: int32 (half the memory)
    return SummaryColumns(trace.column_store().read_async(t, exprs, narrow), list(exprs))
