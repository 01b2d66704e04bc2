"""What ``trace.columns(table, names, where=...)`` answers, for every kind of trace.

One way to read a table's integer columns as numpy arrays, row for row with ``trace.table(table)``:

* ``table`` is the engine's table name (a key of :data:`engine.reports.base.TABLES`: ``kernels``,
  ``memcpy``, ``api``, ``nvtx``, ...).
* ``names`` are the engine's integer columns of that table (its text columns, :data:`TEXT`, are not
  columns here: ask for their ids), plus the derived columns of :data:`DERIVED`: ``duration``
  (end - start), ``nameId``/``shortNameId``/``mangledNameId``/``textId`` (the text's id in
  ``trace.strings()``; an nsys export's ``textId`` is NULL where it keeps the text inline),
  ``pid``/``tid`` (from ``globalPid``/``globalTid``), ``gridShape``/``blockShape`` (packed launch
  shapes), ``gpu`` and ``rowid``.
  A column the trace lacks (an older nsys, a Kineto trace) reads as all :data:`NULL`.
* ``where`` keeps only the rows a filter passes: the name of one of :data:`FILTERS` for that table
  (``"ranges"`` of ``nvtx``, ``"kernel_launches"`` of ``api``, say), or a :class:`Where` made by
  :func:`name_in`, :func:`starts_from`, :func:`ends_by` and :func:`launches_of` (combined with
  ``&``). Callers never write SQL.

Values are int64, or int32 for ids and kinds that fit (:data:`NARROW`); :data:`NULL` stands for a
missing value. An nsys export answers from its columnar cache (the SQL of each column and filter is
in :mod:`engine.reports.nsys.schema`); other traces answer from their pandas tables through
:func:`from_tables`, which is the default :meth:`engine.reports.base.Trace.columns`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

#: Stands for a missing value (SQL NULL, NaN) in integer columns (never a real time, id or size).
NULL = -(2**62)

#: NVTX ``eventType`` values: push/pop range, start/end range, mark (nsys's NvtxEventType), domain create.
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75
#: the same ranges written by NVTXT (nsys's text-annotation twins)
NVTXT_PUSH_POP = 70
NVTXT_START_END = 71

_PACK = 1 << 24


def decode_global_tid(global_tid: Any) -> tuple[Any, Any]:
    """Split an nsys ``globalTid``/``globalPid`` into (pid, tid); works on ints, numpy arrays and Series."""
    import numpy as np

    if isinstance(global_tid, (int, np.ndarray)) and getattr(global_tid, "dtype", np.dtype(int)).kind in "iu":
        # integers: shifts and masks (3x faster than division; the same values, negatives too)
        return (global_tid >> 24) & (_PACK - 1), global_tid & (_PACK - 1)
    # Floor division and modulo work on floats (NaN) and Series too (a pandas Series has no >>).
    return (global_tid // _PACK) % _PACK, global_tid % _PACK


@dataclass(frozen=True)
class Derived:
    """A column computed from the engine table's columns ``source``.

    ``how``: ``"duration"`` (``source[1] - source[0]``, NULL where either is), ``"id"`` (the id of
    the text ``source[0]`` in ``trace.strings()``), ``"copy"`` (the column ``source[0]`` itself),
    ``"pid"``/``"tid"`` (decoded from the global id ``source[0]``), ``"shape"`` (a launch shape
    packed as x << 32 | y << 16 | z; NULL where x is not in [0, 2**31) or y or z not in
    [0, 2**16)) or ``"rowid"``.
    """

    source: tuple[str, ...]
    how: str


_DURATION = Derived(("start", "end"), "duration")
_ROWID = Derived((), "rowid")
_PID = Derived(("pid",), "copy")
_TID = Derived(("tid",), "copy")

#: table -> derived column -> how it is computed (the nsys export's SQL: engine.reports.nsys.schema)
DERIVED: dict[str, dict[str, Derived]] = {
    "kernels": {"duration": _DURATION, "nameId": Derived(("name",), "id"),
                "shortNameId": Derived(("shortName",), "id"),
                "mangledNameId": Derived(("mangledName",), "id"), "pid": _PID, "rowid": _ROWID,
                "gridShape": Derived(("gridX", "gridY", "gridZ"), "shape"),
                "blockShape": Derived(("blockX", "blockY", "blockZ"), "shape")},
    "memcpy": {"duration": _DURATION, "pid": _PID, "rowid": _ROWID},
    "memset": {"duration": _DURATION, "pid": _PID, "rowid": _ROWID},
    "api": {"duration": _DURATION, "nameId": Derived(("name",), "id"), "pid": _PID, "tid": _TID,
            "rowid": _ROWID},
    "sync": {"duration": _DURATION, "pid": Derived(("globalPid",), "pid"), "rowid": _ROWID},
    "nvtx": {"duration": _DURATION, "textId": Derived(("text",), "id"), "pid": _PID, "tid": _TID,
             "rowid": _ROWID},
    "memory_usage": {"pid": _PID, "rowid": _ROWID},
    "threads": {"nameId": Derived(("name",), "id"), "pid": _PID, "tid": _TID},
    "gpu_metrics": {"gpu": Derived(("gpu",), "copy"), "rowid": _ROWID},
    "cpu_ops": {"duration": _DURATION, "nameId": Derived(("name",), "id")},
}

#: The engine's text columns: not columns of ``trace.columns`` (their ids are, see DERIVED).
TEXT: dict[str, frozenset[str]] = {
    "kernels": frozenset({"name", "shortName", "mangledName"}),
    "memcpy": frozenset({"operation", "srcKindName", "dstKindName"}),
    "memset": frozenset({"memKindName"}),
    "api": frozenset({"name", "baseName"}),
    "sync": frozenset({"syncTypeName"}),
    "nvtx": frozenset({"text", "domain"}),
    "memory_usage": frozenset({"memKindName", "operationName", "name"}),
    "gpus": frozenset({"name", "uuid", "busLocation"}),
    "gpu_metrics": frozenset({"metricName"}),
    "processes": frozenset({"name"}),
    "threads": frozenset({"name"}),
    "cpu_ops": frozenset({"name"}),
}

#: Columns kept as int32 where every value fits (ids and kinds: half the memory of 69M-row tables).
NARROW = frozenset({"nameId", "copyKind", "srcKind", "dstKind", "memKind", "pid", "tid", "deviceId",
                    "streamId", "contextId", "shortNameId", "mangledNameId"})


@dataclass(frozen=True)
class Clause:
    """One test of a row: ``column`` ``op`` ``values`` (ops: in, not null, is null, >=, <=, in table).

    ``in table``: the row's ``column`` is a (non-NULL) value of the same column of the engine's
    table ``of`` (an SQL semi-join on an export, ``isin`` on the pandas tables).
    """

    column: str
    op: str
    values: tuple[int, ...] = ()
    of: str = ""


@dataclass(frozen=True)
class Where:
    """A row filter: every clause holds (SQL's ``AND``; a NULL operand fails a test as in SQL)."""

    clauses: tuple[Clause, ...]

    def __and__(self, other: Where) -> Where:
        """Both filters."""
        return Where(self.clauses + other.clauses)

    @property
    def needs(self) -> tuple[str, ...]:
        """The columns the filter reads, once each."""
        return tuple(dict.fromkeys(c.column for c in self.clauses))

    def mask(self, cols: Mapping[str, npt.NDArray[Any]],
             others: Mapping[str, npt.NDArray[Any]] | None = None) -> npt.NDArray[np.bool_]:
        """The rows that pass, over columns read by ``trace.columns`` (NULL as :data:`NULL`).

        ``others`` holds, for each ``in table`` clause, the other table's column (key ``of.column``).
        """
        import numpy as np

        n = len(next(iter(cols.values()))) if cols else 0
        keep = np.ones(n, dtype=bool)
        for c in self.clauses:
            v = np.asarray(cols[c.column])
            if c.op == "in":
                keep &= np.isin(v, np.asarray(c.values, dtype=np.int64))
            elif c.op == "not null":
                keep &= v != NULL
            elif c.op == "is null":
                keep &= v == NULL
            elif c.op == ">=":
                keep &= (v != NULL) & (v >= c.values[0])
            elif c.op == "<=":
                keep &= (v != NULL) & (v <= c.values[0])
            elif c.op == "in table":
                other = np.asarray((others or {})[f"{c.of}.{c.column}"], dtype=np.int64)
                keep &= (v != NULL) & np.isin(v, other[other != NULL])
            else:  # pragma: no cover - Clause is made only here
                raise ValueError(c.op)
        return keep


def _in(column: str, *values: int) -> Clause:
    return Clause(column, "in", tuple(values))


_ENDED = Clause("end", "not null")
_STARTED = Clause("start", "not null")

#: table -> filter name -> the filter (the names ``where=`` takes)
FILTERS: dict[str, dict[str, Where]] = {
    "nvtx": {
        # push/pop and start/end ranges with both ends (what the NVTX ranges and steps use)
        "ranges": Where((_in("eventType", NVTX_PUSH_POP, NVTX_START_END), _ENDED, _STARTED)),
        # push/pop and start/end ranges that ended (nsys's nvtx_sum counts these)
        "ended_ranges": Where((_in("eventType", NVTX_PUSH_POP, NVTX_START_END), _ENDED)),
        # ranges that ended on the thread they started on (no endGlobalTid)
        "same_thread_ranges": Where((_in("eventType", NVTX_PUSH_POP, NVTX_START_END), _ENDED,
                                     Clause("endGlobalTid", "is null"))),
        "pushpop_ranges": Where((_in("eventType", NVTX_PUSH_POP, NVTXT_PUSH_POP), _ENDED)),
        # push/pop ranges (NVTXT too), popped or not (nvtx_pushpop_trace ends the others at the last time)
        "pushed_ranges": Where((_in("eventType", NVTX_PUSH_POP, NVTXT_PUSH_POP),)),
        # push/pop and start/end ranges (NVTXT too), ended or not, except those ended on another thread
        "own_thread_ranges": Where((_in("eventType", NVTX_PUSH_POP, NVTXT_PUSH_POP, NVTX_START_END,
                                        NVTXT_START_END), Clause("endGlobalTid", "is null"))),
        "startend_ranges": Where((_in("eventType", NVTX_START_END, NVTXT_START_END), _ENDED)),
        "marks": Where((_in("eventType", NVTX_MARK),)),
        "domain_create": Where((_in("eventType", NVTX_DOMAIN_CREATE),)),
    },
    "api": {
        # the calls that share a correlation id with a kernel (their launches)
        "kernel_launches": Where((Clause("correlationId", "in table", of="kernels"),)),
    },
}


def launches_of(table: str) -> Where:
    """The ``api`` rows whose ``correlationId`` is one of table ``table``'s (the calls that launched them)."""
    return Where((Clause("correlationId", "in table", of=table),))


def name_in(ids: Iterable[int]) -> Where:
    """The rows whose ``nameId`` is one of ``ids`` (ids from ``trace.strings()``)."""
    return Where((Clause("nameId", "in", tuple(sorted({int(i) for i in ids}))),))


def starts_from(t: int) -> Where:
    """The rows that start at or after ``t`` (ns)."""
    return Where((Clause("start", ">=", (int(t),)),))


def ends_by(t: int) -> Where:
    """The rows that end at or before ``t`` (ns)."""
    return Where((Clause("end", "<=", (int(t),)),))


def resolve_where(table: str, where: str | Where | None) -> Where | None:
    """The filter ``where`` names for ``table`` (a :class:`Where` is itself)."""
    if where is None or isinstance(where, Where):
        return where
    try:
        return FILTERS[table][where]
    except KeyError:
        known = ", ".join(FILTERS.get(table, {})) or "none"
        raise KeyError(f"table {table!r} has no filter {where!r}; it has: {known}") from None


def check_names(table: str, names: Sequence[str], tables: Mapping[str, Any]) -> None:
    """Raise KeyError for an unknown table or a text column (with what to ask for instead)."""
    if table not in tables:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(tables)}")
    text = [n for n in names if n in TEXT.get(table, ())]
    if text:
        ids = [n for n, d in DERIVED.get(table, {}).items() if d.how == "id"]
        raise KeyError(f"{text} of table {table!r} are text, not integer columns; read their ids "
                       f"({', '.join(ids) or 'none'}) and resolve them with trace.strings()")


