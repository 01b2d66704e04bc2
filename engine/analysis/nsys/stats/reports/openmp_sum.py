"""``openmp_sum``: OpenMP events grouped by name (captures with ``--trace=openmp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.group_stats import grouped, time_rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.trace_tables import durations
from engine.reports.nsys.stats_reads import openmp_events

if TYPE_CHECKING:
    from engine.analysis.nsys.stats.table import SummaryTable
    from engine.reports.base import Trace


@report(
    "openmp_sum",
    title="OpenMP Summary: OpenMP events grouped by name",
    columns=(
        "Time (%)", "Total Time (ns)", "Count", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)", "StdDev (ns)",
        "Name",
    ),
    needs=(),
)
def openmp_sum(trace: Trace, csv: bool) -> SummaryTable:
    """OpenMP events of every OpenMP event table, grouped by name (numpy segment statistics)."""
    import numpy as np
    import pandas as pd

    parts = openmp_events(trace)
    if not parts:
        return time_rows([], "openmp_sum")
    df = pd.concat(parts, ignore_index=True)
    codes, labels = pd.factorize(df["name"].fillna("").astype(str).to_numpy())
    return time_rows(grouped([str(x) for x in labels], codes.astype(np.int64), durations(df).to_numpy()),
                     "openmp_sum")
