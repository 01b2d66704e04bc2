"""The copy rules' rows: GPU copies (or memsets) joined with their runtime calls, on any trace.

A 10M-kernel report has 69M runtime calls and 20M copies; the rules use a few of them (the
calls whose name a rule looks for, the copies of the kinds it reports). The columns come through
``trace.columns`` (an nsys export's columnar cache, filtered by name and time as SQLite scans;
a Kineto trace's tables), the join of copies and calls is done on integer arrays, the top
``rows`` are picked with numpy (argpartition) and only their printed columns are read.

The join is nsys's: on an export (every copy has its process) each call is joined with every copy
of its correlation id (nsys 2025.3 joins on correlationId alone: in a report of several processes
a copy matches the calls of every process with its id), rows in call order. A Kineto trace puts
GPU activity in a per-device lane: each copy takes the first cudaMemcpy*/cudaMemset* call with its
correlation id, and that call's process, rows in copy order. Missing values (:data:`NULL`) print
as empty fields and sort last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.nsys.analyze.common import call_names, empty_rule_frame, nullable_ints, window_filter
from engine.analysis.tables import unique_first
from engine.reports.trace_columns import NULL, Clause, Where, name_in

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

#: the memory-kind columns each table prints (as labels)
_KINDS = {"memcpy": ["srcKind", "dstKind"], "memset": ["memKind"]}
#: the columns the rules' filters read
_FILTERS = {"memcpy": ["copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId"], "memset": ["memKind"]}
_BIG = np.iinfo(np.int64).max


@dataclass
class Found:
    """The rule's table (its top rows) and totals of every joined row."""

    table: pd.DataFrame
    n: int
    total_ns: float
    total_bytes: float = 0.0
    pageable: int = 0


def top_rows(keys: list[npt.NDArray[Any]], primary: npt.NDArray[np.int64],
             rows: int) -> npt.NDArray[np.intp]:
    """Indices of the first ``rows`` ordered by ``primary`` (ascending), then ``keys`` (last first).

    As ``np.lexsort(keys + [primary])[:rows]``, but only the rows that can be among the first
    ``rows`` (argpartition on ``primary``) are sorted.
    """
    n = len(primary)
    idx = np.arange(n)
    if 0 <= rows < n:
        kth = np.partition(primary, rows - 1)[rows - 1] if rows > 0 else None
        if kth is None:
            return idx[:0]
        idx = np.flatnonzero(primary <= kth)
    order = np.lexsort([k[idx] for k in keys] + [primary[idx]])
    out: npt.NDArray[np.intp] = idx[order]
    return out if rows < 0 else out[:rows]


def memory_call(name: str) -> bool:
    """cudaMemcpy* and cudaMemset* (case-insensitive, as SQLite's LIKE): the calls copies join with."""
    return name.lower().startswith(("cudamemcpy", "cudamemset"))


@dataclass
class Joined:
    """The copies joined with their calls: ``op``/``call`` index ``ops``/``calls`` per joined row.

    ``pid`` is each joined row's process.
    """

    ops: dict[str, Any]
    calls: dict[str, Any]
    op: npt.NDArray[np.int64]
    call: npt.NDArray[np.int64]
    pid: npt.NDArray[np.int64]
    names: dict[int, str]

    @property
    def total(self) -> int:
        """Joined rows."""
        return len(self.op)


def joined(trace: Trace, table: str, test: Callable[[str], bool],
           keep: Callable[[dict[str, Any]], npt.NDArray[np.bool_]],
           window: tuple[int | None, int | None]) -> Joined:
    """The copies (``table`` memcpy or memset) that ``keep`` passes, joined with the calls ``test`` passes."""
    none = np.zeros(0, dtype=np.int64)
    if not (trace.has(table) and trace.has("api")):
        return Joined({}, {}, none, none, none, {})
    if not call_names(trace, test):  # no call the rule looks for: nothing else is read
        return Joined({}, {}, none, none, none, {})
    where = window_filter(window)
    kinds = trace.columns(table, ["bytes", *_FILTERS[table]], where=where)
    sel = np.flatnonzero(keep(kinds))
    if not len(sel):  # none of the kinds the rule reports: nothing else is read
        return Joined({}, {}, none, none, none, {})
    ops = trace.columns(table, ["rowid", "correlationId", "start", "end", "globalPid", "pid"], where=where)
    ops = {k: np.asarray(v)[sel] for k, v in (kinds | ops).items()}
    per_call = bool((ops["globalPid"] != NULL).all())
    names = call_names(trace, test if per_call else memory_call)
    if not names:
        return Joined(ops, {}, none, none, none, names)
    calls = trace.columns("api", ["correlationId", "nameId", "pid"], where=name_in(names))
    if per_call:
        op, call = _each_call(ops["correlationId"], calls["correlationId"])
        pid = ops["pid"][op]
    else:
        op, call = _first_call(ops["correlationId"], calls["correlationId"])
        passes = np.array([test(names[int(i)]) for i in calls["nameId"][call].tolist()], dtype=bool)
        op, call = op[passes], call[passes]
        pid = calls["pid"][call]
    return Joined(ops, calls, op, call, np.asarray(pid, dtype=np.int64), names)