class ColumnsRead(Protocol):
    """A read of columns, maybe still in progress: :meth:`result` waits for it."""

    def result(self) -> dict[str, npt.NDArray[Any]]:
        """The columns, name -> array."""


class ReadyColumns:
    """A read that is done (tables read in this thread)."""

    def __init__(self, cols: dict[str, npt.NDArray[Any]]) -> None:
        self._cols = cols

    def result(self) -> dict[str, npt.NDArray[Any]]:
        """The columns."""
        return self._cols


class TextIds:
    """Ids given to the texts of a trace's tables (``trace.strings()`` of traces without StringIds)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def ids(self, values: pd.Series) -> npt.NDArray[np.int64]:
        """Each value's id (new texts get the next ids); :data:`NULL` for a missing value."""
        import numpy as np
        import pandas as pd

        codes, uniq = pd.factorize(values, use_na_sentinel=True)
        with self._lock:
            lut = np.array([self._ids.setdefault(str(u), len(self._ids)) for u in uniq] + [NULL],
                           dtype=np.int64)
        out: npt.NDArray[np.int64] = lut[codes]
        return out

    def ids_of(self, texts: Sequence[str]) -> list[int]:
        """The ids of distinct texts (new ones get the next ids, in this order)."""
        with self._lock:
            return [self._ids.setdefault(str(t), len(self._ids)) for t in texts]

    def strings(self) -> dict[int, str]:
        """Id -> text."""
        with self._lock:
            return {i: s for s, i in self._ids.items()}


