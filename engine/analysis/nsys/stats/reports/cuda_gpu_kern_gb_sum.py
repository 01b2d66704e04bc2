"""``cuda_gpu_kern_gb_sum``: kernels grouped by name, grid and block dimensions.

One path on any trace (:func:`kern_gb_sum_table`): the kernels' durations, name ids and packed
launch shapes through ``trace.columns``, the groups' statistics with numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.column_source import TraceColumnSource, factorize
from engine.analysis.nsys.stats.group_stats import time_rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.reports.cuda_kern_exec_trace import Shapes
from engine.reports.trace_columns import NULL

if TYPE_CHECKING:
    from engine.analysis.nsys.stats.table import SummaryTable
    from engine.reports.base import Trace

_REPORT = "cuda_gpu_kern_gb_sum"


@report(
    _REPORT,
    title="CUDA GPU Kernel/Grid/Block Summary: kernels grouped by name, grid and block",
    columns=(
        "Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
        "StdDev (ns)", "GridXYZ", "BlockXYZ", "Name",
    ),
    needs=("kernels",),
)
def cuda_gpu_kern_gb_sum(trace: Trace, csv: bool) -> Any:
    """Kernels grouped by name, grid and block."""
    return kern_gb_sum_table(trace)


def kern_gb_sum_table(trace: Trace) -> SummaryTable:
    """Kernels grouped by their name, GridXYZ and BlockXYZ texts (sorted by name, grid, block).

    Numpy segment statistics of their durations, most total time first; a name id without a text
    is the empty name, a missing dimension prints 0 (as nsys prints them), a kernel without a
    start or an end is left out.
    """
    import numpy as np

    from engine.analysis.nsys.stats.group_stats import segment_stats

    ks = TraceColumnSource(trace, "kernels", ["duration", "nameId", "gridShape", "blockShape"])
    if not ks.rows:
        return time_rows([], _REPORT)
    every = np.arange(ks.rows, dtype=np.int64)
    grid, block = (Shapes(trace, ks, p).column(ks, every) for p in ("grid", "block"))
    ids, id_code = factorize(np.asarray(ks.column("nameId")))
    strings = trace.strings()
    names = ["" if i == NULL else str(strings.get(int(i), "")) for i in ids.tolist()]
    n_g, n_b = len(grid.labels), len(block.labels)
    key = (id_code.astype(np.int64) * n_g + grid.codes) * n_b + block.codes
    k_uniq, codes = factorize(key)
    labels = [(grid.labels[(k // n_b) % n_g], block.labels[k % n_b], names[k // (n_b * n_g)])
              for k in k_uniq.tolist()]
    # groups by text (two ids of one name are one group), sorted by (name, grid, block)
    uniq = sorted(set(labels), key=lambda lab: (lab[2], lab[0], lab[1]))
    rank = {lab: r for r, lab in enumerate(uniq)}
    lut = np.array([rank[lab] for lab in labels], dtype=np.int64)
    dur = np.asarray(ks.column("duration"))
    timed = dur != NULL
    stats = segment_stats(lut[codes][timed], dur[timed], len(uniq))
    return time_rows([(lab, st) for lab, st in zip(uniq, stats, strict=True) if st is not None], _REPORT)
