"""``cuda_gpu_kern_gb_sum``: kernels grouped by name, grid and block dimensions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.column_source import ColumnSource, factorize
from engine.analysis.nsys.stats.group_stats import time_rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.table import SummaryTable
from engine.analysis.nsys.stats.trace_tables import (
    durations,
    usable,
    xyz,
)
from engine.reports.nsys.columns import has_null
from engine.reports.nsys.schema import KERNEL
from engine.reports.nsys.stats_reads import dims_text, packed_dims_expr

if TYPE_CHECKING:

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace


@report(
    "cuda_gpu_kern_gb_sum",
    title="CUDA GPU Kernel/Grid/Block Summary: kernels grouped by name, grid and block",
    columns=(
        "Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
        "StdDev (ns)", "GridXYZ", "BlockXYZ", "Name",
    ),
    needs=("kernels",),
)
def cuda_gpu_kern_gb_sum(trace: Trace, csv: bool) -> Any:
    """On an export from the columnar cache (:func:`kern_gb_sum_table`), else from the tables."""
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    if isinstance(trace, NsysSqliteTrace):
        table = kern_gb_sum_table(trace)
        if table is not None:
            return table
    return kern_gb_frame(trace)


_DIMS = ("gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ")




def kern_gb_sum_table(trace: NsysSqliteTrace) -> SummaryTable | None:
    """``cuda_gpu_kern_gb_sum`` without pandas; None where the general path must handle it.

    Kernels grouped by name, GridXYZ and BlockXYZ (the texts, sorted as the DataFrame path's
    groupby sorts them), numpy segment statistics of their durations, most total time first.
    """
    import sqlite3

    import numpy as np

    from engine.analysis.nsys.stats.group_stats import segment_stats

    if not trace.has_sqlite_table(KERNEL):
        return None
    have = set(trace.column_names(KERNEL))
    names = [f'"{c}"' for c in ("demangledName", "shortName") if c in have]
    if not names or not {"start", "end", *_DIMS} <= have:
        return None
    exprs = {"duration": '"end" - "start"', "nameId": f"coalesce({', '.join(names)}, NULL)",
             "grid": packed_dims_expr("grid"), "block": packed_dims_expr("block")}
    try:
        src = ColumnSource(trace, KERNEL, exprs)
    except sqlite3.Error:
        return None
    if not src.rows or any(has_null(src.column(c)) for c in exprs):
        return None
    strings = trace.strings()
    ids, id_code = factorize(np.asarray(src.column("nameId")))
    if any(int(i) not in strings for i in ids.tolist()):
        return None
    grid, block = np.asarray(src.column("grid")), np.asarray(src.column("block"))
    g_uniq, g_code = factorize(grid)
    b_uniq, b_code = factorize(block)
    key = (id_code * len(g_uniq) + g_code) * len(b_uniq) + b_code
    k_uniq, codes = factorize(key)
    per = k_uniq // len(b_uniq)
    labels = [(dims_text(int(g_uniq[g])), dims_text(int(b_uniq[b])), str(strings[int(ids[i])]))
              for i, g, b in zip((per // len(g_uniq)).tolist(), (per % len(g_uniq)).tolist(),
                                 (k_uniq % len(b_uniq)).tolist(), strict=True)]
    stats = segment_stats(codes, np.asarray(src.column("duration")), len(labels))
    # The DataFrame path's groups come sorted by (name, grid, block) texts: ties keep that order.
    order = sorted(range(len(labels)), key=lambda j: (labels[j][2], labels[j][0], labels[j][1]))
    return time_rows([(labels[j], stats[j]) for j in order if stats[j] is not None],
                      "cuda_gpu_kern_gb_sum")




def kern_gb_frame(trace: Trace) -> SummaryTable:
    """The report from the trace's kernel table (other traces; exports with NULLs or odd names).

    The same grouping as :func:`kern_gb_sum_table`: numpy segment statistics per (name, grid,
    block), groups in that key order before the sort by total.
    """
    import numpy as np
    import pandas as pd

    from engine.analysis.nsys.stats.group_stats import segment_stats

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
