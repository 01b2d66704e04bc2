"""``osrt_sum``: OS runtime calls grouped by function (captures with ``--trace=osrt``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.named_rows import named_summary
from engine.analysis.nsys.stats.registry import report

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


@report(
    "osrt_sum",
    title="OS Runtime Summary: OS runtime calls grouped by function (--trace=osrt)",
    columns=(
        "Time (%)", "Total Time (ns)", "Num Calls", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
        "StdDev (ns)", "Name",
    ),
    needs=(),
)
def osrt_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """OS runtime calls (OSRT_API) grouped by function name (event class 27: the calls)."""
    has: list[str] = getattr(trace, "column_names", lambda t: [])("OSRT_API")
    where = "WHERE t.eventClass = 27" if "eventClass" in has else ""
    return named_summary(trace, "OSRT_API", "Num Calls", "osrt_sum", where)
