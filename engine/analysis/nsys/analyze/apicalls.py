"""The CUDA API calls a rule needs, without loading every call of a big report.

A 400k-kernel report has millions of runtime calls; the rules look at a few names (cudaMemcpy*,
cudaMemset*, cudaDeviceSynchronize*, cudaStreamSynchronize*). For an nsys export the integer
columns come from the columnar cache (:mod:`engine.reports.nsys.columns`), names are tested once per
distinct string id, and only the matching calls become a DataFrame with the ``api`` table's
columns. Other traces (Kineto) take the ``api`` table as it is.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.reports.nsys.schema import RUNTIME

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace

_RUNTIME = RUNTIME
_EXPRS = {"start": '"start"', "end": '"end"', "nameId": '"nameId"',
          "correlationId": '"correlationId"', "globalTid": '"globalTid"'}
_SUFFIX = re.compile(r"_v\d{4}$")


def api_calls(trace: Trace, test: Callable[[str], bool], *, first_per_call: bool = False) -> pd.DataFrame:
    """API calls whose name passes ``test``, with the ``api`` table's columns.

    Args:
        trace: an opened report.
        test: keeps a call when ``test(name)`` is true (applied once per distinct name).
        first_per_call: keep a call only if it is the first of its (correlationId, pid) among
            *all* calls, as a join that drops duplicate keys before filtering names would.

    Returns:
        The calls in table order (columns start, end, correlationId, globalTid, pid, tid, name,
        baseName); the whole table filtered by name for traces without a columnar cache.

    """
    import numpy as np
    import pandas as pd

    from engine.reports.nsys.columns import has_null

    store = getattr(trace, "column_store", None)
    has = getattr(trace, "has_sqlite_table", None)
    cols = None
    if store is not None and has is not None and has(_RUNTIME):
        try:
            cols = store().read(_RUNTIME, _EXPRS, frozenset({"nameId"}))
        except Exception:  # noqa: BLE001 - any read problem: the general path below
            cols = None
        if cols is not None and any(has_null(cols[c]) for c in _EXPRS):
            cols = None
    if cols is None:
        return _general(trace, test, first_per_call)
    prep = _prepared(trace, cols)
    names: dict[int, str] = prep["names"]
    keep = [i for i, n in names.items() if test(n)]
    mask = np.isin(cols["nameId"], np.array(keep, dtype=np.int64))
    if first_per_call:
        mask &= _first_calls(trace, cols)
    idx = np.flatnonzero(mask)
    gtid = cols["globalTid"][idx]
    codes, uniq = pd.factorize(cols["nameId"][idx])
    labels = [names[int(i)] for i in uniq.tolist()]
    name = pd.Series(np.array(labels, dtype=object)[codes], dtype="object")
    base = pd.Series(np.array([_SUFFIX.sub("", n) for n in labels], dtype=object)[codes],
                     dtype="object")
    return pd.DataFrame({
        "start": np.asarray(cols["start"][idx]), "end": np.asarray(cols["end"][idx]),
        "correlationId": np.asarray(cols["correlationId"][idx]),
        "globalTid": np.asarray(gtid), "pid": np.asarray((gtid >> 24) & 0xFFFFFF),
        "tid": np.asarray(gtid & 0xFFFFFF), "name": name, "baseName": base,
    })


_PREPARED: weakref.WeakKeyDictionary[Trace, dict[str, Any]] = weakref.WeakKeyDictionary()


def _prepared(trace: Trace, cols: dict[str, npt.NDArray[np.int64]]) -> dict[str, Any]:
    """Per trace, once: the distinct call names."""
    import numpy as np

    if trace in _PREPARED:
        return _PREPARED[trace]
    strings = trace.strings()  # type: ignore[attr-defined]
    ids = np.unique(cols["nameId"])
    _PREPARED[trace] = {"names": {int(i): strings.get(int(i), f"<unknown {int(i)}>") for i in ids.tolist()}}
    return _PREPARED[trace]


def _first_calls(trace: Trace, cols: dict[str, npt.NDArray[np.int64]]) -> npt.NDArray[np.bool_]:
    """Which calls are the first of their (correlationId, pid) (computed once per trace)."""
    import numpy as np

    prep = _prepared(trace, cols)
    if "first" not in prep:
        pid = (cols["globalTid"] >> 24) & 0xFFFFFF
        key = (pid << 32) | (cols["correlationId"] & 0xFFFFFFFF)
        order = np.argsort(key, kind="stable")  # first of its key: no earlier call has it
        sk = key[order]
        first_sorted = np.ones(len(sk), dtype=bool)
        first_sorted[1:] = sk[1:] != sk[:-1]
        first = np.empty(len(sk), dtype=bool)
        first[order] = first_sorted
        prep["first"] = first
    result: npt.NDArray[np.bool_] = prep["first"]
    return result


def _general(trace: Trace, test: Callable[[str], bool], first_per_call: bool) -> pd.DataFrame:
    import pandas as pd

    api = trace.table("api")
    if first_per_call and not api.empty:
        corr = pd.to_numeric(api["correlationId"], errors="coerce")
        pid = pd.to_numeric(api["pid"], errors="coerce")
        api = api[~pd.DataFrame({"c": corr, "p": pid}).duplicated().to_numpy()]
    if api.empty:
        return api
    distinct = {n for n in pd.unique(api["name"].dropna()) if test(str(n))}
    return api[api["name"].isin(distinct).to_numpy()].reset_index(drop=True)
