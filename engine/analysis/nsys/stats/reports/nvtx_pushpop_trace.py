"""``nvtx_pushpop_trace``: every NVTX push/pop range with its parent, level and children.

One set of rows on any trace (:func:`pushpop_rows`): the ranges' integer columns through
``trace.columns`` (filter ``pushed_ranges``: popped or not), their names through
``trace.nvtx_names``, the tree built in one pass over the ranges sorted by thread and start. They
give the CSV (streamed a chunk at a time, no pandas) and the table (:func:`columns_frame`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.column_source import factorize
from engine.analysis.nsys.stats.csv_columns import _CHUNK, IntColumn, TextColumn, columns_frame, streamed_csv
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.thread_keys import pid_tid, thread_keys
from engine.analysis.nsys.stats.trace_tables import empty_frame
from engine.reports.trace_columns import NULL

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from engine.reports.base import Trace

_REPORT = "nvtx_pushpop_trace"


@report(
    _REPORT,
    title="NVTX Push/Pop Range Trace: every range with its parent, level and children",
    columns=(
        "Start (ns)", "End (ns)", "Duration (ns)", "DurChild (ns)", "DurNonChild (ns)", "Name", "PID", "TID",
        "Lvl", "NumChild", "RangeId", "ParentId", "RangeStack", "NameTree",
    ),
    needs=("nvtx",),
)
def nvtx_pushpop_trace(trace: Trace, csv: bool) -> Any:
    """The rendered CSV where asked for, else the table (same rows)."""
    rows = pushpop_rows(trace)
    if rows is None:
        return empty_frame(_REPORT)
    if csv:
        tail_ok = not any("\n" in n for n in rows.names)  # else every column goes in the byte matrix
        return streamed_csv(_REPORT, rows.n, lambda lo, hi: rows.columns(lo, hi, tail_ok), chunk=_CHUNK)
    return columns_frame(rows.columns(0, rows.n, True), COLUMNS[_REPORT])


class PushPopRows:
    """The report's rows (by start, then range id) as columns, built a chunk at a time."""

    def __init__(self, final: npt.NDArray[np.int64], order: npt.NDArray[np.int64],
                 cols: dict[str, npt.NDArray[np.int64]], tree: dict[str, npt.NDArray[np.int64]],
                 names: list[str], paths: list[str]) -> None:
        self.final, self.order, self.cols, self.tree = final, order, cols, tree
        self.names, self.paths = names, paths
        self.n = len(final)

    def columns(self, lo: int, hi: int, tail_ok: bool) -> list[Any]:
        """Rows ``lo``..``hi``: the report's columns, NameTree last (None before it: all in the matrix)."""
        import numpy as np

        k = self.final[lo:hi]
        o = self.order[k]
        p = self.tree["parent"][k]
        lvl = self.tree["level"][k]
        dur, child = self.tree["dur"][k], self.tree["child_dur"][k]
        sid = self.tree["id"]
        nc = self.cols["name"][o]
        n_names = max(len(self.names), 1)
        t_uniq, t_code = factorize(lvl * n_names + nc)
        trees = ["--" * (t // n_names) + self.names[t % n_names] for t in t_uniq.tolist()]
        pid, tid = self.cols["pid"][o], self.cols["tid"][o]
        out: list[Any] = [
            IntColumn(self.cols["start"][o]), IntColumn(self.cols["end"][o]), IntColumn(dur),
            IntColumn(child), IntColumn(dur - child), TextColumn(nc, self.names),
            IntColumn(pid, pid == NULL), IntColumn(tid, tid == NULL),
            IntColumn(lvl), IntColumn(self.tree["n_child"][k]), IntColumn(sid[k]),
            IntColumn(np.where(p >= 0, sid[np.maximum(p, 0)], 0), p < 0),
            TextColumn(np.arange(len(k), dtype=np.int64), [self.paths[i] for i in k.tolist()], plain=True),
            TextColumn(t_code.astype(np.int64), trees),
        ]
        return out if tail_ok else [*out, None]


def pushpop_rows(trace: Trace) -> PushPopRows | None:
    """Every push/pop range with its place in its thread's tree; None when there is none.

    A range's parent is the innermost earlier range of its thread still open that ends at or
    after it; DurChild sums its direct children, RangeId is the event's row id, RangeStack the
    ids from the root, NameTree the name indented by two dashes per level. A range never popped
    ends at the NVTX table's last timestamp; one without a start is left out. The thread is the
    range's ``globalTid``, else its (pid, tid) (a Kineto trace); a range with neither is alone.
    """
    import numpy as np

    got = named_ranges(trace, ["rowid", "start", "end", "globalTid"], "pushed_ranges")
    if got is None:
        return None
    cols, pairs = got
    start, end, ids = cols["start"], cols["end"], cols["rowid"]
    thread = thread_keys((cols["globalTid"], cols["pid"], cols["tid"]))[0]
    order = np.lexsort((ids, -end, start, thread))
    parent, level = _tree(start[order], end[order], thread[order])
    n = len(order)
    dur = (end - start)[order]
    has_p = parent >= 0
    child_dur = np.zeros(n, np.int64)
    np.add.at(child_dur, parent[has_p], dur[has_p])
    tree = {"parent": parent, "level": level, "dur": dur, "child_dur": child_dur, "id": ids[order],
            "n_child": np.bincount(parent[has_p], minlength=n).astype(np.int64)}
    final = np.lexsort((tree["id"], start[order]))  # by start, then range id
    names = [f"{'' if d is None else d}:{'' if x is None else x}" for d, x in pairs]
    return PushPopRows(final, order, cols, tree, names, _paths(tree["id"].tolist(), parent.tolist()))


def named_ranges(trace: Trace, names: list[str], where: str) -> tuple[
        dict[str, npt.NDArray[np.int64]], list[tuple[Any, Any]]] | None:
    """The ``where`` NVTX rows' columns ``names`` with pid, tid and a name code, and the codes' pairs.

    ``names`` include rowid, start, end and globalTid; ``name`` is a code into the (domain, text)
    pairs returned beside the columns. Rows without a start are left out; a range never ended ends
    at the NVTX table's last timestamp. None when no row is left.
    """
    import numpy as np

    read = trace.columns("nvtx", names, where=where)
    code, pairs = trace.nvtx_names(where, domain_by_text=True)
    cols = {k: np.asarray(v, dtype=np.int64) for k, v in read.items()}
    cols["pid"], cols["tid"] = pid_tid(trace, "nvtx", cols["globalTid"], where)
    cols["name"] = code
    started = cols["start"] != NULL
    if not started.all():
        cols = {k: v[started] for k, v in cols.items()}
    if not len(cols["rowid"]):
        return None
    end = cols["end"]
    if (end == NULL).any():
        cols["end"] = np.where(end == NULL, last_time(trace), end)
    return cols, list(pairs)


def last_time(trace: Trace) -> int:
    """The latest start or end of any NVTX event."""
    import numpy as np

    every = trace.columns("nvtx", ["start", "end"])
    return int(max(np.max(every["start"], initial=NULL), np.max(every["end"], initial=NULL)))


def _tree(start: npt.NDArray[np.int64], end: npt.NDArray[np.int64], thread: npt.NDArray[np.int64],
          ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(parent position or -1, level) of ranges sorted by thread, start, end descending.

    A range's parent is the innermost earlier range of its thread still open that ends at or
    after it (one stack).
    """
    import numpy as np

    s_l, e_l, t_l = start.tolist(), end.tolist(), thread.tolist()
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
    return np.array(parent, np.int64), np.array(level, np.int64)


def _paths(ids: list[int], parent: list[int]) -> list[str]:
    """RangeStack of each range (":id" from the root down), parents before their children."""
    out = [""] * len(ids)
    for k, (i, p) in enumerate(zip(ids, parent, strict=True)):
        out[k] = (out[p] if p >= 0 else "") + f":{i}"
    return out
