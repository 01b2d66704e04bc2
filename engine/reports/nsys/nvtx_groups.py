"""NVTX rows grouped by (domain id, text id, text) from the file's pages, without reading a text.

A range's name is its text (inline, or a registered string's id) in its domain. SQLite groups
20M rows by text slowly (a DISTINCT scan, then a CASE per row or a list of row ids per group); the
page reader gives each row one 63-bit key instead, the text's hash with the domain id and text id
mixed in (``texthash("text", "domainId", "textId")``, kept in the columnar cache), so the grouping
is numpy's work over one integer column:

    got = grouped(trace, where)    # (each row's group, the groups' (domain id, text id, text)) or None

Groups are numbered in the order of their first row (SQLite's DISTINCT order). Each group's
values are read back from SQLite at its first row, and its key checked against the values read:
a mismatch (the file changed) gives None, and so does a table the page reader does not handle,
an export without these columns or a filter with a semi-join; the caller groups in SQLite then.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from engine.reports.nsys import schema
from engine.reports.nsys.page_exprs import Unsupported, text_hash

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.export_source import ExportSource
    from engine.reports.trace_columns import Where

    Ints = npt.NDArray[np.int64]

#: the key column: the text's hash with the domain id and text id mixed in (one column, not three)
_KEYS = {"key": 'texthash("text", "domainId", "textId")'}
#: row ids asked of SQLite per statement
_IDS_PER_QUERY = 500
#: up to this many distinct names, each row's is searched among them (else a stable sort numbers them)
_SEARCHED = 1 << 16


def grouped(trace: ExportSource, where: Where | None) -> tuple[Ints, list[tuple[Any, ...]]] | None:
    """Each row's group (row for row with ``trace.columns("nvtx", ..., where=where)``) and the groups.

    A group is (domain id, text id, text) as the export stores them (None for NULL). None where
    the pages cannot tell (see the module docstring).
    """
    import numpy as np

    t = schema.NVTX
    if not trace.has_sqlite_table(t) or not {"domainId", "textId", "text"} <= set(trace.column_names(t)):
        return None
    store = trace.column_store()
    if not store.reads_pages(t) or (where is not None and any(c.op == "in table" for c in where.clauses)):
        return None
    try:
        cols = store.read(t, _KEYS)
    except sqlite3.Error:
        return None
    rows = None
    if where is not None and where.clauses:
        rows = np.flatnonzero(where.mask(trace.columns("nvtx", list(where.needs))))
    key = _key(cols, rows)
    code, first = _first_seen_codes(key)
    at = first if rows is None else rows[first]
    groups = _read_back(trace, store.row_count(t), at, cols)
    return None if groups is None else (code, groups)


def _key(cols: dict[str, Ints], rows: Ints | None) -> Ints:
    """Each row's key (of the rows ``rows``, a chunk at a time: else all)."""
    from engine.reports.nsys.column_reads import gather

    return cols["key"] if rows is None else gather(cols["key"], rows)


def _first_seen_codes(key: Ints) -> tuple[Ints, Ints]:
    """(each row's code, numbered in the order first seen; the row where each code is first seen).

    Few distinct keys (the usual names): each row's place among them is searched; many: one
    stable sort numbers them.
    """
    import numpy as np

    n = len(key)
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    s = np.sort(key)
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    uniq = s[new]
    if len(uniq) <= _SEARCHED:
        by_value = np.searchsorted(uniq, key).astype(np.int64)
    else:
        order = np.argsort(key, kind="stable")
        by_value = np.empty(n, dtype=np.int64)
        by_value[order] = np.cumsum(new) - 1
    first = np.full(len(uniq), n, dtype=np.int64)
    np.minimum.at(first, by_value, np.arange(n, dtype=np.int64))
    seen = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[seen] = np.arange(len(uniq), dtype=np.int64)
    return rank[by_value], first[seen]


def _read_back(trace: ExportSource, n_rows: int, at: Ints,
               cols: dict[str, Ints]) -> list[tuple[Any, ...]] | None:
    """Each group's (domain id, text id, text) read from SQLite at its first row (table position).

    None when a row's values are not the ones its key was made of (the file changed, say).
    """
    ids = _rowids_at(trace, n_rows, at)
    if ids is None:
        return [] if not len(at) else None
    got = {int(r[0]): r[1:] for r in _rows_by_id(trace, ids, ('"domainId"', '"textId"', '"text"'))}  # type: ignore[call-overload]
    out = []
    for rid, pos in zip(ids, at.tolist(), strict=True):
        vals = got.get(int(rid))
        if vals is None:
            return None
        d, tid, txt = vals
        try:
            if text_hash(txt, d, tid) != int(cols["key"][pos]):  # type: ignore[arg-type]
                return None
        except Unsupported:
            return None
        out.append(vals)  # type: ignore[arg-type]
    return out


def _rowids_at(trace: ExportSource, n_rows: int, at: Ints) -> list[int] | None:
    """The rowids of the NVTX rows at table positions ``at`` (None: the table is empty)."""
    import numpy as np

    t = schema.NVTX
    (first_id, last_id), = trace.rows(f"SELECT (SELECT min(rowid) FROM {t}), (SELECT max(rowid) FROM {t})")
    if not isinstance(first_id, int) or not isinstance(last_id, int):
        return None
    if last_id - first_id + 1 == n_rows:  # no gaps: the rowid of a position is known
        ids = at + first_id
    else:
        ids = np.asarray(trace.column_store().read(t, {"rowid": "rowid"})["rowid"])[at]
    return [int(i) for i in ids.tolist()]


def _rows_by_id(trace: ExportSource, ids: list[int], cols: tuple[str, ...]) -> list[tuple[object, ...]]:
    """``(rowid, *cols)`` of the NVTX rows ``ids``, in rowid order."""
    out: list[tuple[object, ...]] = []
    for k in range(0, len(ids), _IDS_PER_QUERY):
        part = ids[k:k + _IDS_PER_QUERY]
        out += trace.rows(f"SELECT rowid, {', '.join(cols)} FROM {schema.NVTX} WHERE rowid IN "
                          f"({', '.join('?' * len(part))})", tuple(part))
    return sorted(out, key=lambda r: r[0])  # type: ignore[arg-type,return-value]


def rows_of_type(trace: ExportSource, event_type: int,
                 cols: tuple[str, ...]) -> list[tuple[object, ...]] | None:
    """``cols`` of the NVTX rows of one ``eventType`` (domain creations, say), in rowid order.

    From the cached ``eventType`` column where the page reader handles the table (no scan of the
    table by SQLite: 1 s at 20M rows); None where it does not.
    """
    import numpy as np

    t = schema.NVTX
    if not trace.has_sqlite_table(t) or not trace.column_store().reads_pages(t):
        return None
    kinds = trace.columns("nvtx", ["eventType"])["eventType"]
    at = np.flatnonzero(np.asarray(kinds) == event_type)
    if not len(at):
        return []
    ids = _rowids_at(trace, trace.column_store().row_count(t), at)
    return None if ids is None else [r[1:] for r in _rows_by_id(trace, ids, cols)]
