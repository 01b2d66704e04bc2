"""The ``nsys stats`` reports, computed from any trace: one registered function each, one runner.

Each report is a module under :mod:`.reports`, registered with :func:`.registry.report` (its name,
title, nsys 2025.3's columns and the tables it reads). :func:`run` is the one way to compute one,
for the command line, the window's Statistics view and ``batch`` alike: as a DataFrame (numbers
numeric, nsys's column names) or rendered as ``nsys stats`` prints it (CSV byte for byte, an aligned
table, JSON records).

The formulas are the public ones (see docs/FORMATS.md): durations are ``end - start``; per group the
total, count, mean, median (mean of the two middle values for an even count), min, max and sample
standard deviation (0 for a single row); ``Time (%)`` is a group's total over the sum of all the
report's totals; rows are sorted by total, descending, ties by name ascending. The summaries group
with numpy (:mod:`.group_stats`) over columns read once per trace (:mod:`.named_durations`: the
columnar cache on an nsys export, the trace's tables on a Kineto trace); pandas is not imported for
them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import ALIASES, COLUMNS, REPORTS, resolve_report_name
from engine.analysis.nsys.stats.output import format_table, to_csv
from engine.analysis.nsys.stats.registry import Report, registry
from engine.analysis.nsys.stats.rendered import RenderedReport
from engine.analysis.nsys.stats.table import SummaryTable

if TYPE_CHECKING:
    import pandas as pd

    from engine.reports.base import Trace

__all__ = [
    "ALIASES", "COLUMNS", "FORMATS", "REPORTS", "RenderedReport", "Report", "SummaryTable", "format_table",
    "registry", "resolve_report_name", "run", "run_many", "run_report", "to_csv", "why_empty",
]

#: What :func:`run` can give: a DataFrame, or the text ``nsys stats --format`` prints.
FORMATS = ("frame", "csv", "table", "json")


def run(trace: Trace, name: str, fmt: str = "frame") -> Any:
    """Compute one ``nsys stats`` report over a trace.

    Args:
        trace: an opened trace (nsys export or Kineto JSON), see ``engine.reports.open_report``.
        name: a report name or nsys 2022 alias (see :data:`REPORTS`, :data:`ALIASES`).
        fmt: ``"frame"`` for a DataFrame (nsys 2025.3's column names, numbers numeric, rows in nsys's
            order; empty, with those columns, when the trace lacks the data); ``"csv"``, ``"table"``
            or ``"json"`` for a :class:`RenderedReport` (its ``text``, or ``chunks()`` to stream a
            CSV of millions of rows; ``empty`` when the report has no rows).

    Returns:
        The DataFrame or the rendered report.

    Raises:
        KernelscopeError: ``name`` is not a known report.

    """
    report = registry()[resolve_report_name(name)]
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, not {fmt!r}")
    table = _computed(trace, report, csv=fmt == "csv")
    if fmt == "frame":
        return _frame(report, table)
    if isinstance(table, RenderedReport):
        return table
    rows = len(table)
    if fmt == "csv":
        return RenderedReport.of_text(report.name, rows, to_csv(table))
    if fmt == "table":
        return RenderedReport.of_text(report.name, rows, format_table(table))
    return RenderedReport.of_text(report.name, rows, _json_records(_frame(report, table)))


def run_many(trace: Trace, names: Sequence[str], fmt: str = "frame") -> Iterator[tuple[str, Any]]:
    """(name, :func:`run` of it) for each report, the tables they share read once, in the background."""
    from engine.analysis.nsys.stats.named_durations import plan

    reports = [registry()[resolve_report_name(n)] for n in names]
    plan(trace, [t for r in reports if r.shares_reads for t in r.needs])
    for r in reports:
        yield r.name, run(trace, r.name, fmt)


def run_report(trace: Trace, name: str) -> pd.DataFrame:
    """:func:`run` as a DataFrame (the form the tests and notebooks use)."""
    frame: pd.DataFrame = run(trace, name, "frame")
    return frame


def why_empty(trace: Trace, name: str) -> str:
    """Why a report has no rows on this trace: the reasons its tables were not captured, or none."""
    report = registry()[resolve_report_name(name)]
    reasons = [trace.missing[t] for t in report.needs if not trace.has(t)]
    return "; ".join(reasons) if reasons else "the report has no matching rows"


def _computed(trace: Trace, report: Report, *, csv: bool) -> Any:
    """The report's table; an empty one, without reading anything, where the schema proves it empty."""
    from engine.analysis.nsys.stats.empty_on_capture import empty_reports

    empty = empty_reports(trace, [report.name])
    if empty:
        return empty[report.name]
    return report.compute(trace, csv)


def _frame(report: Report, table: Any) -> pd.DataFrame:
    if isinstance(table, SummaryTable):
        return table.to_frame()
    if isinstance(table, RenderedReport):  # pragma: no cover - reports render only when asked for csv
        raise TypeError(f"{report.name} gave rendered text where a table was asked for")
    frame: pd.DataFrame = table[list(report.columns)]
    return frame


def _json_records(df: pd.DataFrame) -> str:
    import json

    out = json.loads(df.to_json(orient="records", double_precision=15))
    return json.dumps(out if isinstance(out, list) else [], indent=1)
