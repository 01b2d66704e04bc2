"""NVTX ranges of an nsys export by name, without a table of every NVTX event with its text.

Two questions about the ``NVTX_EVENTS`` table, each answered in SQLite over integer columns:

* :func:`range_columns`: the closed push/pop and start/end ranges (the ``"ranges"`` filter of
  ``trace.columns("nvtx", ...)``) with each row's name as a code into their distinct
  (domain, text) pairs. The ranges are grouped by (domain id, text id, text): where the groups are
  few (one DISTINCT scan tells), each row's group is a code column (a CASE over the groups) that the
  columnar cache keeps, so a later run reads no text; else SQLite lists each group's row ids.
* :func:`range_groups`: the ranges that ended, grouped by (event type, "domain:text") with their
  durations (nsys's ``nvtx_sum``), SQLite grouping two halves of the table in two threads.

Texts are resolved as the ``nvtx`` table resolves them: the StringIds text of ``textId`` where it
resolves, else the inline ``text``; domain names come from the domain-create events.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.reports.nsys import schema
from engine.reports.nsys.sqlite_file import connect_readonly
from engine.reports.trace_columns import FILTERS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.export_source import ExportSource

#: up to this many (domain, text id, text) groups, a row's group is a cached code column
_FEW_GROUPS = 64


def _domains(trace: ExportSource, text_id: str, resolved: Any) -> dict[Any, Any]:
    created = trace.rows(f'SELECT "domainId", {text_id}, "text" FROM {schema.NVTX} '
                         f'WHERE "eventType" = {schema.NVTX_DOMAIN_CREATE}')
    domains: dict[Any, Any] = {}
    for d, tid, txt in created:  # the last domain-create event of an id wins, as dict(zip()) gives
        if d is not None:  # a NULL id names no domain (NaN never equals NaN in the table path)
            domains[d] = resolved(tid, txt)
    return domains


def range_columns(trace: ExportSource, names: Sequence[str]) -> tuple[
        dict[str, npt.NDArray[Any]], npt.NDArray[np.int64], list[tuple[Any, Any]]] | None:
    """The closed NVTX ranges: (columns ``names``, each row's name code, the (domain, text) of each code).

    Row for row with ``trace.columns("nvtx", names, where="ranges")`` (table order); a domain or
    text is None where the export has none. None when the export lacks the table or one of its
    ``start``, ``end``, ``eventType``, ``domainId`` and ``text`` columns, or changed while read.
    """
    import numpy as np

    t = schema.NVTX
    if not trace.has_sqlite_table(t):
        return None
    have = set(trace.column_names(t))
    if not {"start", "end", "eventType", "domainId", "text"} <= have:
        return None
    text_id = '"textId"' if "textId" in have else "NULL"
    where = schema.where_sql("nvtx", FILTERS["nvtx"]["ranges"], have)
    exprs = {"rowid": "rowid", **{n: schema.column_sql("nvtx", n, have) for n in names}}
    try:
        keys = trace.rows(f'SELECT DISTINCT "domainId", {text_id}, "text" FROM {t} WHERE {where} '
                          f"LIMIT {_FEW_GROUPS + 1}")
        s = trace.strings()

        def resolved(tid: Any, txt: Any) -> Any:  # the text of a textId when it resolves, else the text
            return s[tid] if tid is not None and tid in s else txt

        domains = _domains(trace, text_id, resolved)
        coded = len(keys) <= _FEW_GROUPS and all(_literal(v) is not None for k in keys for v in k)
        if coded:
            exprs["group"] = _group_case(keys, text_id)
            groups: list[tuple[Any, ...]] = [tuple(k) for k in keys]
        else:
            groups = trace.rows(f'SELECT "domainId", {text_id}, "text", group_concat(rowid, \',\') '
                                f"FROM {t} WHERE {where} GROUP BY 1, 2, 3")
        cols = trace.column_store().read_where(t, exprs, where)
    except sqlite3.Error:
        return None
    pairs = [(domains.get(d, "") if d is not None else "", resolved(tid, txt))
             for d, tid, txt, *_ in groups]
    if coded:
        code = np.asarray(cols["group"], dtype=np.int64)
        if len(code) and int(code.min()) < 0:
            return None  # a row of no group: the table changed between the two reads
    else:
        got = _codes_by_rowid(groups, np.asarray(cols["rowid"]))
        if got is None:
            return None
        code = got
    return {n: cols[n] for n in names}, code, pairs


def _literal(v: Any) -> str | None:
    """``v`` as an SQL literal for ``IS`` (None where it cannot be written as one)."""
    if v is None:
        return "NULL"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return None


def _group_case(keys: list[tuple[Any, ...]], text_id: str) -> str:
    """A CASE giving each row the index of its (domain id, text id, text) among ``keys`` (-1: none)."""
    cols = ('"domainId"', text_id, '"text"')
    whens = " ".join(
        "WHEN " + " AND ".join(f"{c} IS {_literal(v)}" for c, v in zip(cols, k, strict=True)) + f" THEN {i}"
        for i, k in enumerate(keys))
    return f"CASE {whens} ELSE -1 END"


def _codes_by_rowid(groups: list[tuple[Any, ...]], rowid: npt.NDArray[Any]) -> npt.NDArray[np.int64] | None:
    """Each range's group: its row id looked up among the groups' listed row ids (None: they differ)."""
    import numpy as np

    row_ids = [np.fromstring(str(g[3]), dtype=np.int64, sep=",") for g in groups]
    ids_all = np.concatenate(row_ids) if row_ids else np.zeros(0, dtype=np.int64)
    code_all = np.repeat(np.arange(len(groups)), [len(r) for r in row_ids])
    order = np.argsort(ids_all)
    pos = np.searchsorted(ids_all[order], rowid)
    if len(rowid) != len(ids_all) or not np.array_equal(ids_all[order][pos], rowid):
        return None  # the table changed between the two reads
    out: npt.NDArray[np.int64] = code_all[order][pos]
    return out


def range_groups(trace: ExportSource) -> list[tuple[int, str, npt.NDArray[np.int64]]] | None:
    """NVTX push/pop and start/end ranges that ended, grouped: (eventType, "domain:text", durations).

    The same names as the ``nvtx`` table gives (text from StringIds when ``textId`` resolves,
    domain names from the domain-create events), without pandas: SQLite groups the rows and
    joins each group's durations into one text that numpy parses. Empty when NVTX was not
    captured; None when a range lacks a start or a domain id (the general path handles those).
    """
    import numpy as np

    t = schema.NVTX
    if not trace.has_sqlite_table(t):
        return []
    have = set(trace.column_names(t))
    text_id = '"textId"' if "textId" in have else "NULL"
    text = '"text"' if "text" in have else "NULL"
    dom = '"domainId"' if "domainId" in have else "NULL"
    sql = (f'SELECT eventType, {dom}, {text_id}, {text}, count(*), count("start"), '
           f"group_concat(\"end\" - \"start\", ',') FROM {t} "
           f'WHERE eventType IN ({schema.NVTX_PUSH_POP}, {schema.NVTX_START_END}) AND "end" IS NOT NULL '
           "AND rowid > ? AND rowid <= ? GROUP BY 1, 2, 3, 4")
    first, last = trace.rows(f"SELECT min(rowid), max(rowid) FROM {t}")[0]
    if first is None:
        return []
    rows = _grouped_halves(Path(trace.info.sqlite_path or trace.info.path), sql, int(str(first)),
                           int(str(last)))
    s = trace.strings()

    def label(tid: object, txt: object) -> object:
        if tid is not None and tid in s:
            return s[tid]  # type: ignore[index]
        return txt

    created = trace.rows(f"SELECT {dom}, {text_id}, {text} FROM {t} "
                         f"WHERE eventType = {schema.NVTX_DOMAIN_CREATE}")
    domains = {d: label(tid, txt) for d, tid, txt in created}
    merged: dict[tuple[int, str], list[npt.NDArray[np.int64]]] = {}
    for etype, dom_id, tid, txt, n, n_start, durs in rows:
        if n_start != n or dom_id is None:
            return None
        d, x = domains.get(dom_id, ""), label(tid, txt)
        name = f"{'' if d is None else d}:{'' if x is None else x}"
        merged.setdefault((int(str(etype)), name), []).append(
            np.fromstring(str(durs), dtype=np.int64, sep=","))
    return [(e, name, np.concatenate(parts)) for (e, name), parts in merged.items()]


def _grouped_halves(path: Path, sql: str, first: int, last: int) -> list[tuple[Any, ...]]:
    """``sql`` over two halves of the rowids, on two connections in two threads, in table order.

    SQLite runs without Python's lock, so the halves are grouped at once; the caller merges their
    groups.
    """
    mid = (first - 1 + last) // 2
    halves: list[list[tuple[Any, ...]]] = [[], []]

    def half(k: int, lo: int, hi: int) -> None:
        con = connect_readonly(path)
        try:
            halves[k] = con.execute(sql, (lo, hi)).fetchall()
        finally:
            con.close()

    if last - first > 100_000:
        worker = threading.Thread(target=half, args=(1, mid, last), daemon=True)
        worker.start()
        half(0, first - 1, mid)
        worker.join()
    else:
        half(0, first - 1, last)
    return halves[0] + halves[1]


def inline_texts(trace: ExportSource, first: int, last: int) -> tuple[npt.NDArray[np.int64], str] | None:
    """The NVTX events with an inline ``text`` among rowids ``first``..``last``.

    (their rowids, their texts joined by NUL); None when none has one.
    """
    import numpy as np

    (ids_text, text), = trace.rows(
        f"SELECT group_concat(rowid, ','), group_concat(text, char(0)) FROM {schema.NVTX} "
        "WHERE rowid BETWEEN ? AND ? AND text IS NOT NULL", (int(first), int(last)))
    if ids_text is None:
        return None
    return np.fromstring(str(ids_text), dtype=np.int64, sep=","), str(text)  # noqa: NPY201 - C parser
