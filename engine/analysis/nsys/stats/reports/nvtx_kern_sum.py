"""``nvtx_kern_sum``: kernels grouped by the NVTX range that launched them (and thread, and name).

On an nsys export from the columnar cache (:func:`kern_sum_table`), else from the tables
(:func:`kern_sum_frame`). Same bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.column_source import distinct, factorize
from engine.analysis.nsys.stats.nvtx_ranges import PUSHPOP, STARTEND, _kernel_calls, _pairs, nvtx_ranges
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.table import SummaryTable
from engine.analysis.nsys.stats.trace_tables import (
    empty_frame,
    group_stats,
)
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.nvtx_text_codes import name_exprs, range_names
from engine.reports.nsys.schema import KERNEL, NULL, RUNTIME
from engine.reports.nsys.schema import NVTX as _NVTX
from engine.reports.nsys.stats_reads import nvtx_time_bounds, nvtx_where

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


@report(
    "nvtx_kern_sum",
    title="NVTX Range Kernel Summary: kernels grouped by the NVTX range that launched them",
    columns=(
        "NVTX Range", "Style", "PID", "TID", "NVTX Inst", "Kern Inst", "Total Time (ns)", "Avg (ns)",
        "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)", "Kernel Name",
    ),
    needs=("nvtx", "kernels", "api"),
)
def nvtx_kern_sum(trace: Trace, csv: bool) -> Any:
    """Kernels by the NVTX range their launch call ran in."""
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if isinstance(trace, NsysSqliteTrace):
        table = kern_sum_table(trace)
        if table is not None:
            return table
    return kern_sum_frame(trace)


_RANGES = nvtx_where((*PUSHPOP, *STARTEND))


def _ranges(trace: NsysSqliteTrace) -> tuple[dict[str, npt.NDArray[np.int64]], list[str]] | None:
    """Ranges ended on the thread that began them, or None for the general path.

    Columns id, start, end, globalTid, name (a code into the names that come with them), style
    (0 push/pop, 1 start/end); no columns when there are no such ranges.
    """
    import numpy as np


    have = set(trace.column_names(_NVTX))
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    where = nvtx_where((*PUSHPOP, *STARTEND), own_thread=True, trace=trace)
    extra, texts = name_exprs(trace, where)
    cols = trace.column_store().read_where(
        _NVTX, {"id": "rowid", "start": '"start"', "end": '"end"', "globalTid": '"globalTid"',
                "eventType": '"eventType"', **extra}, where)
    if not len(cols["id"]):
        return {}, []
    if has_null(cols["start"]) or has_null(cols["globalTid"]):
        return None
    named = range_names(trace, where, cols, texts)
    if named is None:
        return None
    last_s, last_e = nvtx_time_bounds(trace)
    last = max(int(str(v)) for v in (last_s, last_e) if v is not None)
    end = np.asarray(cols["end"])
    out = {"id": np.asarray(cols["id"]), "start": np.asarray(cols["start"]),
           "end": np.where(end == NULL, last, end), "globalTid": np.asarray(cols["globalTid"]),
           "name": named[0], "style": np.isin(cols["eventType"], (60, 71)).astype(np.int64)}
    return out, named[1]


def _launches(trace: NsysSqliteTrace) -> dict[str, npt.NDArray[np.int64]] | None:
    """Each kernel with each of its launch calls, or None for the general path.

    Per row: kernel row, duration, name id and call row (-1: a kernel without a call, kept as a
    LEFT JOIN keeps it); and the calls' start, end and globalTid columns.
    """
    import numpy as np


    if not trace.has_sqlite_table(RUNTIME):
        return None
    have_k, have_a = set(trace.column_names(KERNEL)), set(trace.column_names(RUNTIME))
    names = [f'"{c}"' for c in ("demangledName", "shortName") if c in have_k]
    if not names or not {"start", "end", "correlationId", "globalPid"} <= have_k or \
            not {"start", "end", "correlationId", "globalTid"} <= have_a:
        return None
    store = trace.column_store()  # both tables at once: a table under 1M rows reads on one thread
    pk = store.read_async(KERNEL, {"start": '"start"', "end": '"end"', "correlationId": '"correlationId"',
                                    "globalPid": '"globalPid"',
                                    "nameId": f"coalesce({', '.join(names)}, NULL)"})
    a = store.read(RUNTIME, {c: f'"{c}"' for c in ("start", "end", "correlationId", "globalTid")})
    k = pk.result()
    if any(has_null(k[c]) for c in ("start", "end", "nameId")) or \
            any(has_null(a[c]) for c in ("start", "end", "globalTid")):
        return None
    corr_k, gpid = np.asarray(k["correlationId"]), np.asarray(k["globalPid"])
    corr_a, gtid = np.asarray(a["correlationId"]), np.asarray(a["globalTid"])
    ok_k = (corr_k != NULL) & (gpid != NULL) & ((gpid & 0xFFFFFF) == 0)
    ok_a = corr_a != NULL
    if (corr_k[ok_k] < 0).any() or (corr_k[ok_k] >= 1 << 40).any() or \
            (corr_a[ok_a] < 0).any() or (corr_a[ok_a] >= 1 << 40).any():
        return None
    procs, code = factorize(np.concatenate([gpid[ok_k] >> 24, gtid[ok_a] >> 24]))
    if len(procs) >= 1 << 22:
        return None
    n_k = int(ok_k.sum())
    key_k = np.full(len(corr_k), -1, np.int64)
    key_k[ok_k] = (code[:n_k].astype(np.int64) << 40) | corr_k[ok_k]
    key_a = (code[n_k:].astype(np.int64) << 40) | corr_a[ok_a]
    calls = np.flatnonzero(ok_a)
    order = np.argsort(key_a, kind="stable")
    sk = key_a[order]
    lo = np.searchsorted(sk, key_k, side="left")
    cnt = np.where(key_k >= 0, np.searchsorted(sk, key_k, side="right") - lo, 0)
    rows = np.maximum(cnt, 1)  # a LEFT JOIN: one row without a call for unmatched kernels
    k_row = np.repeat(np.arange(len(corr_k), dtype=np.int64), rows)
    first = np.cumsum(rows) - rows
    within = np.arange(int(rows.sum()), dtype=np.int64) - np.repeat(first, rows)
    matched = np.repeat(cnt, rows) > 0
    call = np.full(len(k_row), -1, np.int64)
    call[matched] = calls[order[np.repeat(lo, rows)[matched] + within[matched]]]
    kdur = (np.asarray(k["end"]) - np.asarray(k["start"]))[k_row]
    return {"kid": k_row, "kdur": kdur, "nameId": np.asarray(k["nameId"])[k_row], "call": call,
            "a_start": np.asarray(a["start"]), "a_end": np.asarray(a["end"]), "gtid": gtid}


def _range_pairs(launch: dict[str, npt.NDArray[np.int64]], ranges: dict[str, npt.NDArray[np.int64]],
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(launch row, range row) for every launch whose call lies inside a range of its thread."""
    import numpy as np

    rows = np.flatnonzero(launch["call"] >= 0)
    call = launch["call"][rows]
    cg, cs, ce = launch["gtid"][call], launch["a_start"][call], launch["a_end"][call]
    out_l, out_r = [], []
    rg_tid = ranges["globalTid"]
    for tid in distinct(rg_tid).tolist():
        mine = cg == tid
        if not mine.any():
            continue
        idx = np.flatnonzero(mine)
        idx = idx[np.argsort(cs[idx], kind="stable")]
        s_sorted = cs[idx]
        rr = np.flatnonzero(rg_tid == tid)
        lo = np.searchsorted(s_sorted, ranges["start"][rr], side="left")
        n = np.searchsorted(s_sorted, ranges["end"][rr], side="right") - lo
        total = int(n.sum())
        if not total:
            continue
        r_idx = np.repeat(rr, n)
        pos = np.repeat(lo - (np.cumsum(n) - n), n) + np.arange(total)
        keep = ce[idx[pos]] <= ranges["end"][r_idx]
        out_l.append(rows[idx[pos[keep]]])
        out_r.append(r_idx[keep])
    if not out_l:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_l), np.concatenate(out_r)