def as_int64(values: pd.Series) -> npt.NDArray[np.int64]:
    """A table column as int64 with :data:`NULL` for NaN/None (a non-numeric value is NULL too)."""
    import numpy as np
    import pandas as pd

    kind = values.dtype.kind
    if kind in "iub":
        return values.to_numpy(dtype=np.int64)
    if kind != "f" and not isinstance(values.dtype, pd.api.extensions.ExtensionDtype):
        try:  # Python ints and None: exact (a float would round past 2**53)
            values = values.astype("Int64")
        except (TypeError, ValueError):
            values = pd.to_numeric(values, errors="coerce")
    if values.dtype.kind == "f":
        f = values.to_numpy(dtype=np.float64)
        null = ~np.isfinite(f)
        out: npt.NDArray[np.int64] = np.where(null, 0, f).astype(np.int64)
        out[null] = NULL
        return out
    return values.to_numpy(dtype=np.int64, na_value=NULL)


def from_tables(trace: Any, table: str, names: Sequence[str], where: str | Where | None,
                table_columns: Sequence[str], text_ids: TextIds) -> dict[str, npt.NDArray[Any]]:
    """``trace.columns`` answered from ``trace.table`` (see the module docstring).

    Args:
        trace: the trace (its :meth:`~engine.reports.base.Trace.table` is read).
        table: the engine's table name.
        names: the columns wanted.
        where: a filter, or None for every row.
        table_columns: the columns ``trace.table(table)`` has.
        text_ids: where text ids are kept (the trace's own).

    """
    import numpy as np

    w = resolve_where(table, where)
    derived = DERIVED.get(table, {})
    wanted = list(dict.fromkeys([*names, *(w.needs if w is not None else ())]))
    have = set(table_columns)
    # the ids of a text column a trace keeps as codes (a Kineto trace's names): no column of texts made
    coded_ids = getattr(trace, "coded_text_ids", None)
    coded = {d.source[0]: got for n in wanted if (d := derived.get(n)) is not None and d.how == "id"
             and coded_ids is not None and (got := coded_ids(table, d.source[0], text_ids)) is not None}
    raw = list(dict.fromkeys(s for n in wanted for s in (derived[n].source if n in derived else (n,))
                             if s in have and s not in coded))
    df = trace.table(table, raw) if raw else None
    n_rows = len(df) if df is not None else len(next(iter(coded.values()))) if coded else (
        trace.row_count(table) or 0)
    out: dict[str, npt.NDArray[Any]] = {}
    for name in wanted:
        d = derived.get(name)
        if d is None:
            out[name] = as_int64(df[name]) if name in have and df is not None else np.full(
                n_rows, NULL, dtype=np.int64)
        elif d.how == "rowid":
            out[name] = np.arange(1, n_rows + 1, dtype=np.int64)
        elif d.how == "id" and d.source[0] in coded:
            out[name] = coded[d.source[0]]
        elif not set(d.source) <= have or df is None:
            out[name] = np.full(n_rows, NULL, dtype=np.int64)
        elif d.how == "duration":
            s, e = as_int64(df[d.source[0]]), as_int64(df[d.source[1]])
            out[name] = np.where((s == NULL) | (e == NULL), NULL, e - s)
        elif d.how == "id":
            out[name] = text_ids.ids(df[d.source[0]])
        elif d.how == "shape":
            out[name] = _packed_shape(*(as_int64(df[c]) for c in d.source))
        elif d.how in ("pid", "tid"):
            g = as_int64(df[d.source[0]])
            pid, tid = decode_global_tid(g)
            out[name] = np.where(g == NULL, NULL, pid if d.how == "pid" else tid)
        else:  # copy
            out[name] = as_int64(df[d.source[0]])
    if w is not None:
        others = {f"{c.of}.{c.column}": trace.columns(c.of, [c.column])[c.column]
                  for c in w.clauses if c.op == "in table"}
        keep = w.mask(out, others)
        return {n: out[n][keep] for n in names}
    return {n: out[n] for n in names}


