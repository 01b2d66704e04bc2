"""The NVTX reports and the grid/block kernel summary written with pandas: references for the engine's.

These were the engine's DataFrame path (beside a numpy one for nsys exports) until each report was
written once over ``trace.columns`` and ``trace.nvtx_names`` (issue 24). They stay here, in tests
only, as a second implementation: the tests compare the engine's reports with them on every fixture
and recording. The push/pop trace and the kernel-by-range summary read the export with SQL (through
``engine.reports.nsys.stats_reads``), so they are empty on other traces.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from engine.analysis.nsys.stats.group_stats import grouped, segment_stats, time_rows
from engine.analysis.nsys.stats.nvtx_ranges import (
    DOMAIN_CREATE,
    PUSHPOP,
    STARTEND,
    _kernel_calls,
    _pairs,
    nvtx_ranges,
)
from engine.analysis.nsys.stats.table import SummaryTable
from engine.analysis.nsys.stats.trace_tables import durations, empty_frame, group_stats, usable, xyz
from engine.reports.base import Trace
from engine.reports.nsys.stats_reads import export_of, has_nvtx, nvtx_events


def pushpop_trace_frame(trace: Trace) -> pd.DataFrame:
    """Every NVTX push/pop range with its place in its thread's tree, by start time.

    A range's parent is the innermost range of the same thread that contains it; DurChild sums
    its direct children, RangeId is the event's row id, RangeStack the ids from the root, and
    NameTree the name indented by two dashes per level. Ranges never popped end at the last
    timestamp of the NVTX table.
    """
    df = nvtx_events(trace, text_id=True)
    if df is None:
        return empty_frame("nvtx_pushpop_trace")
    domains = {d: (t if t is not None else s) for d, t, s in
               df.loc[df["eventType"] == DOMAIN_CREATE, ["domainId", "text", "stext"]]
               .itertuples(index=False)}
    last = int(pd.concat([df["start"], df["end"]]).max())
    r = df[df["eventType"].isin(list(PUSHPOP))].copy()
    if r.empty:
        return empty_frame("nvtx_pushpop_trace")
    r["end"] = pd.to_numeric(r["end"]).fillna(last).astype("int64")
    r = r.sort_values(["globalTid", "start", "end", "id"], ascending=[True, True, False, True],
                      kind="stable")
    ids, starts, ends, tids = (r[c].tolist() for c in ("id", "start", "end", "globalTid"))
    parent: dict[int, int | None] = {}
    level: dict[int, int] = {}
    path: dict[int, str] = {}
    stack: list[tuple[int, int, int]] = []  # (id, end, tid)
    for i, s, e, t in zip(ids, starts, ends, tids, strict=True):
        while stack and (stack[-1][2] != t or stack[-1][1] < e or stack[-1][1] < s):
            stack.pop()
        p = stack[-1][0] if stack else None
        parent[i], level[i] = p, (level[p] + 1 if p is not None else 0)
        path[i] = (path[p] if p is not None else "") + f":{i}"
        stack.append((i, e, t))
    dur = dict(zip(ids, (e - s for s, e in zip(starts, ends, strict=True)), strict=True))
    child_dur: dict[int, int] = {}
    n_child: dict[int, int] = {}
    for i, p in parent.items():
        if p is not None:
            child_dur[p] = child_dur.get(p, 0) + dur[i]
            n_child[p] = n_child.get(p, 0) + 1
    text = r["stext"].where(r["stext"].notna(), r["text"])
    name = [f"{'' if (d := domains.get(dom)) is None else d}:{'' if x is None else x}"
            for dom, x in zip(r["domainId"], text, strict=True)]
    gtid = pd.to_numeric(r["globalTid"])
    out = pd.DataFrame({
        "Start (ns)": starts, "End (ns)": ends, "Duration (ns)": [dur[i] for i in ids],
        "DurChild (ns)": [child_dur.get(i, 0) for i in ids],
        "DurNonChild (ns)": [dur[i] - child_dur.get(i, 0) for i in ids],
        "Name": name, "PID": ((gtid // (1 << 24)) % (1 << 24)).to_numpy(),
        "TID": (gtid % (1 << 24)).to_numpy(), "Lvl": [level[i] for i in ids],
        "NumChild": [n_child.get(i, 0) for i in ids], "RangeId": ids,
        "ParentId": pd.array([parent[i] for i in ids], dtype="Int64"),
        "RangeStack": [path[i] for i in ids],
        "NameTree": ["--" * level[i] + n for i, n in zip(ids, name, strict=True)],
    })
    return out.sort_values(["Start (ns)", "RangeId"], kind="stable").reset_index(drop=True)


def kern_sum_frame(trace: Trace) -> pd.DataFrame:
    """Kernels grouped by the NVTX range (and thread) their launch call ran in, and by name.

    A kernel counts once for every range of its launching thread that contains the launch call,
    and once with an empty range when none does.
    """
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


def _style_ranges(trace: Trace, styles: tuple[int, ...]) -> pd.DataFrame | None:
    """Closed NVTX ranges of the given event types with their ``domain:text`` label."""
    export = export_of(trace)
    if export is not None and not has_nvtx(export, styles, ended=True):
        return None  # none of these styles: skip loading every event
    nvtx = usable(trace, "nvtx")
    if nvtx is None:
        return None
    etype = pd.to_numeric(nvtx["eventType"])
    ranges = nvtx[etype.isin(list(styles)) & nvtx["end"].notna()]
    if ranges.empty:
        return None
    ranges = ranges.assign(label=ranges["domain"].fillna("").astype(str) + ":"
                           + ranges["text"].fillna("").astype(str))
    return ranges


def general_style_sum(trace: Trace, report: str) -> SummaryTable:
    """The report from the trace's NVTX table (other traces; exports with NULLs or odd names).

    The same grouping as :func:`style_sum_table` (numpy segment statistics by name), over the
    labels and durations of the trace's table.
    """
    ranges = _style_ranges(trace, PUSHPOP if report == "nvtx_pushpop_sum" else STARTEND)
    if ranges is None:
        return time_rows([], report)
    codes, labels = pd.factorize(ranges["label"].to_numpy())
    return time_rows(grouped([str(x) for x in labels], codes.astype(np.int64), durations(ranges).to_numpy()),
                     report)


def kern_gb_frame(trace: Trace) -> SummaryTable:
    """The report from the trace's kernel table (other traces; exports with NULLs or odd names).

    The same grouping as :func:`kern_gb_sum_table`: numpy segment statistics per (name, grid,
    block), groups in that key order before the sort by total.
    """
    k = usable(trace, "kernels", ["start", "end", "name", "gridX", "gridY", "gridZ", "blockX",
                                   "blockY", "blockZ"])
    if k is None:
        return time_rows([], "cuda_gpu_kern_gb_sum")
    keys = pd.MultiIndex.from_arrays([k["name"].fillna("").astype(str), xyz(k, "grid"), xyz(k, "block")])
    codes, found = keys.factorize()
    uniq: list[tuple[str, str, str]] = [tuple(map(str, t)) for t in found]  # type: ignore[misc]
    order = sorted(range(len(uniq)), key=lambda i: uniq[i])
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(len(uniq), dtype=np.int64)
    stats = segment_stats(rank[codes], durations(k).to_numpy(), len(uniq))
    groups = [((uniq[i][1], uniq[i][2], uniq[i][0]), stats[r]) for r, i in enumerate(order)
              if stats[r] is not None]
    return time_rows(groups, "cuda_gpu_kern_gb_sum")


ORACLES: dict[str, Callable[[Trace], pd.DataFrame | SummaryTable]] = {
    "nvtx_pushpop_trace": pushpop_trace_frame,
    "nvtx_kern_sum": kern_sum_frame,
    "nvtx_pushpop_sum": lambda t: general_style_sum(t, "nvtx_pushpop_sum"),
    "nvtx_startend_sum": lambda t: general_style_sum(t, "nvtx_startend_sum"),
    "cuda_gpu_kern_gb_sum": kern_gb_frame,
}
