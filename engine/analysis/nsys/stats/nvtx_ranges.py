"""NVTX ranges of an nsys export and the CUDA work launched inside them, as DataFrames.

A range's name is ``domain:text``; a call lies in a range when it starts and ends inside it on the
range's own thread; a range's parent is the tightest range of its thread that contains it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.column_source import factorize
from engine.reports.nsys import stats_reads as reads
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import (
    KERNEL,
    MEMCPY,
    MEMSET,
    NULL,
    NVTX_DOMAIN_CREATE,
    NVTX_PUSH_POP,
    NVTX_START_END,
    NVTXT_PUSH_POP,
    NVTXT_START_END,
    RUNTIME,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace


#: NVTX event types: push/pop and start/end ranges (and their NVTXT twins), domain create.
PUSHPOP = (NVTX_PUSH_POP, NVTXT_PUSH_POP)
STARTEND = (NVTX_START_END, NVTXT_START_END)
DOMAIN_CREATE = NVTX_DOMAIN_CREATE


def nvtx_ranges(trace: Trace) -> pd.DataFrame | None:
    """Push/pop and start/end ranges ended on the thread that began them.

    Columns id (rowid), start, end, globalTid, name, style; a range never ended ends at the NVTX
    table's last timestamp.
    """
    import pandas as pd

    df = reads.nvtx_events(trace, end_tid=True)
    if df is None:
        return None
    domains = {d: (t if t is not None else s) for d, t, s in
               df.loc[df["eventType"] == DOMAIN_CREATE, ["domainId", "text", "stext"]]
               .itertuples(index=False)}
    last = int(pd.concat([df["start"], df["end"]]).max())
    r = df[df["eventType"].isin([*PUSHPOP, *STARTEND]) & df["endTid"].isna()].copy()
    if r.empty:
        return None
    text = r["stext"].where(r["stext"].notna(), r["text"])
    r["name"] = [f"{'' if (d := domains.get(dom)) is None else d}:{'' if x is None else x}"
                 for dom, x in zip(r["domainId"], text, strict=True)]
    r["style"] = r["eventType"].map(lambda e: "PushPop" if e in PUSHPOP else "StartEnd")
    r["end"] = pd.to_numeric(r["end"]).fillna(last).astype("int64")
    return r[["id", "start", "end", "globalTid", "name", "style"]].reset_index(drop=True)


def _kernel_calls(trace: Trace) -> pd.DataFrame | None:
    """Each kernel with its launch call: kernel row, duration, name, call start/end, globalTid."""
    return reads.kernel_launches(trace)


def _pairs(calls: pd.DataFrame, ranges: pd.DataFrame) -> pd.DataFrame:
    """(call row, range row) for every call that lies inside a range of its own thread."""
    import numpy as np
    import pandas as pd

    out = []
    calls = calls.reset_index(drop=True)
    for tid, rg in ranges.groupby("globalTid", sort=False):
        c = calls[calls["gtid"] == tid]
        if c.empty:
            continue
        c = c.sort_values("a_start", kind="stable")
        cs_arr, ce_arr = c["a_start"].to_numpy(np.int64), c["a_end"].to_numpy(np.int64)
        ci = c.index.to_numpy()
        lo = np.searchsorted(cs_arr, rg["start"].to_numpy(np.int64), side="left")
        hi = np.searchsorted(cs_arr, rg["end"].to_numpy(np.int64), side="right")
        n = hi - lo
        if not n.sum():
            continue
        r_idx = np.repeat(rg.index.to_numpy(), n)
        pos = np.repeat(lo - np.concatenate(([0], np.cumsum(n)[:-1])), n) + np.arange(n.sum())
        keep = ce_arr[pos] <= np.repeat(rg["end"].to_numpy(np.int64), n)
        out.append(pd.DataFrame({"call": ci[pos[keep]], "range": r_idx[keep]}))
    if not out:
        return pd.DataFrame({"call": pd.Series(dtype="int64"), "range": pd.Series(dtype="int64")})
    return pd.concat(out, ignore_index=True)


def _gpu_op_calls(trace: Trace) -> pd.DataFrame | None:
    """Kernels, copies and memsets with their launch call: op start/end, correlation id, call.

    Through the columnar cache where the export has one (:func:`_gpu_op_calls_columns`), else
    SQLite's join (:func:`_gpu_op_calls_sql`); the same rows, maybe in another order.
    """
    fast = _gpu_op_calls_columns(trace)
    if fast is not None:
        return fast if len(fast) else None
    return _gpu_op_calls_sql(trace)


def _gpu_op_calls_sql(trace: Trace) -> pd.DataFrame | None:
    """:func:`_gpu_op_calls` by SQLite joins."""
    import pandas as pd

    parts = reads.gpu_op_launches(trace)
    return pd.concat(parts, ignore_index=True) if parts else None


def _gpu_op_calls_columns(trace: Trace) -> pd.DataFrame | None:
    """:func:`_gpu_op_calls` joined with numpy over the columnar cache (None: take the SQL join).

    SQLite joins each GPU table with 2.76M runtime calls (400k kernels) by building a temporary
    index each time; here the calls' (process, correlationId) keys are sorted once and every op
    finds its calls with a binary search. Rows come in table order, op by op (the SQL join's
    order may differ; :func:`nvtx_gpu_proj_trace` only aggregates them).
    """
    import numpy as np
    import pandas as pd


    has = getattr(trace, "has_sqlite_table", None)  # an export: the others take the table join
    if has is None or not has(RUNTIME):
        return None
    op_tables = (("kernels", KERNEL), ("memcpy", MEMCPY), ("memset", MEMSET))
    try:
        api = trace.columns("api", ["start", "end", "correlationId", "globalTid"])
        ops = [trace.columns(name, ["start", "end", "correlationId", "globalPid"])
               for name, table in op_tables if has(table)]
    except Exception:  # noqa: BLE001 - any read problem: the SQL join
        return None
    if has_null(api["start"]) or has_null(api["end"]) or any(
            has_null(o["start"]) or has_null(o["end"]) for o in ops):
        return None
    ops = [o for o in ops if len(o["start"])]
    if not ops or not len(api["start"]):
        return None if not ops else pd.DataFrame()
    corr_a, gtid = np.asarray(api["correlationId"]), np.asarray(api["globalTid"])
    ok_a = (corr_a != NULL) & (gtid != NULL)
    corr_o = np.concatenate([np.asarray(o["correlationId"]) for o in ops])
    gpid = np.concatenate([np.asarray(o["globalPid"]) for o in ops])
    ok_o = (corr_o != NULL) & (gpid != NULL) & ((gpid & 0xFFFFFF) == 0)
    if (corr_a[ok_a] < 0).any() or (corr_a[ok_a] >= 1 << 40).any() or \
            (corr_o[ok_o] < 0).any() or (corr_o[ok_o] >= 1 << 40).any():
        return None
    procs, code = factorize(np.concatenate([gtid[ok_a] >> 24, gpid[ok_o] >> 24]))
    if len(procs) >= 1 << 22:
        return None
    n_a = int(ok_a.sum())
    key_a = (code[:n_a].astype(np.int64) << 40) | corr_a[ok_a]
    key_o = (code[n_a:].astype(np.int64) << 40) | corr_o[ok_o]
    calls = np.flatnonzero(ok_a)
    order = np.argsort(key_a, kind="stable")
    sk = key_a[order]
    lo = np.searchsorted(sk, key_o, side="left")
    cnt = np.searchsorted(sk, key_o, side="right") - lo
    op_idx = np.repeat(np.flatnonzero(ok_o), cnt)
    first = np.cumsum(cnt) - cnt
    call_idx = calls[order[np.repeat(lo, cnt) + (np.arange(int(cnt.sum())) - np.repeat(first, cnt))]]
    start_o = np.concatenate([np.asarray(o["start"]) for o in ops])
    end_o = np.concatenate([np.asarray(o["end"]) for o in ops])
    return pd.DataFrame({
        "start": start_o[op_idx], "end": end_o[op_idx], "corr": corr_o[op_idx],
        "a_start": np.asarray(api["start"])[call_idx], "a_end": np.asarray(api["end"])[call_idx],
        "gtid": gtid[call_idx],
    })


def _parents(ranges: pd.DataFrame) -> dict[int, int | None]:
    """The tightest range of the same thread containing each range (either style), or None.

    Tightest = shortest; among equally tight ones the first in table order. Where a thread's
    ranges nest (push/pop always do), one pass over them sorted by start with a stack of open
    ranges finds every parent in O(n log n); where they overlap partially (start/end ranges may),
    that thread's ranges are compared pairwise, in blocks.
    """
    import numpy as np

    parent: dict[int, int | None] = {}
    for _, g in ranges.groupby("globalTid", sort=False):
        ids = g["id"].to_numpy(np.int64)
        s, e = g["start"].to_numpy(np.int64), g["end"].to_numpy(np.int64)
        found = _nested_parents(s, e)
        if found is None:
            found = _pairwise_parents(s, e)
        parent.update({int(i): (None if p < 0 else int(ids[p]))
                       for i, p in zip(ids.tolist(), found.tolist(), strict=True)})
    return parent


def _nested_parents(s: npt.NDArray[np.int64], e: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | None:
    """Parents (positions, -1 for none) of ranges that nest, or None when two overlap partially.

    Ranges with the same start and end are each other's tightest containers: the first of them
    has the second as parent, the others the first; the ranges inside them have the first.
    """
    import numpy as np

    n = len(s)
    out = np.full(n, -1, dtype=np.int64)
    order = np.lexsort((np.arange(n), -e, s)).tolist()
    sl, el = s.tolist(), e.tolist()
    stack: list[int] = []  # representatives (first of their duplicates) of the open ranges
    k = 0
    while k < n:
        first = order[k]
        cs, ce = sl[first], el[first]
        m = k + 1
        while m < n and sl[order[m]] == cs and el[order[m]] == ce:
            m += 1
        while stack and el[stack[-1]] < cs:  # ended before this one starts: no later one inside
            stack.pop()
        if stack and el[stack[-1]] < ce:
            return None  # overlaps the open range partially: not nested
        dups = sorted(order[k:m])
        head = dups[0]
        if len(dups) > 1:
            out[head] = dups[1]
            out[dups[1:]] = head
        elif stack:
            out[head] = stack[-1]
        stack.append(head)
        k = m
    return out


def _pairwise_parents(s: npt.NDArray[np.int64], e: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """:func:`_nested_parents` for any ranges, comparing each with all (in blocks of 2048)."""
    import numpy as np

    out = np.full(len(s), -1, dtype=np.int64)
    for lo in range(0, len(s), 2048):  # children in blocks: bounded memory
        cs, ce = s[lo:lo + 2048, None], e[lo:lo + 2048, None]
        inside = (s[None, :] <= cs) & (e[None, :] >= ce)
        inside[np.arange(len(cs)), np.arange(lo, lo + len(cs))] = False
        tight = np.where(inside, (cs - s[None, :]) + (e[None, :] - ce), np.iinfo(np.int64).max)
        best = tight.argmin(axis=1)
        out[lo:lo + len(cs)] = np.where(inside.any(axis=1), best, -1)
    return out