#: Each NVTX row's name: (a code per row, the (domain, text) pair of each code); None where a row
#: has no domain or no text.
NvtxNames = tuple["npt.NDArray[np.int64]", list[tuple["str | None", "str | None"]]]


def nvtx_names_from_tables(trace: Any, where: str | Where | None) -> NvtxNames:
    """:meth:`~engine.reports.base.Trace.nvtx_names` from ``trace.table("nvtx")``'s domain and text.

    Row for row with ``trace.columns("nvtx", ..., where=where)``; the table names each domain and
    text once, so both of the export's domain orders read the same here.
    """
    import numpy as np
    import pandas as pd

    rows = trace.columns("nvtx", ["rowid"], where=where)["rowid"]
    if not len(rows):
        return np.zeros(0, dtype=np.int64), []
    df = trace.table("nvtx", ["domain", "text"])
    picked = np.asarray(rows, dtype=np.int64) - 1  # the tables' rowid is the row's place, from 1
    parts = []
    for col in ("domain", "text"):
        codes, uniq = pd.factorize(df[col].to_numpy()[picked], use_na_sentinel=True)
        labels = [None if pd.isna(u) else str(u) for u in uniq]
        parts.append((codes.astype(np.int64), [*labels, None]))  # code -1: the last label, None
    (d_code, d_labels), (t_code, t_labels) = parts
    key = np.where(d_code < 0, len(d_labels) - 1, d_code) * len(t_labels) + np.where(
        t_code < 0, len(t_labels) - 1, t_code)
    uniq_keys, code = np.unique(key, return_inverse=True)
    pairs = [(d_labels[k // len(t_labels)], t_labels[k % len(t_labels)]) for k in uniq_keys.tolist()]
    return code.astype(np.int64).reshape(-1), pairs


def _packed_shape(x: npt.NDArray[np.int64], y: npt.NDArray[np.int64],
                  z: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The packed shape ``x << 32 | y << 16 | z``; NULL where a value is out of range (or NULL)."""
    import numpy as np

    ok = (x >= 0) & (x < 2**31) & (y >= 0) & (y < 2**16) & (z >= 0) & (z < 2**16)
    return np.where(ok, (x << 32) | (y << 16) | z, NULL)
