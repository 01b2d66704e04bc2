"""What the time and size summaries group, read once per trace: per row a name, a duration, a size.

The summaries of CUDA API calls, kernels, memory operations and NVTX ranges (``cuda_api_sum``,
``cuda_gpu_kern_sum``, ``cuda_gpu_mem_*_sum``, ``nvtx_sum`` and the two combined ones) all group
durations (or sizes) by a name. This module answers, for any trace, the groups' statistics:

* from integer columns (durations, ``nameId``, copy kinds) read through ``trace.columns`` (an nsys
  export's columnar cache, a Kineto trace's tables), names resolved once per distinct id; NVTX
  ranges named through ``trace.nvtx_names``; no pandas;
* where a table's columns hold a NULL or an id without a name, from the trace's tables
  (``trace.table``), labels formed as nsys forms them.

Either way the numbers come from :mod:`.group_stats`, the one implementation. Each table's groups
are kept per trace (small: one tuple per name), so the reports of one command share them; with
:func:`plan`, the next table's read runs while the current one is grouped, and at most two tables'
columns are held at a time.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from engine.analysis.nsys.stats.catalog import _API_SUFFIX
from engine.analysis.nsys.stats.group_stats import Groups, grouped, id_groups
from engine.reports.trace_columns import NULL, NVTX_PUSH_POP, NVTX_START_END
from engine.system.arrays import distinct

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

#: The tables read column-wise, in the order :func:`plan` reads them, and the columns read of each.
READ_ORDER = ("api", "kernels", "memset", "memcpy")
_NAMES = {"api": ("duration", "nameId"), "kernels": ("duration", "nameId"),
          "memcpy": ("duration", "bytes", "copyKind"), "memset": ("duration", "bytes")}
#: Integer columns by name.
Columns = dict[str, "npt.NDArray[np.int64]"]
#: NVTX ranges as (eventType, "domain:text", durations).
Ranges = list[tuple[int, str, "npt.NDArray[np.int64]"]]


class _State:
    """One trace's groups and pending column reads."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.groups: dict[str, Any] = {}
        self.order: list[str] = []
        self.pending: dict[str, Any] = {}
        self.taken: set[str] = set()
        self.sources: dict[str, str] = {}


_STATES: weakref.WeakKeyDictionary[Trace, _State] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state(trace: Trace) -> _State:
    with _STATES_LOCK:
        st = _STATES.get(trace)
        if st is None:
            st = _STATES[trace] = _State()
        return st


def plan(trace: Trace, tables: Sequence[str]) -> None:
    """Say which tables the next reports group: the first read starts now, in the background.

    NVTX ranges, if asked for, are grouped here and now (on this thread), while that first read
    runs. A trace that reads in the foreground (a Kineto trace's tables) reads the first table here.
    """
    st = _state(trace)
    with st.lock:
        st.order = [t for t in READ_ORDER if t in tables and t not in st.taken]
        _start_next(trace, st)
    if "nvtx" in tables:
        nvtx_ranges(trace)


def _start_next(trace: Trace, st: _State) -> None:
    for t in st.order:
        if t not in st.pending and t not in st.taken:
            st.pending[t] = trace.columns_async(t, _NAMES[t])
            return


def _columns(trace: Trace, st: _State, table: str) -> Columns | None | Literal[False]:
    """``trace.columns`` of ``table``: the arrays, False (no rows) or None (a NULL: use the tables)."""
    from engine.reports.nsys.columns import has_null

    read = st.pending.pop(table) if table in st.pending else trace.columns_async(table, _NAMES[table])
    st.taken.add(table)
    try:
        got: Columns = read.result()
    finally:
        _start_next(trace, st)  # the next read runs while this table is grouped
    if not len(got[_NAMES[table][0]]):
        return False
    return None if any(has_null(got[n]) for n in _NAMES[table]) else got


def sources(trace: Trace) -> dict[str, str]:
    """Where each table's groups came from so far: ``"columns"`` (an export's) or ``"tables"``."""
    st = _state(trace)
    with st.lock:
        return dict(st.sources)


def _took(st: _State, tables: Sequence[str], source: str) -> None:
    for t in tables:
        st.sources[t] = source


