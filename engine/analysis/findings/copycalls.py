"""Every memcpy of a trace with the API call that issued it, as numpy columns (no DataFrame).

``copy_calls(trace)`` (built once per trace) gives what the copy rules read: each copy's start,
end, bytes, (operation, source kind, destination kind) as a code, stream, and its call's name,
start and end. For an nsys export every column comes from the columnar cache (``ops.copy_columns``
and ``ops.gpu_op_columns``, whose call join is the one made for the steps), so no pandas is
imported; other traces (Kineto) and exports the integer columns do not fit are joined from their
tables (``copies_table``) and turned into the same columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.calls import api_calls
from engine.analysis.file_backed import filled, gathered
from engine.analysis.ops import copy_columns, gpu_op_columns
from engine.analysis.tables import corr_keys, match_first, pid_keys, trace_cache

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


class CopyCalls:
    """The copies of a trace (see the module docstring), row for row in table order.

    Attributes:
        start, end: int64 ns.
        nbytes: bytes per copy (int64, or float64 with NULL as 0 where the table has NULLs).
        kind: codes into ``kinds``, (operation, source kind, destination kind) as text (a NULL or
            unknown label reads "nan", which never equals a real one).
        stream: the copy's stream id (ints, or the table's values).
        api: codes into ``api_names`` of the issuing call's base name, -1 where the call is unknown
            (or has no name).
        has_call: whether the issuing call is in the capture.
        api_start, api_end: the call's start and end (int64, meaningless where ``has_call`` is False).

    """

    def __init__(self, start: np.ndarray, end: np.ndarray, nbytes: np.ndarray, kind: np.ndarray,
                 kinds: list[tuple[str, str, str]], stream: np.ndarray, api: np.ndarray,
                 api_names: list[str], has_call: np.ndarray, api_start: np.ndarray, api_end: np.ndarray
                 ) -> None:
        self.start, self.end, self.nbytes = start, end, nbytes
        self.kind, self.kinds, self.stream = kind, kinds, stream
        self.api, self.api_names, self.has_call = api, api_names, has_call
        self.api_start, self.api_end = api_start, api_end

    def __len__(self) -> int:
        return len(self.start)

    @property
    def dur(self) -> np.ndarray:
        """GPU duration of each copy."""
        out: np.ndarray = self.end - self.start
        return out

    def of_kinds(self, keep: Any) -> np.ndarray:
        """Which copies have a kind for which ``keep(operation, src, dst)`` holds."""
        lut = np.array([bool(keep(*k)) for k in self.kinds] + [False], dtype=bool)
        out: np.ndarray = lut[self.kind]
        return out

    def of_api(self, keep: Any) -> np.ndarray:
        """Which copies have a known call whose name satisfies ``keep(name)``."""
        lut = np.array([bool(keep(n)) for n in self.api_names] + [False], dtype=bool)
        out: np.ndarray = lut[self.api]  # -1 (no call) picks the trailing False
        return out

    def issued(self) -> np.ndarray:
        """When each copy was issued: its API call's start, or its own start when the call is unknown."""
        out: np.ndarray = np.where(self.has_call, self.api_start, self.start)
        return out


def copy_calls(trace: Trace) -> CopyCalls:
    """The trace's :class:`CopyCalls`, built once per trace."""
    out: CopyCalls = trace_cache(trace, "copy_calls", lambda: _build(trace))
    return out


def _build(trace: Trace) -> CopyCalls:
    cols = _from_columns(trace)
    return cols if cols is not None else calls_from_table(copies_table(trace))


