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

from engine.analysis.tables import pid_codes

if TYPE_CHECKING:
    from collections.abc import Callable

    from engine.reports.base import Trace

_T = "NVTX_EVENTS"
_NULL = -(2**62)
_RANGE = '"eventType" IN (59, 60) AND "end" IS NOT NULL AND "start" IS NOT NULL'


def _nsys(trace: Trace) -> Any:
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if not isinstance(trace, NsysSqliteTrace) or not trace.has_sqlite_table(_T):
        return None
    have = set(trace.column_names(_T))
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


class Ranges:
    """Closed NVTX ranges (or Kineto annotations) as columns, in table order: no DataFrame.

    Attributes:
        start, end: int64 ns.
        name, pid, tid: int codes into ``names`` (labels), ``pids``, ``tids`` (process and
            thread ids as text, :func:`~engine.analysis.tables.pid_keys`); each label has one code.

    """

    def __init__(self, start: np.ndarray, end: np.ndarray, name: np.ndarray, names: list[str],
                 pid: np.ndarray, pids: list[str], tid: np.ndarray, tids: list[str]) -> None:
        self.start, self.end = start, end
        self.name, self.names = _merged_codes(name, names)
        self.pid, self.pids = _merged_codes(pid, pids)
        self.tid, self.tids = _merged_codes(tid, tids)

    def __len__(self) -> int:
        return len(self.start)

    def code(self, labels: list[str], label: str) -> int:
        """The code of ``label`` among ``labels`` (-1 when absent)."""
        try:
            return labels.index(label)
        except ValueError:
            return -1

    @classmethod
    def empty(cls) -> Ranges:
        """No ranges."""
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z, z, [], z, [], z, [])

    @classmethod
    def from_labels(cls, start: np.ndarray, end: np.ndarray, name: Any, pidk: Any, tidk: Any) -> Ranges:
        """From text columns (names, process and thread keys), coded here (pandas: the table path)."""
        import pandas as pd

        cols = []
        for col in (name, pidk, tidk):
            c, u = pd.factorize(pd.Series(col, dtype=object, copy=False), use_na_sentinel=False)
            cols.append((c.astype(np.int64), [str(x) for x in u]))
        (n, nl), (p, pl), (t, tl) = cols
        return cls(np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64), n, nl, p, pl, t, tl)


def _merged_codes(codes: np.ndarray, labels: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes whose labels repeat ("step 1" and "step 2" are both "step N") merged into one each."""
    uniq: dict[str, int] = {}
    remap = np.array([uniq.setdefault(lbl, len(uniq)) for lbl in labels] or [0], dtype=np.int64)
    if len(uniq) == len(labels):
        return np.asarray(codes, dtype=np.int64), list(labels)
    return remap[codes], list(uniq)


def ranges_columns(trace: Trace, label: Callable[[str, str], str]) -> Ranges | None:
    """The closed ranges (``label(domain, text)`` their names) of an nsys export, or None (use the table).

    What ``steps.ranges_table`` builds from ``trace.table("nvtx")``, without pandas. The ranges are
    grouped by (domain id, text id, text): where the groups are few (one DISTINCT scan tells),
    each row's group comes as a code column (a CASE over the groups) that the columnar cache
    keeps, so a later run reads no text; else SQLite lists each group's row ids.
    """
    t = _nsys(trace)
    if t is None:
        return None
    has_id = "textId" in set(t.column_names(_T))
    text_id = '"textId"' if has_id else "NULL"
    exprs = {"rowid": "rowid", "start": '"start"', "end": '"end"', "globalTid": '"globalTid"'}
    try:
        keys = t.rows(f'SELECT DISTINCT "domainId", {text_id}, "text" FROM {_T} WHERE {_RANGE} '
                      f"LIMIT {_FEW_GROUPS + 1}")
        created = t.rows(f'SELECT "domainId", {text_id}, "text" FROM {_T} WHERE "eventType" = 75')
        coded = len(keys) <= _FEW_GROUPS and all(_literal(v) is not None for k in keys for v in k)
        if coded:
            exprs["group"] = _group_case(keys, text_id)
            groups: list[tuple[Any, ...]] = [tuple(k) for k in keys]
        else:
            groups = t.rows(f'SELECT "domainId", {text_id}, "text", group_concat(rowid, \',\') FROM {_T} '
                            f"WHERE {_RANGE} GROUP BY 1, 2, 3")
        cols = t.column_store().read_where(_T, exprs, _RANGE)
    except sqlite3.Error:
        return None
    if not groups:
        return Ranges.empty()
    s = t.strings()

    def resolved(tid: Any, txt: Any) -> Any:  # the text of a textId when it resolves, else the text
        return s[tid] if tid is not None and tid in s else txt

    domains: dict[Any, Any] = {}
    for d, tid, txt in created:  # the last domain-create event of an id wins, as dict(zip()) gives
        if d is not None:  # a NULL id names no domain (NaN never equals NaN in the table path)
            domains[d] = resolved(tid, txt)
    names: list[str] = []
    for d, tid, txt, *_ in groups:
        dom = domains.get(d, "") if d is not None else ""
        text = resolved(tid, txt)
        names.append(label("" if dom is None else str(dom), "" if text is None else str(text)))
    name_code: np.ndarray | None
    if coded:
        name_code = np.asarray(cols["group"], dtype=np.int64)
        if len(name_code) and int(name_code.min()) < 0:
            return None  # a row of no group: the table changed between the two reads
    else:
        name_code = _codes_by_rowid(groups, np.asarray(cols["rowid"]))
        if name_code is None:
            return None
    gtid = np.asarray(cols["globalTid"])
    null = gtid == _NULL
    g: Any = np.where(null, np.nan, gtid) if null.any() else gtid
    (pc, pl), (tc, tl) = (pid_codes(np.asarray(p)) for p in ((g // (1 << 24)) % (1 << 24), g % (1 << 24)))
    return Ranges(np.asarray(cols["start"], dtype=np.int64), np.asarray(cols["end"], dtype=np.int64),
                  name_code, names, pc, pl, tc, tl)


#: up to this many (domain, text id, text) groups, a row's group is a cached code column
_FEW_GROUPS = 64


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


def _codes_by_rowid(groups: list[tuple[Any, ...]], rowid: np.ndarray) -> np.ndarray | None:
    """Each range's group: its row id looked up among the groups' listed row ids (None: they differ)."""
    row_ids = [np.fromstring(str(g[3]), dtype=np.int64, sep=",") for g in groups]
    ids_all = np.concatenate(row_ids)
    code_all = np.repeat(np.arange(len(groups)), [len(r) for r in row_ids])
    order = np.argsort(ids_all)
    pos = np.searchsorted(ids_all[order], rowid)
    if len(rowid) != len(ids_all) or not np.array_equal(ids_all[order][pos], rowid):
        return None  # the table changed between the two reads
    out: np.ndarray = code_all[order][pos]
    return out
