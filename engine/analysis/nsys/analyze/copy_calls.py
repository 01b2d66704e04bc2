"""The API-call rules on a big nsys export, through SQL-filtered column reads (issue 16).

A 10M-kernel report has 69M runtime calls and 20M copies; the rules use a few of them (the
calls whose name a rule looks for, the copies of the kinds it reports). Here SQLite filters the
rows while it scans (:meth:`engine.reports.nsys.columns.ColumnStore.read_where`), the join of copies
and calls is done on integer arrays, the top ``rows`` are picked with numpy (argpartition) and
only they become a DataFrame, with the same values and order as the general path in
:mod:`.copy_tables` (which Kineto traces and unusual exports still take).

Each function returns None when the fast path does not apply (no columnar cache, a column
missing, a NULL where the general path would treat it specially); the caller then takes the
general path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import MEMCPY, MEMSET, RUNTIME
from engine.reports.nsys.stats_reads import rows_by_rowid

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

_RUNTIME = RUNTIME
_TABLES = {"memcpy": MEMCPY, "memset": MEMSET}
_SUFFIX = re.compile(r"_v\d{4}$")


@dataclass
class Found:
    """The top rows of a rule (``top``, as the general path's joined frame) and totals of all."""

    top: pd.DataFrame
    n: int
    total_ns: float
    total_bytes: float = 0.0
    pageable: int = 0


def _store(trace: Trace, tables: list[str]) -> Any:
    store = getattr(trace, "column_store", None)
    has = getattr(trace, "has_sqlite_table", None)
    if store is None or has is None or not all(has(t) for t in tables):
        return None
    return store()


def _name_ids(trace: Trace, test: Callable[[str], bool]) -> dict[int, str]:
    """String ids (and names) of the names that pass ``test``: the calls a rule can use."""
    strings: dict[int, str] = trace.strings()  # type: ignore[attr-defined]
    return {i: n for i, n in strings.items() if test(str(n))}


def _window_sql(window: tuple[int | None, int | None]) -> str:
    start, end = window
    parts = []
    if start is not None:
        parts.append(f'"start" >= {int(start)}')
    if end is not None:
        parts.append(f'"end" <= {int(end)}')
    return "".join(f" AND {p}" for p in parts)


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


def copies(trace: Trace, table: str, test: Callable[[str], bool], where: str,
           window: tuple[int | None, int | None], rows: int) -> Found | None:
    """The copies (``table`` memcpy or memset) of the calls that pass ``test``, joined as nsys does.

    ``where`` is the SQL filter on the copies (kinds, sizes). The join is on correlationId alone
    (nsys 2025.3: a copy matches every call with its id), rows in call order, then longest first.
    """
    import pandas as pd

    j = joined(trace, table, test, where, window)
    if j is None:
        return None
    if j.total == 0:
        return Found(pd.DataFrame(), 0, 0.0)
    ops, calls, op, call = j.ops, j.calls, j.op, j.call
    dur = ops["end"][op] - ops["start"][op]
    pick = top_rows([np.arange(j.total)], -dur, rows)
    pageable = int((ops["pageable"][op] == 1).sum()) if "pageable" in ops else 0
    top = _details(trace, _TABLES[table], table, ops["rowid"][op[pick]])
    top["apiName"] = pd.Series([j.names[int(i)] for i in calls["nameId"][call[pick]].tolist()],
                               dtype="object")
    return Found(top, j.total, float(dur.sum()), float(ops["bytes"][op].sum()), pageable)


@dataclass
class Joined:
    """The copies joined with their calls: ``op``/``call`` index ``ops``/``calls`` per joined row."""

    ops: dict[str, Any]
    calls: dict[str, Any]
    op: npt.NDArray[np.int64]
    call: npt.NDArray[np.int64]
    names: dict[int, str]

    @property
    def total(self) -> int:
        """Joined rows."""
        return len(self.op)


def joined(trace: Trace, table: str, test: Callable[[str], bool], where: str,
           window: tuple[int | None, int | None]) -> Joined | None:
    """:func:`copies`' join from the columnar cache, without pandas; None: use the general path."""
    t = _TABLES[table]
    store = _store(trace, [_RUNTIME, t])
    if store is None:
        return None
    none = np.zeros(0, dtype=np.int64)
    names = _name_ids(trace, test)
    if not names:
        return Joined({}, {}, none, none, names)
    ids = ",".join(str(i) for i in sorted(names))
    api_exprs = {"correlationId": '"correlationId"', "nameId": '"nameId"'}
    ops_exprs = {"rowid": "rowid", "correlationId": '"correlationId"', "start": '"start"',
                 "end": '"end"', "bytes": '"bytes"', "gpidNull": '"globalPid" IS NULL'}
    if table == "memcpy":
        ops_exprs["pageable"] = '("srcKind" = 0 OR "dstKind" = 0)'
    try:
        # The copies first: where none is of the kinds the rule reports, no call is read.
        ops = store.read_where(t, ops_exprs, f"({where})" + _window_sql(window))
        if not len(ops["rowid"]):
            return Joined(ops, {}, none, none, names)
        calls = store.read_where(_RUNTIME, api_exprs, f'"nameId" IN ({ids})')
    except Exception:  # noqa: BLE001 - any read problem (an older schema): the general path
        return None
    if has_null(calls["correlationId"]) or any(
            has_null(ops[c]) for c in ("correlationId", "start", "end", "bytes")) or \
            bool((ops["gpidNull"] != 0).any()):
        return None
    # Join: every call with the copies of its correlationId (copies in table order).
    order = np.argsort(ops["correlationId"], kind="stable")
    sorted_corr = ops["correlationId"][order]
    lo = np.searchsorted(sorted_corr, calls["correlationId"], side="left")
    cnt = np.searchsorted(sorted_corr, calls["correlationId"], side="right") - lo
    total = int(cnt.sum())
    if total == 0:
        return Joined(ops, calls, none, none, names)
    call = np.repeat(np.arange(len(cnt)), cnt)
    first = np.cumsum(cnt) - cnt
    op = order[lo[call] + (np.arange(total) - first[call])]
    return Joined(ops, calls, op, call, names)


def _details(trace: Trace, t: str, table: str, rowids: npt.NDArray[np.int64]) -> pd.DataFrame:
    """The columns the rule prints, for a few rows (in the given order)."""
    import pandas as pd

    kinds = ["srcKind", "dstKind"] if table == "memcpy" else ["memKind"]
    cols = ["start", "end", "bytes", "globalPid", "deviceId", "contextId", "greenContextId",
            "streamId", *kinds]
    ids = [int(r) for r in rowids.tolist()]
    got = rows_by_rowid(trace, t, cols, ids)  # type: ignore[arg-type]
    df = pd.DataFrame.from_records([got[i] for i in ids], columns=cols)
    labels = trace.memory_kind_labels()  # type: ignore[attr-defined]
    for c in kinds:
        df[f"{c}Name"] = df[c].map(labels).astype("object")
    gpid = pd.to_numeric(df["globalPid"]).astype("Int64")
    df["pid"] = (gpid // (1 << 24)) % (1 << 24)
    return df