def _each_call(op_corr: npt.NDArray[Any], call_corr: npt.NDArray[Any]
               ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every call with the copies of its correlation id (calls in table order, then copies)."""
    order = np.argsort(op_corr, kind="stable")
    sorted_corr = op_corr[order]
    lo = np.searchsorted(sorted_corr, call_corr, side="left")
    cnt = np.searchsorted(sorted_corr, call_corr, side="right") - lo
    cnt[call_corr == NULL] = 0
    total = int(cnt.sum())
    call = np.repeat(np.arange(len(cnt)), cnt)
    first = np.cumsum(cnt) - cnt
    op = order[lo[call] + (np.arange(total) - first[call])]
    return op.astype(np.int64), call.astype(np.int64)


def _first_call(op_corr: npt.NDArray[Any], call_corr: npt.NDArray[Any]
                ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each copy (in table order) with the first call of its correlation id, where there is one."""
    with_id = np.flatnonzero(call_corr != NULL)
    uniq, first, _ = unique_first(np.asarray(call_corr)[with_id])
    if not len(uniq):
        none = np.zeros(0, dtype=np.int64)
        return none, none
    pos = np.clip(np.searchsorted(uniq, op_corr), 0, len(uniq) - 1)
    op = np.flatnonzero((uniq[pos] == op_corr) & (op_corr != NULL))
    return op.astype(np.int64), with_id[first[pos[op]]].astype(np.int64)


def copies(trace: Trace, table: str, test: Callable[[str], bool],
           keep: Callable[[dict[str, Any]], npt.NDArray[np.bool_]],
           window: tuple[int | None, int | None], rows: int, columns: list[str]) -> Found:
    """The rule's rows: :func:`joined`, longest first (ties in join order), ``rows`` of them."""
    j = joined(trace, table, test, keep, window)
    if not j.total:
        return Found(empty_rule_frame(columns), 0, 0.0)
    ops, op = j.ops, j.op
    start, end = ops["start"][op], ops["end"][op]
    dur = np.where((start == NULL) | (end == NULL), NULL, end - start)
    pick = top_rows([np.arange(j.total)], np.where(dur == NULL, _BIG, -dur), rows)
    nbytes = ops["bytes"][op]
    pageable = int(((ops["srcKind"][op] == 0) | (ops["dstKind"][op] == 0)).sum()) if table == "memcpy" else 0
    labels = [j.names[int(i)] for i in j.calls["nameId"][j.call[pick]].tolist()]
    found = _table(trace, table, ops, op[pick], j.pid[pick], dur[pick], labels, columns)
    return Found(found, j.total, float(dur[dur != NULL].sum()), float(nbytes[nbytes != NULL].sum()),
                 pageable)


def _table(trace: Trace, table: str, ops: dict[str, Any], rows: npt.NDArray[np.int64],
           pid: npt.NDArray[np.int64], dur: npt.NDArray[np.int64], api_names: list[str],
           columns: list[str]) -> pd.DataFrame:
    """The printed columns of a few joined rows (in the given order)."""
    import pandas as pd

    kinds = _KINDS[table]
    details = ["deviceId", "contextId", "greenContextId", "streamId", *kinds]
    rowids = np.asarray(ops["rowid"][rows])
    if len(rowids):
        got = trace.columns(table, ["rowid", *details],
                            where=Where((Clause("rowid", "in", tuple(sorted(set(rowids.tolist())))),)))
        order = np.argsort(got["rowid"], kind="stable")
        at = order[np.searchsorted(np.asarray(got["rowid"])[order], rowids)]
        col = {c: np.asarray(got[c])[at] for c in details}
    else:
        col = {c: rowids for c in details}
    labels = _kind_labels(trace, table)
    out: dict[str, Any] = {"Duration (ns)": nullable_ints(dur),
                           "Start (ns)": nullable_ints(ops["start"][rows])}
    for c, name in zip(kinds, [c for c in columns if "Kind" in c], strict=True):
        out[name] = pd.Series([labels.get(int(v)) for v in col[c].tolist()], dtype="object")
    nbytes = ops["bytes"][rows]
    out["Bytes (MB)"] = pd.Series(np.where(nbytes == NULL, np.nan, nbytes / 1e6)).round(3)
    green = col["greenContextId"]
    out.update({"PID": nullable_ints(pid), "Device ID": nullable_ints(col["deviceId"]),
                "Context ID": nullable_ints(col["contextId"]),
                "Green Context ID": nullable_ints(np.where(green == 0, NULL, green)),
                "Stream ID": nullable_ints(col["streamId"]),
                "API Name": pd.Series(api_names, dtype="object")})
    return pd.DataFrame(out, columns=columns)


def _kind_labels(trace: Trace, table: str) -> dict[int, str]:
    """Memory kind -> its label: the export's enum, or the pairs of a trace's table (Kineto)."""
    labels = getattr(trace, "memory_kind_labels", None)
    if labels is not None:
        return dict(labels())
    out: dict[int, str] = {}
    for c in _KINDS[table]:
        pairs = trace.table(table, [c, f"{c}Name"]).dropna().drop_duplicates()
        out.update({int(k): str(v) for k, v in zip(pairs[c], pairs[f"{c}Name"], strict=True)})
    return out