def _cached(trace: Trace, key: str, compute: Any) -> Any:
    st = _state(trace)
    with st.lock:
        if key not in st.groups:
            st.groups[key] = compute(trace, st)
        return st.groups[key]


# -- the groups --------------------------------------------------------------------------------
def api_groups(trace: Trace) -> Groups:
    """CUDA API calls' durations by name, without the ``_vNNNN`` suffix (nsys's rule)."""
    return _cached(trace, "api", _api_groups)  # type: ignore[no-any-return]


def kernel_groups(trace: Trace) -> Groups:
    """Kernel durations by kernel name."""
    return _cached(trace, "kernels", _kernel_groups)  # type: ignore[no-any-return]


def memop_groups(trace: Trace, value: str) -> Groups:
    """Memory copies' and memsets' ``"duration"`` or ``"bytes"`` by nsys's operation label."""
    return _cached(trace, f"memops-{value}", lambda t, st: _memop_groups(t, st)[value])  # type: ignore[no-any-return]


def nvtx_ranges(trace: Trace) -> Ranges:
    """Ended push/pop and start/end NVTX ranges: (eventType, ``domain:text``, durations)."""
    return _cached(trace, "nvtx", _nvtx_ranges)  # type: ignore[no-any-return]


def _api_groups(trace: Trace, st: _State) -> Groups:
    cols = _columns(trace, st, "api")
    if cols is False:
        return []
    if cols is not None:
        strings = trace.strings()
        found = id_groups(cols, lambda i: _API_SUFFIX.sub("", strings.get(i, f"<unknown {i}>")))
        if found is not None:
            _took(st, ["api"], "columns")
            return found
    _took(st, ["api"], "tables")
    df = _rows(trace, "api", ["start", "end", "name"])
    if df is None:
        return []
    names = df["name"].astype(str)
    labels = names.map({n: _API_SUFFIX.sub("", n) for n in names.unique()})
    return _label_groups(labels, _durations(df))


def _kernel_groups(trace: Trace, st: _State) -> Groups:
    cols = _columns(trace, st, "kernels")
    if cols is False:
        return []
    if cols is not None:
        found = id_groups(cols, trace.strings().get)
        if found is not None:
            _took(st, ["kernels"], "columns")
            return found
    _took(st, ["kernels"], "tables")
    df = _rows(trace, "kernels", ["start", "end", "name"])
    if df is None:
        return []
    return _label_groups(df["name"].fillna("").astype(str), _durations(df))


def _memop_groups(trace: Trace, st: _State) -> dict[str, Groups]:
    """Both values' groups of the copies and memsets (one read of the two tables)."""
    memcpy, memset = _columns(trace, st, "memcpy"), _columns(trace, st, "memset")
    if memcpy is not None and memset is not None:
        _took(st, ["memcpy", "memset"], "columns")
        return {v: _memop_column_groups(trace, memcpy or None, memset or None, v)
                for v in ("duration", "bytes")}
    _took(st, ["memcpy", "memset"], "tables")
    return _memop_frame_groups(trace)


def _memop_column_groups(trace: Trace, memcpy: dict[str, npt.NDArray[np.int64]] | None,
                         memset: dict[str, npt.NDArray[np.int64]] | None, value: str) -> Groups:
    import numpy as np

    from engine.analysis.nsys.stats.kind_labels import kind_labels

    labels: list[str] = []
    codes, values = [], []
    if memcpy is not None:
        kinds = kind_labels(trace, "copy_kind_labels", "memcpy", [("copyKind", "operation")])
        present = distinct(memcpy["copyKind"])
        labels += [f"[CUDA memcpy {kinds.get(k, 'Unknown')}]" for k in present.tolist()]
        codes.append(np.searchsorted(present, memcpy["copyKind"]))
        values.append(memcpy[value])
    if memset is not None:
        codes.append(np.full(len(memset[value]), len(labels), dtype=np.int64))
        labels.append("[CUDA memset]")
        values.append(memset[value])
    if not codes:
        return []
    return grouped(labels, np.concatenate(codes), np.concatenate(values))


