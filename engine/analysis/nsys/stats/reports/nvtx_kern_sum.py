"""``nvtx_kern_sum``: kernels grouped by the NVTX range that launched them (and thread, and name).

One path on any trace (:func:`kern_sum_table`): the ranges through ``trace.columns`` (filter
``own_thread_ranges``) and ``trace.nvtx_names``, the kernels and their launch calls (filter
``kernel_launches``) joined on integer keys, grouped with numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.column_source import distinct, factorize
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.reports.nvtx_pushpop_trace import named_ranges
from engine.analysis.nsys.stats.table import SummaryTable, empty_frame
from engine.analysis.nsys.stats.thread_keys import pid_tid, thread_keys
from engine.reports.trace_columns import NULL, NVTX_START_END, NVTXT_START_END

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace

_RANGE = ["rowid", "start", "end", "globalTid", "eventType"]
_KERNEL = ["start", "end", "correlationId", "globalPid", "nameId"]
_CALL = ["start", "end", "correlationId", "globalTid"]


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
    table = kern_sum_table(trace)
    return table if table is not None else empty_frame("nvtx_kern_sum")


def _ranges(trace: Trace) -> tuple[dict[str, npt.NDArray[np.int64]], list[str]] | None:
    """Ranges not ended on another thread (None: there are none).

    Columns id, start, end, pid, tid, name (a code into the names that come with them), style
    (0 push/pop, 1 start/end); a range never ended ends at the NVTX table's last timestamp, one
    without a start is left out.
    """
    import numpy as np

    got = named_ranges(trace, list(_RANGE), "own_thread_ranges")
    if got is None:
        return None
    cols, pairs = got
    cols["id"] = cols.pop("rowid")
    cols["style"] = np.isin(cols.pop("eventType"), (NVTX_START_END, NVTXT_START_END)).astype(np.int64)
    return cols, [f"{'' if d is None else d}:{'' if x is None else x}" for d, x in pairs]


def _launches(trace: Trace) -> dict[str, npt.NDArray[np.int64]] | None:
    """Each kernel with each of its launch calls (None: no kernel).

    Per row: kernel row, duration, name id and call row (-1: a kernel without a call, kept as a
    LEFT JOIN keeps it); and the calls' start, end, pid and tid columns. A kernel and a call pair
    up by process (the globalPid and the globalTid's process; on a trace without them, any) and
    correlation id. A kernel without a start or an end is left out.
    """
    import numpy as np

    read = trace.columns("api", _CALL, where="kernel_launches")
    a = {c: np.asarray(v, dtype=np.int64) for c, v in read.items()}
    a["pid"], a["tid"] = pid_tid(trace, "api", a["globalTid"], "kernel_launches")
    k = {c: np.asarray(v, dtype=np.int64) for c, v in trace.columns("kernels", _KERNEL).items()}
    timed = (k["start"] != NULL) & (k["end"] != NULL)
    if not timed.all():
        k = {c: v[timed] for c, v in k.items()}
    if not len(k["start"]):
        return None
    corr_k, gpid = k["correlationId"], k["globalPid"]
    corr_a, gtid = a["correlationId"], a["globalTid"]
    if (gpid == NULL).all() or (gtid == NULL).all():  # no processes (Kineto): correlation ids suffice
        proc_k, proc_a = np.zeros(len(corr_k), np.int64), np.zeros(len(corr_a), np.int64)
        ok_k, ok_a = corr_k != NULL, corr_a != NULL
    else:
        proc_k, proc_a = gpid >> 24, gtid >> 24
        ok_k = (corr_k != NULL) & (gpid != NULL) & ((gpid & 0xFFFFFF) == 0)
        ok_a = (corr_a != NULL) & (gtid != NULL)
    _procs, code = factorize(np.concatenate([proc_k[ok_k], proc_a[ok_a]]))
    corr = np.concatenate([corr_k[ok_k], corr_a[ok_a]])
    if len(corr) and (corr.min() < 0 or corr.max() >= 1 << 40):  # not packable: their codes instead
        _uniq, corr = factorize(corr)
    n_k = int(ok_k.sum())
    key = (code.astype(np.int64) << 40) | corr.astype(np.int64)
    key_k = np.full(len(corr_k), -1, np.int64)
    key_k[ok_k] = key[:n_k]
    key_a = key[n_k:]
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
    kdur = (k["end"] - k["start"])[k_row]
    return {"kid": k_row, "kdur": kdur, "nameId": k["nameId"][k_row], "call": call,
            "a_start": a["start"], "a_end": a["end"], "gtid": gtid, "pid": a["pid"], "tid": a["tid"]}


def _range_pairs(launch: dict[str, npt.NDArray[np.int64]], ranges: dict[str, npt.NDArray[np.int64]],
                 ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(launch row, range row) for every launch whose call lies inside a range of its thread."""
    import numpy as np

    rows = np.flatnonzero(launch["call"] >= 0)
    call = launch["call"][rows]
    cg, cs, ce = launch["thread"][call], launch["a_start"][call], launch["a_end"][call]
    out_l, out_r = [], []
    rg_tid = ranges["thread"]
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


def kern_sum_table(trace: Trace) -> SummaryTable | None:
    """``nvtx_kern_sum``'s rows; None where the trace has no range or no kernel.

    A kernel counts once for every range of its launching thread that contains its launch call,
    once without a range when none does; grouped by process, thread, range, style and kernel name
    (a name id without a text: no name, sorted last as pandas' groupby sorts a missing key).
    """
    import numpy as np

    from engine.analysis.nsys.stats.group_stats import segment_stats

    got = _ranges(trace)
    launch = _launches(trace) if got is not None else None
    if got is None or launch is None:
        return None
    ranges, rnames = got
    ranges["thread"], launch["thread"] = thread_keys((ranges["globalTid"], ranges["pid"], ranges["tid"]),
                                                     (launch["gtid"], launch["pid"], launch["tid"]))
    strings = trace.strings()
    k_ids = distinct(launch["nameId"])
    knames = [None if i == NULL else strings.get(int(i)) for i in k_ids.tolist()]
    l_rows, r_rows = _range_pairs(launch, ranges)
    alone = np.ones(len(launch["kid"]), bool)
    alone[l_rows] = False
    alone_rows = np.flatnonzero(alone)
    rows = np.concatenate([l_rows, alone_rows])
    n_m = len(l_rows)
    # Group keys in pandas' sorted order (a missing value last): pid, tid, range, style, kernel.
    call = launch["call"][rows]
    big = np.int64(1) << 62
    pid, tid = (np.where(call >= 0, launch[c][np.maximum(call, 0)], NULL) for c in ("pid", "tid"))
    pid, tid = np.where(pid == NULL, big, pid), np.where(tid == NULL, big, tid)
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
    sorted_names = _sorted(rnames)
    sorted_k = _sorted(knames)
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


def _sorted(labels: Sequence[str | None]) -> list[str | None]:
    """The distinct labels sorted, None (no label) last."""
    known = sorted({s for s in labels if s is not None})
    return [*known, None] if None in labels else [*known]


def _ranks(labels: Sequence[str | None]) -> npt.NDArray[np.int64]:
    """Each label's rank among the distinct labels sorted (equal labels share a rank; None last)."""
    import numpy as np

    rank = {s: i for i, s in enumerate(_sorted(labels))}
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
