"""``openmp_sum``: OpenMP events grouped by name (captures with ``--trace=openmp``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.named_rows import sql_rows
from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.trace_tables import (
    durations,
    empty_frame,
    group_stats,
    time_summary,
)

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
    """OpenMP events of every OPENMP_EVENT_KIND_* table, grouped by name."""
    import pandas as pd

    tables: list[str] = getattr(trace, "sqlite_tables", lambda: [])()
    parts = [df for t in sorted(tables) if t.startswith("OPENMP_EVENT_KIND_")
             if (df := sql_rows(trace, t, f'SELECT t."start", t."end", s.value AS name FROM {t} AS t '
                                      "LEFT JOIN StringIds AS s ON s.id = t.nameId")) is not None]
    if not parts:
        return empty_frame("openmp_sum")
    df = pd.concat(parts, ignore_index=True)
    stats = group_stats(pd.DataFrame({"name": df["name"].fillna("").astype(str)}), durations(df))
    return time_summary(stats, "Count", {"Name": "name"})
