"""``mpi_event_sum`` and ``mpi_event_trace``: empty for captures without MPI; MPI data is not read yet."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.analysis.nsys.stats.registry import report
from engine.analysis.nsys.stats.trace_tables import (
    empty_frame,
)

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace


@report(
    "mpi_event_sum",
    title="MPI Event Summary (captures with --trace=mpi; not computed for MPI data yet)",
    columns=(
        "Name",
    ),
    needs=(),
)
def mpi_event_sum(trace: Trace, csv: bool) -> pd.DataFrame:
    """MPI events summary (empty for captures without MPI tracing)."""
    return _mpi(trace, "mpi_event_sum")


@report(
    "mpi_event_trace",
    title="MPI Event Trace (captures with --trace=mpi; not computed for MPI data yet)",
    columns=(
        "Name",
    ),
    needs=(),
)
def mpi_event_trace(trace: Trace, csv: bool) -> pd.DataFrame:
    """MPI events trace (empty for captures without MPI tracing)."""
    return _mpi(trace, "mpi_event_trace")


def _mpi(trace: Trace, report: str) -> pd.DataFrame:
    """MPI reports: empty for captures without MPI (as nsys prints them); MPI data is not read yet."""
    from engine.reports.nsys.stats_reads import has_mpi
    from engine.system.errors import KernelscopeError

    if has_mpi(trace):
        raise KernelscopeError(
            f"This report has MPI data, which Kernelscope does not summarise yet; run "
            f"`nsys stats -r {report}` on it for the {report} report."
        )
    return empty_frame(report)