def _memop_frame_groups(trace: Trace) -> dict[str, Groups]:
    import pandas as pd

    parts = []
    memcpy = _rows(trace, "memcpy", None)
    if memcpy is not None:
        label = "[CUDA memcpy " + memcpy["operation"].fillna("Unknown").astype(str) + "]"
        parts.append(pd.DataFrame({"start": memcpy["start"], "end": memcpy["end"],
                                   "bytes": memcpy["bytes"], "label": label}))
    memset = _rows(trace, "memset", None)
    if memset is not None:
        parts.append(pd.DataFrame({"start": memset["start"], "end": memset["end"],
                                   "bytes": memset["bytes"], "label": "[CUDA memset]"}))
    if not parts:
        return {"duration": [], "bytes": []}
    ops = pd.concat(parts, ignore_index=True)
    nbytes = pd.to_numeric(ops["bytes"])
    sized = nbytes.notna()  # a copy without a size counts in neither of the size statistics
    return {"duration": _label_groups(ops["label"], _durations(ops)),
            "bytes": _label_groups(ops["label"][sized], nbytes[sized].astype("int64"))}


def _nvtx_ranges(trace: Trace, st: _State) -> Ranges:
    """The ended ranges' durations by (eventType, ``domain:text``); a range without a start is left out."""
    import numpy as np

    cols = trace.columns("nvtx", ["duration", "eventType"], where="ended_ranges")
    _took(st, ["nvtx"], "columns")
    dur, etype = (np.asarray(cols[c], dtype=np.int64) for c in ("duration", "eventType"))
    if not len(dur):
        return []
    code, pairs = trace.nvtx_names("ended_ranges")
    timed = dur != NULL
    if not timed.all():
        dur, etype, code = dur[timed], etype[timed], code[timed]
    names = [f"{'' if d is None else d}:{'' if x is None else x}" for d, x in pairs]
    key = code * 2 + (etype == NVTX_START_END)
    order = np.argsort(key, kind="stable")
    k_sorted = key[order]
    bounds = np.flatnonzero(np.diff(k_sorted)) + 1
    durations = dur[order]
    out: Ranges = []
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(order)], strict=True):
        k = int(k_sorted[lo])
        out.append((NVTX_START_END if k % 2 else NVTX_PUSH_POP, names[k // 2], durations[lo:hi]))
    return out


def call_groups(trace: Trace, family: str, *, by_name_id: bool = False) -> Groups:
    """Host calls of an export's call table (``osrt``, ``vulkan``: see ``CALL_TABLES``) by name.

    A name id without a string (or NULL) groups as "". With ``by_name_id``, as nsys groups API
    entry points: one group per name id, printed without a ``_vNNNN`` version suffix (two ids may
    then print the same name). Empty for other traces and exports without the table.
    """
    import numpy as np

    from engine.analysis.nsys.stats.group_stats import segment_stats
    from engine.reports.nsys.stats_reads import call_columns

    cols = call_columns(trace, family)
    if cols is None or not len(cols["duration"]):
        return []
    strings = trace.strings()
    ids, codes = np.unique(np.asarray(cols["nameId"]), return_inverse=True)
    labels = [strings.get(int(i), "") if i != NULL else "" for i in ids.tolist()]
    durations = np.asarray(cols["duration"])
    if not by_name_id:
        return grouped(labels, codes.astype(np.int64), durations)
    labels = [_API_SUFFIX.sub("", n) for n in labels]
    stats = segment_stats(codes.astype(np.int64), durations, len(ids))
    order = sorted(range(len(ids)), key=lambda g: (labels[g], int(ids[g])))  # ties: name, then id
    return [(labels[g], stats[g]) for g in order if stats[g] is not None]


# -- the trace's tables (other traces, and exports with NULLs) --------------------------------------
def _rows(trace: Trace, table: str, columns: list[str] | None) -> pd.DataFrame | None:
    """The table (only ``columns`` if given) if it was captured and has rows, else None."""
    df = trace.table(table, columns)
    if table in trace.missing or df.empty:
        return None
    return df


def _durations(df: pd.DataFrame) -> pd.Series:
    import pandas as pd

    dur: pd.Series = pd.to_numeric(df["end"]) - pd.to_numeric(df["start"])
    return dur.astype("int64")


def _label_groups(labels: pd.Series, values: pd.Series) -> Groups:
    import pandas as pd

    codes, uniq = pd.factorize(labels.to_numpy(), use_na_sentinel=False)
    return grouped([str(u) for u in uniq], codes.astype("int64"), values.to_numpy().astype("int64"))
