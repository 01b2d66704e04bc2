"""NVTX ranges from integer columns: no table of every NVTX event with its text.

``ranges_columns(trace, label)`` gives what ``steps.ranges_table`` builds from ``trace.table("nvtx")``
(closed push/pop and start/end ranges: ``start``, ``end``, ``name``, ``pidk``, ``tidk``, in table
order) where the trace's reader gives each range's name as a code into the distinct (domain, text)
pairs (``trace.nvtx_range_columns``: an nsys SQLite export's, :mod:`engine.reports.nsys.nvtx_ranges`),
so each distinct name is labelled once; None elsewhere (the table path is used then).
``nvtx_span`` gives the first start and last end of every NVTX event from
``trace.columns("nvtx", ...)`` on every trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.tables import pid_codes
from engine.reports.base import NULL, decode_global_tid
from engine.system.errors import ReportError

if TYPE_CHECKING:
    from collections.abc import Callable

    from engine.reports.base import Trace

def nvtx_span(trace: Trace) -> tuple[int | None, int | None] | None:
    """(first start, last end) of the NVTX events (None where none has one); None: use the table.

    From ``trace.columns("nvtx", ["start", "end"])`` (an export's columnar cache, other traces'
    tables); None only where the export cannot be read that way.
    """
    try:
        cols = trace.columns("nvtx", ["start", "end"])
    except ReportError:
        return None
    out: list[int | None] = []
    for name, pick in (("start", np.min), ("end", np.max)):
        v = cols[name]
        v = v[v != NULL] if len(v) and int(v.min()) == NULL else v
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

    What ``steps.ranges_table`` builds from ``trace.table("nvtx")``, without pandas: the export's
    reader names each range by a code into the distinct (domain, text) pairs
    (:meth:`~engine.reports.base.Trace.nvtx_range_columns`), so each name is labelled once; None
    where the trace has no such reader (the ``nvtx`` table is read then).
    """
    if not trace.has_columns("nvtx", ["start", "end", "eventType", "globalTid", "domainId", "text"]):
        return None
    got = trace.nvtx_range_columns(["start", "end", "globalTid"])
    if got is None:
        return None
    cols, name_code, pairs = got
    if not pairs:
        return Ranges.empty()
    names = [label("" if dom is None else str(dom), "" if text is None else str(text)) for dom, text in pairs]
    gtid = np.asarray(cols["globalTid"])
    null = gtid == NULL
    g: Any = np.where(null, np.nan, gtid) if null.any() else gtid
    (pc, pl), (tc, tl) = (pid_codes(np.asarray(p)) for p in decode_global_tid(g))
    return Ranges(np.asarray(cols["start"], dtype=np.int64), np.asarray(cols["end"], dtype=np.int64),
                  name_code, names, pc, pl, tc, tl)