def _from_columns(trace: Trace) -> CopyCalls | None:
    """From the columnar cache: None when the export does not fit (then the tables are joined)."""
    cc = copy_columns(trace)
    calls = api_calls(trace)
    if cc is None or not calls.from_columns or calls.valid is not None:
        return None
    o = gpu_op_columns(trace)
    mine = o.kind == 1
    if int(mine.sum()) != cc.n or not all(s.isdigit() for s in o.streams):
        return None  # (a NULL stream: the table's values)
    stream = np.array([int(s) for s in o.streams] or [0], dtype=np.int64)[o.stream[mine]]
    idx = o.call_row[mine]
    got = idx >= 0
    name = np.asarray(calls.name)
    safe = np.maximum(idx, 0)
    # each copy's call name (-1: no call), start and end: 20M copies, built a chunk at a time
    api = filled(len(idx), np.int64, lambda lo, hi: np.where(got[lo:hi], name[safe[lo:hi]], -1))
    start, end = np.asarray(calls.start), np.asarray(calls.end)
    return CopyCalls(np.asarray(cc.start, dtype=np.int64), np.asarray(cc.end, dtype=np.int64),
                     np.asarray(cc.nbytes, dtype=np.int64), np.asarray(cc.codes), list(cc.kinds), stream,
                     api, list(calls.names), got, gathered(start, safe) if len(start) else safe,
                     gathered(end, safe) if len(end) else safe)


def calls_from_table(c: pd.DataFrame) -> CopyCalls:
    """:class:`CopyCalls` from :func:`copies_table`'s frame (the path of traces without the columns)."""
    import pandas as pd

    from engine.analysis.tables import factorize_rows

    n = len(c)
    if not n:
        z = np.zeros(0, dtype=np.int64)
        return CopyCalls(z, z, z, z, [], z, z, [], np.zeros(0, dtype=bool), z, z)
    b = c["bytes"].astype(float)
    nbytes = b.fillna(0).to_numpy() if b.isna().any() else c["bytes"].to_numpy(dtype=np.int64)
    kind, uniq = factorize_rows(*(c[k].astype(str).to_numpy(dtype=object)
                                  for k in ("operation", "srcKindName", "dstKindName")))
    api, names = pd.factorize(c["api"], use_na_sentinel=True)
    got = c["api_start"].notna().to_numpy()
    a_start = np.where(got, c["api_start"].fillna(0).to_numpy(dtype=np.float64), 0).astype(np.int64)
    a_end = np.where(got, c["api_end"].fillna(0).to_numpy(dtype=np.float64), 0).astype(np.int64)
    return CopyCalls(c["start"].to_numpy(dtype=np.int64), c["end"].to_numpy(dtype=np.int64), nbytes,
                     np.asarray(kind), [(str(o), str(s), str(d)) for o, s, d in uniq],
                     c["streamId"].to_numpy(), api.astype(np.int64), [str(x) for x in names], got,
                     a_start, a_end)


def copies_table(trace: Trace) -> pd.DataFrame:
    """Every memcpy joined with the API call that issued it (correlationId + process), as a frame.

    Columns: the memcpy's ``start``, ``end``, ``bytes``, ``operation``, ``srcKindName``,
    ``dstKindName``, ``streamId`` plus ``api`` (call name without ``_vNNNN``), ``api_start``,
    ``api_end``; calls that are not in the capture give NaN.
    """
    import pandas as pd

    mc = trace.table("memcpy", ["start", "end", "bytes", "operation", "srcKindName", "dstKindName",
                                "streamId", "correlationId", "pid"])
    if not len(mc):
        return mc.assign(api=[], api_start=[], api_end=[])
    api = trace.table("api", ["start", "end", "correlationId", "pid", "baseName"])
    a = api.rename(columns={"start": "api_start", "end": "api_end", "baseName": "api"})
    # Join on text keys: Kineto traces store pid as int in one table and str (or None) in another
    # (numbered together, then joined on integers: the rows of a left merge with the calls'
    # first row per key, as pandas' merge after drop_duplicates gives, without its cost).
    pk, _ = pd.factorize(np.concatenate([pid_keys(mc["pid"]), pid_keys(a["pid"])]))
    idx = match_first((pk[: len(mc)], corr_keys(mc["correlationId"])),
                      (pk[len(mc):], corr_keys(a["correlationId"])))
    out = mc.reset_index(drop=True)
    extra = {}
    for col_name in a.columns:
        if col_name not in ("pid", "correlationId"):
            col = a[col_name]
            if isinstance(col.dtype, np.dtype):  # object stays object, as merge gives
                v = pd.api.extensions.take(col.to_numpy(), idx, allow_fill=True)
                extra[col_name] = pd.Series(v, dtype=v.dtype, copy=False)
            else:  # extension dtypes (pandas' str) keep their dtype
                extra[col_name] = pd.Series(col.array.take(idx, allow_fill=True))
    return out.assign(**extra)