def kern_sum_table(trace: NsysSqliteTrace) -> SummaryTable | None:
    """``nvtx_kern_sum`` without pandas; None where the general path must handle it.

    The same rows as :func:`kern_sum_frame`: a kernel counts once
    for every range of its launching thread that contains its launch call, once without a range
    when none does; grouped by process, thread, range, style and kernel name.
    """
    import sqlite3

    import numpy as np

    from engine.analysis.nsys.stats.group_stats import segment_stats

    if not (trace.has_sqlite_table(_NVTX) and trace.has_sqlite_table(KERNEL)):
        return None
    try:
        got = _ranges(trace)
        launch = _launches(trace) if got and got[0] else None
    except sqlite3.Error:
        return None
    if not got or not got[0] or launch is None:
        return None
    ranges, rnames = got
    strings = trace.strings()
    k_ids = distinct(launch["nameId"])
    if any(int(i) not in strings for i in k_ids.tolist()):
        return None
    knames = [str(strings[int(i)]) for i in k_ids.tolist()]
    l_rows, r_rows = _range_pairs(launch, ranges)
    alone = np.ones(len(launch["kid"]), bool)
    alone[l_rows] = False
    alone_rows = np.flatnonzero(alone)
    rows = np.concatenate([l_rows, alone_rows])
    n_m = len(l_rows)
    # Group keys in pandas' sorted order (a missing value last): pid, tid, range, style, kernel.
    call = launch["call"][rows]
    g = np.where(call >= 0, launch["gtid"][np.maximum(call, 0)], NULL)
    big = np.int64(1) << 62
    pid = np.where(g == NULL, big, (g >> 24) & 0xFFFFFF)
    tid = np.where(g == NULL, big, g & 0xFFFFFF)
    n_rank = _ranks(rnames)
    rname = np.concatenate([n_rank[ranges["name"][r_rows]], np.full(len(alone_rows), len(rnames))])
    style = np.concatenate([ranges["style"][r_rows], np.full(len(alone_rows), 2)])
    k_rank = _ranks(knames)
    kname = k_rank[np.searchsorted(k_ids, launch["nameId"][rows])]
    rid = np.concatenate([ranges["id"][r_rows], np.full(len(alone_rows), -1)])
    kid = launch["kid"][rows]
    order = np.lexsort((kname, style, rname, tid, pid))
    keys = np.stack([pid, tid, rname, style, kname])[:, order]
    new = np.ones(len(order), bool)
    new[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
    group = np.empty(len(order), np.int64)
    group[order] = np.cumsum(new) - 1
    n_groups = int(new.sum())
    stats = segment_stats(group, launch["kdur"][rows], n_groups)
    inst = _distinct(group[:n_m], rid[:n_m], n_groups)
    kern = _distinct(group, kid, n_groups)
    heads = order[new]
    sorted_names = sorted(set(rnames))
    sorted_k = sorted(set(knames))
    out_rows: list[list[Any]] = []
    for gi, h in enumerate(heads.tolist()):
        total, count, mean, median, vmin, vmax, std = stats[gi]
        rn = None if int(rname[h]) == len(rnames) else sorted_names[int(rname[h])]
        p = None if int(pid[h]) == big else int(pid[h])
        t = None if int(tid[h]) == big else int(tid[h])
        out_rows.append([rn, ("PushPop", "StartEnd", None)[int(style[h])], p, t, int(inst[gi]),
                         int(kern[gi]), total, mean, median, vmin, vmax, std, sorted_k[int(kname[h])]])
    # By range (none as ""), then process and thread (none first), then total time descending;
    # Python's sort is stable, so the group order breaks the remaining ties (as pandas' does).
    out_rows.sort(key=lambda r: (r[0] or "", r[2] is not None, r[2] or 0, r[3] is not None, r[3] or 0,
                                 -r[6]))
    return SummaryTable("nvtx_kern_sum", [list(c) for c in zip(*out_rows, strict=True)])


def _ranks(labels: list[str]) -> npt.NDArray[np.int64]:
    """Each label's rank among the distinct labels sorted (equal labels share a rank)."""
    import numpy as np

    rank = {s: i for i, s in enumerate(sorted(set(labels)))}
    return np.array([rank[s] for s in labels], dtype=np.int64)


def _distinct(group: npt.NDArray[np.int64], values: npt.NDArray[np.int64], n_groups: int,
              ) -> npt.NDArray[np.int64]:
    """Distinct non-negative ``values`` per group (pandas' nunique: a missing one not counted)."""
    import numpy as np

    ok = values >= 0
    v = values[ok]
    if len(v) and (int(v.max()) >= 1 << 40 or n_groups >= 1 << 22):  # pragma: no cover - huge ids
        pairs = np.unique(np.stack([group[ok], v]), axis=1)
        return np.bincount(pairs[0], minlength=n_groups).astype(np.int64)
    keys = distinct((group[ok] << 40) | v)
    return np.bincount(keys >> 40, minlength=n_groups).astype(np.int64)


def kern_sum_frame(trace: Trace) -> pd.DataFrame:
    """Kernels grouped by the NVTX range (and thread) their launch call ran in, and by name.

    A kernel counts once for every range of its launching thread that contains the launch call,
    and once with an empty range when none does.
    """
    import pandas as pd

    ranges = nvtx_ranges(trace)
    calls = _kernel_calls(trace)
    if ranges is None or calls is None:
        return empty_frame("nvtx_kern_sum")
    calls = calls.reset_index(drop=True)
    with_call = calls[calls["a_start"].notna()]
    pairs = _pairs(with_call.astype({"a_start": "int64", "a_end": "int64"}), ranges)
    matched = calls.loc[pairs["call"]].reset_index(drop=True)
    matched["rid"] = ranges.loc[pairs["range"], "id"].to_numpy()
    matched["name"] = ranges.loc[pairs["range"], "name"].to_numpy()
    matched["style"] = ranges.loc[pairs["range"], "style"].to_numpy()
    alone = calls.drop(index=list(pairs["call"].unique()))
    alone = alone.assign(rid=None, name=None, style=None)
    rows = pd.concat([matched, alone], ignore_index=True)
    gt = pd.to_numeric(rows["gtid"], errors="coerce")
    keys = pd.DataFrame({
        "pid": (gt // (1 << 24)) % (1 << 24), "tid": gt % (1 << 24),
        "name": rows["name"].astype("object"), "style": rows["style"].astype("object"),
        "kname": rows["kname"].astype("object"),
    })
    stats = group_stats(keys, pd.to_numeric(rows["kdur"]).astype("int64"))
    grouped = pd.concat([keys, rows[["rid", "kid"]]], axis=1).groupby(
        ["pid", "tid", "name", "style", "kname"], sort=True, dropna=False)
    inst = grouped["rid"].nunique().reset_index(drop=True)
    kern = grouped["kid"].nunique().reset_index(drop=True)
    out = pd.DataFrame({
        "NVTX Range": stats["name"], "Style": stats["style"],
        "PID": stats["pid"].astype("Int64"), "TID": stats["tid"].astype("Int64"),
        "NVTX Inst": inst.astype("int64"), "Kern Inst": kern.astype("int64"),
        "Total Time (ns)": stats["sum"].astype("int64"), "Avg (ns)": stats["mean"],
        "Med (ns)": stats["median"], "Min (ns)": stats["min"].astype("int64"),
        "Max (ns)": stats["max"].astype("int64"), "StdDev (ns)": stats["std"],
        "Kernel Name": stats["kname"],
    })
    order = out.assign(_n=out["NVTX Range"].fillna(""), _t=-out["Total Time (ns)"])
    order = order.sort_values(["_n", "PID", "TID", "_t"], kind="stable", na_position="first")
    return out.loc[order.index].reset_index(drop=True)
