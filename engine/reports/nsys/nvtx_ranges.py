"""NVTX ranges of an nsys export by name, without a table of every NVTX event with its text.

Two questions about the ``NVTX_EVENTS`` table, each answered in SQLite over integer columns:

* :func:`range_names`: each row a filter of ``trace.columns("nvtx", ...)`` passes, named by a code
  into the distinct (domain, text) pairs (``trace.nvtx_names``). The rows are grouped by (domain
  id, text id, text): where the groups are few (one DISTINCT scan tells), each row's group is a
  code column (a CASE over the groups) that the columnar cache keeps, so a later run reads no
  text; else SQLite lists each group's row ids.
* :func:`range_columns`: the closed push/pop and start/end ranges (the ``"ranges"`` filter) with
  their columns and name codes in one read.

Where the page reader handles the table, both group the rows from the pages instead
(:mod:`engine.reports.nsys.nvtx_groups`: each text as a hash, no text read but one per group) and
the filtered columns are a mask over whole cached columns; SQLite's grouping is what is left
where it does not.

Texts are resolved as the ``nvtx`` table resolves them: the StringIds text of ``textId`` where it
resolves, else the inline ``text``; domain names come from the domain-create events.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.reports.nsys import schema
from engine.reports.nsys.nvtx_groups import grouped, rows_of_type
from engine.reports.trace_columns import FILTERS, Where

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.nsys.export_source import ExportSource

#: up to this many (domain, text id, text) groups, a row's group is a cached code column
_FEW_GROUPS = 64


def _domains(trace: ExportSource, text_id: str, resolved: Any) -> dict[Any, Any]:
    created = rows_of_type(trace, schema.NVTX_DOMAIN_CREATE, ('"domainId"', text_id, '"text"'))
    if created is None:
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
    s = trace.strings()

    def resolved(tid: Any, txt: Any) -> Any:  # the text of a textId when it resolves, else the text
        return s[tid] if tid is not None and tid in s else txt

    try:
        domains = _domains(trace, text_id, resolved)
        hashed = grouped(trace, FILTERS["nvtx"]["ranges"])  # from the pages, where they tell
        if hashed is not None:
            code, found = hashed
            cols = trace.columns("nvtx", list(names), where="ranges")
            return cols, code, [(domains.get(d, "") if d is not None else "", resolved(tid, txt))
                                for d, tid, txt in found]
        keys = trace.rows(f'SELECT DISTINCT "domainId", {text_id}, "text" FROM {t} WHERE {where} '
                          f"LIMIT {_FEW_GROUPS + 1}")
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


def range_names(trace: ExportSource, where: Where | None, *, domain_by_text: bool = False,
                ) -> tuple[npt.NDArray[np.int64], list[tuple[Any, Any]]]:
    """Each NVTX row's (domain, text) as a code, row for row with ``trace.columns("nvtx", ..., where=where)``.

    The rows are grouped by (domain id, text id, text) as :func:`range_columns` groups the closed
    ranges (a cached CASE code column where the groups are few, else SQLite lists each group's
    row ids). A text is its ``textId``'s string where that resolves, else the inline text; a
    domain is named by its create event the same way, or, with ``domain_by_text``, by the create
    event's inline text first. An unknown domain is "" (None where the row has no domain id).
    """
    import numpy as np

    from engine.system.errors import ReportError

    t = schema.NVTX
    if not trace.has_sqlite_table(t):
        return np.zeros(0, dtype=np.int64), []
    have = set(trace.column_names(t))
    text_id = '"textId"' if "textId" in have else "NULL"
    text = '"text"' if "text" in have else "NULL"
    dom = '"domainId"' if "domainId" in have else "NULL"
    cond = schema.where_sql("nvtx", where, have) if where is not None and where.clauses else "1"
    s = trace.strings()

    def resolved(tid: Any, txt: Any) -> Any:  # the text of a textId when it resolves, else the text
        return s[tid] if tid is not None and tid in s else txt

    def by_text(tid: Any, txt: Any) -> Any:
        return txt if txt is not None else s.get(tid) if tid is not None else None

    try:
        created = rows_of_type(trace, schema.NVTX_DOMAIN_CREATE, (dom, text_id, text))
        if created is None:
            created = trace.rows(f"SELECT {dom}, {text_id}, {text} FROM {t} "
                                 f'WHERE "eventType" = {schema.NVTX_DOMAIN_CREATE}')
        domains = {d: (by_text if domain_by_text else resolved)(tid, txt)
                   for d, tid, txt in created if d is not None}
        for _attempt in range(2):  # a second try where the table changed between the reads
            got = grouped(trace, where) or _grouped_codes(trace, t, cond, (dom, text_id, text))
            if got is not None:
                break
        else:
            raise ReportError("the NVTX events changed while they were read; open the report again.")
    except sqlite3.Error as exc:
        raise ReportError(f"the NVTX events could not be read from the export ({exc}); "
                          "export the report again.") from exc
    code, groups = got
    pairs = [(domains.get(d, "") if d is not None else None, resolved(tid, txt))
             for d, tid, txt, *_ in groups]
    return code, pairs


def _grouped_codes(trace: ExportSource, t: str, cond: str, cols: tuple[str, str, str],
                   ) -> tuple[npt.NDArray[np.int64], list[tuple[Any, ...]]] | None:
    """Each row's group of (domain id, text id, text) where ``cond`` holds, and the groups (None: changed)."""
    import numpy as np

    dom, text_id, text = cols
    keys = trace.rows(f"SELECT DISTINCT {dom}, {text_id}, {text} FROM {t} WHERE {cond} "
                      f"LIMIT {_FEW_GROUPS + 1}")
    if not keys:
        return np.zeros(0, dtype=np.int64), []
    if len(keys) <= _FEW_GROUPS and all(_literal(v) is not None for k in keys for v in k):
        got = trace.column_store().read_where(t, {"group": _group_case(keys, text_id, (dom, text_id, text))},
                                              cond)
        code = np.asarray(got["group"], dtype=np.int64)
        if len(code) and int(code.min()) < 0:
            return None  # a row of no group: the table changed between the two reads
        return code, [tuple(k) for k in keys]
    groups = trace.rows(f"SELECT {dom}, {text_id}, {text}, group_concat(rowid, ',') "
                        f"FROM {t} WHERE {cond} GROUP BY 1, 2, 3")
    rowid = trace.column_store().read_where(t, {"rowid": "rowid"}, cond)["rowid"]
    found = _codes_by_rowid(groups, np.asarray(rowid))
    return None if found is None else (found, groups)


def _literal(v: Any) -> str | None:
    """``v`` as an SQL literal for ``IS`` (None where it cannot be written as one)."""
    if v is None:
        return "NULL"
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return None


def _group_case(keys: list[tuple[Any, ...]], text_id: str,
                cols: tuple[str, str, str] | None = None) -> str:
    """A CASE giving each row the index of its (domain id, text id, text) among ``keys`` (-1: none)."""
    cols = cols or ('"domainId"', text_id, '"text"')
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
