"""``openmp_sum``: OpenMP events grouped by name (captures with ``--trace=openmp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.trace_tables import (
    durations,
    empty_frame,
    group_stats,
    time_summary,
)
from engine.reports.nsys.stats_reads import openmp_events

if TYPE_CHECKING:
    import pandas as pd

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
def openmp_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """OpenMP events of every OpenMP event table, grouped by name."""
    import pandas as pd

    parts = openmp_events(trace)
    if not parts:
        return empty_frame("openmp_sum")
    df = pd.concat(parts, ignore_index=True)
    stats = group_stats(pd.DataFrame({"name": df["name"].fillna("").astype(str)}), durations(df))
    return time_summary(stats, "Count", {"Name": "name"})
