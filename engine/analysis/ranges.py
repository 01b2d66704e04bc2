"""NVTX ranges of an nsys export from integer columns: no table of every NVTX event with its text.

``ranges_frame(trace, label)`` gives what ``steps.ranges_table`` builds from ``trace.table("nvtx")``
(closed push/pop and start/end ranges: ``start``, ``end``, ``name``, ``pidk``, ``tidk``, in table
order) for an nsys SQLite export: SQLite groups the ranges by (domain, text id, text) and lists each
group's row ids (one scan, parsed by numpy), so each distinct name is resolved and labelled once; the
starts, ends and threads come from the columnar cache. ``nvtx_span`` gives the first start and last
end of every NVTX event from the same cache. Both return None where the export does not fit (the
table path is used then).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.tables import pid_keys

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from engine.reports.base import Trace

_T = "NVTX_EVENTS"
_NULL = -(2**62)
_RANGE = '"eventType" IN (59, 60) AND "end" IS NOT NULL AND "start" IS NOT NULL'


def _nsys(trace: Trace) -> Any:
    from engine.reports.nsys_sqlite import NsysSqliteTrace

    if not isinstance(trace, NsysSqliteTrace) or not trace.has_sqlite_table(_T):
        return None
    have = set(trace.columns(_T))
    if not {"start", "end", "eventType", "globalTid", "domainId", "text"} <= have:
        return None
    return trace


def nvtx_span(trace: Trace) -> tuple[int | None, int | None] | None:
    """(first start, last end) of the NVTX events (None where none has one); None: use the table."""
    t = _nsys(trace)
    if t is None:
        return None
    try:
        cols = t.column_store().read(_T, {"start": '"start"', "end": '"end"'})
    except sqlite3.Error:
        return None
    out: list[int | None] = []
    for name, pick in (("start", np.min), ("end", np.max)):
        v = cols[name]
        v = v[v != _NULL] if len(v) and int(v.min()) == _NULL else v
        out.append(int(pick(v)) if len(v) else None)
    return out[0], out[1]


def ranges_frame(trace: Trace, label: Callable[[str, str], str]) -> pd.DataFrame | None:
    """The closed ranges with ``start``, ``end``, ``name`` (``label(domain, text)``), ``pidk``, ``tidk``."""
    import pandas as pd

    t = _nsys(trace)
    if t is None:
        return None
    has_id = "textId" in set(t.columns(_T))
    text_id = '"textId"' if has_id else "NULL"
    try:
        groups = t.rows(f'SELECT "domainId", {text_id}, "text", group_concat(rowid, \',\') FROM {_T} '
                        f"WHERE {_RANGE} GROUP BY 1, 2, 3")
        created = t.rows(f'SELECT "domainId", {text_id}, "text" FROM {_T} WHERE "eventType" = 75')
        cols = t.column_store().read_where(
            _T, {"rowid": "rowid", "start": '"start"', "end": '"end"', "globalTid": '"globalTid"'}, _RANGE)
    except sqlite3.Error:
        return None
    if not groups:
        return pd.DataFrame(columns=["start", "end", "name", "pidk", "tidk"])
    s = t.strings()

    def resolved(tid: Any, txt: Any) -> Any:  # the text of a textId when it resolves, else the text
        return s[tid] if tid is not None and tid in s else txt

    domains: dict[Any, Any] = {}
    for d, tid, txt in created:  # the last domain-create event of an id wins, as dict(zip()) gives
        if d is not None:  # a NULL id names no domain (NaN never equals NaN in the table path)
            domains[d] = resolved(tid, txt)
    names: list[str] = []
    row_ids: list[np.ndarray] = []
    for d, tid, txt, ids in groups:
        dom = domains.get(d, "") if d is not None else ""
        text = resolved(tid, txt)
        names.append(label("" if dom is None else str(dom), "" if text is None else str(text)))
        row_ids.append(np.fromstring(str(ids), dtype=np.int64, sep=","))
    # each range's name: its row id looked up among the groups' row ids
    ids_all = np.concatenate(row_ids)
    code_all = np.repeat(np.arange(len(groups)), [len(r) for r in row_ids])
    order = np.argsort(ids_all)
    rowid = cols["rowid"]
    pos = np.searchsorted(ids_all[order], rowid)
    if len(rowid) != len(ids_all) or not np.array_equal(ids_all[order][pos], rowid):
        return None  # the table changed between the two reads
    name_arr = np.array(names, dtype=object)[code_all[order][pos]]
    gtid = cols["globalTid"]
    null = gtid == _NULL
    g: Any = np.where(null, np.nan, gtid) if null.any() else gtid
    pid, tid = (g // (1 << 24)) % (1 << 24), g % (1 << 24)
    return pd.DataFrame({
        "start": np.asarray(cols["start"], dtype=np.int64), "end": np.asarray(cols["end"], dtype=np.int64),
        "name": pd.Series(name_arr, dtype=object, copy=False),
        "pidk": pd.Series(pid_keys(pid), dtype=object, copy=False),
        "tidk": pd.Series(pid_keys(tid), dtype=object, copy=False),
    })
