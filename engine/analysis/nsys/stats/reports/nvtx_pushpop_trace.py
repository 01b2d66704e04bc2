"""``nvtx_pushpop_trace``: every NVTX push/pop range with its parent, level and children.

On an nsys export, rendered as CSV without pandas (:func:`pushpop_trace_csv`): the ranges' integer
columns from the columnar cache, the tree built in one pass over the ranges sorted by thread and start.
The table (window, JSON) is :func:`pushpop_trace_frame`. Same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.column_source import factorize
from engine.analysis.nsys.stats.csv_columns import _CHUNK, IntColumn, TextColumn, _quoted, _rows
from engine.analysis.nsys.stats.nvtx_ranges import DOMAIN_CREATE, PUSHPOP
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.rendered import RenderedReport
from engine.analysis.nsys.stats.trace_tables import (
    empty_frame,
)
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.nvtx_text_codes import name_exprs, range_names
from engine.reports.nsys.schema import NULL
from engine.reports.nsys.schema import NVTX as _NVTX
from engine.reports.nsys.stats_reads import nvtx_events, nvtx_time_bounds, nvtx_where

PUSHPOP_WHERE = nvtx_where(PUSHPOP)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


@report(
    "nvtx_pushpop_trace",
    title="NVTX Push/Pop Range Trace: every range with its parent, level and children",
    columns=(
        "Start (ns)", "End (ns)", "Duration (ns)", "DurChild (ns)", "DurNonChild (ns)", "Name", "PID", "TID",
        "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack", "NameTree",
    ),
    needs=("nvtx",),
)
def nvtx_pushpop_trace(trace: Trace, csv: bool) -> Any:
    """The rendered CSV where asked for on an export, else the table."""
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if csv and isinstance(trace, NsysSqliteTrace):
        table = pushpop_trace_csv(trace)
        if table is not None:
            return table
    return pushpop_trace_frame(trace)


def pushpop_trace_csv(trace: NsysSqliteTrace) -> RenderedReport | None:
    """``nvtx_pushpop_trace`` as CSV chunks; None where the general path must handle it.

    None for exports without NVTX events or their columns, with NULL starts or threads, or with
    names that hold a newline. A range never popped ends at the table's last timestamp.
    """
    import sqlite3

    import numpy as np


    if not trace.has_sqlite_table(_NVTX):
        return None
    have = set(trace.column_names(_NVTX))
    if not {"start", "end", "eventType", "globalTid"} <= have:
        return None
    try:
        extra, texts = name_exprs(trace, PUSHPOP_WHERE)
        cols = trace.column_store().read_where(
            _NVTX, {"id": "rowid", "start": '"start"', "end": '"end"', "globalTid": '"globalTid"',
                    **extra}, PUSHPOP_WHERE)
        if not len(cols["id"]):
            return RenderedReport("nvtx_pushpop_trace", 0, lambda: iter(()))
        if has_null(cols["start"]) or has_null(cols["globalTid"]):
            return None
        named = range_names(trace, PUSHPOP_WHERE, cols, texts)
        last_s, last_e = nvtx_time_bounds(trace)
    except sqlite3.Error:
        return None
    if named is None or any("\n" in n for n in named[1]):
        return None
    name_code, names = named
    last = max(int(str(v)) for v in (last_s, last_e) if v is not None)
    ids, start, gtid = (np.asarray(cols[c]) for c in ("id", "start", "globalTid"))
    end = np.asarray(cols["end"])
    end = np.where(end == NULL, last, end)
    order = np.lexsort((ids, -end, start, gtid))
    parent, level, stack = _tree(start[order], end[order], gtid[order])
    n = len(order)
    dur = (end - start)[order]
    has_p = parent >= 0
    child_dur = np.zeros(n, np.int64)
    np.add.at(child_dur, parent[has_p], dur[has_p])
    n_child = np.bincount(parent[has_p], minlength=n).astype(np.int64)
    sid = ids[order]
    paths = _paths(sid.tolist(), parent.tolist())
    final = np.lexsort((sid, start[order]))  # by start, then range id
    del stack

    def chunks() -> Iterator[bytes]:
        yield ",".join(_quoted(h).decode() for h in COLUMNS["nvtx_pushpop_trace"]).encode() + b"\n"
        for lo in range(0, n, _CHUNK):
            k = final[lo:lo + _CHUNK]
            o = order[k]
            p = parent[k]
            lvl = level[k]
            nc = name_code[o]
            tree_key = lvl * len(names) + nc
            t_uniq, t_code = factorize(tree_key)
            trees = ["--" * (t // len(names)) + names[t % len(names)] for t in t_uniq.tolist()]
            g = gtid[o]
            cols_out: list[IntColumn | TextColumn] = [
                IntColumn(start[o]), IntColumn(end[o]), IntColumn(dur[k]), IntColumn(child_dur[k]),
                IntColumn(dur[k] - child_dur[k]), TextColumn(nc, names),
                IntColumn((g // (1 << 24)) % (1 << 24)), IntColumn(g % (1 << 24)),
                IntColumn(lvl), IntColumn(n_child[k]), IntColumn(sid[k]),
                IntColumn(np.where(p >= 0, sid[np.maximum(p, 0)], 0), p < 0),
                TextColumn(np.arange(len(k), dtype=np.int64), [paths[i] for i in k.tolist()],
                           plain=True),
                TextColumn(t_code.astype(np.int64), trees),
            ]
            yield _rows(cols_out[:-1], 0, len(k), cols_out[-1])  # type: ignore[arg-type]

    return RenderedReport("nvtx_pushpop_trace", n, chunks)


def _tree(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], tid: npt.NDArray[np.int64],
          ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[int]]:
    """(parent position or -1, level) of ranges sorted by thread, start, end descending.

    A range's parent is the innermost earlier range of its thread still open that ends at or
    after it (one stack, as :func:`pushpop_trace_frame` walks).
    """
    import numpy as np

    s_l, e_l, t_l = start.tolist(), end.tolist(), tid.tolist()
    n = len(s_l)
    parent = [-1] * n
    level = [0] * n
    stack: list[int] = []
    for k in range(n):
        e, t = e_l[k], t_l[k]
        s = s_l[k]
        while stack:
            top = stack[-1]
            if t_l[top] != t or e_l[top] < e or e_l[top] < s:
                stack.pop()
            else:
                parent[k] = top
                level[k] = level[top] + 1
                break
        stack.append(k)
    return np.array(parent, np.int64), np.array(level, np.int64), stack


def _paths(ids: list[int], parent: list[int]) -> list[str]:
    """RangeStack of each range (":id" from the root down), parents before their children."""
    out = [""] * len(ids)
    for k, (i, p) in enumerate(zip(ids, parent, strict=True)):
        out[k] = (out[p] if p >= 0 else "") + f":{i}"
    return out


def pushpop_trace_frame(trace: Trace) -> pd.DataFrame:
    """Every NVTX push/pop range with its place in its thread's tree, by start time.

    A range's parent is the innermost range of the same thread that contains it; DurChild sums
    its direct children, RangeId is the event's row id, RangeStack the ids from the root, and
    NameTree the name indented by two dashes per level. Ranges never popped end at the last
    timestamp of the NVTX table.
    """
    import pandas as pd

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
