"""The ``ncu --import R --csv --page details|raw --print-units base`` pages, printed from our tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.reports.ncu import DETAILS_COLUMNS, ID_COLUMNS

if TYPE_CHECKING:
    from engine.reports.ncu import NcuReport

_N_METRIC_FIELDS = len(ID_COLUMNS) + 4  # a metric row stops after "Metric Value"


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def details_csv(report: NcuReport) -> str:
    """The details page as ``ncu --csv --page details --print-units base`` prints it.

    Metric rows carry the identity, section and metric columns and end with an empty unquoted field;
    rule rows carry all twenty columns.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        The CSV text, one line per row, newline line ends.
    """
    lines = [",".join(_quote(c) for c in DETAILS_COLUMNS)]
    for row in report.metrics[DETAILS_COLUMNS].itertuples(index=False, name=None):
        if row[len(ID_COLUMNS) + 4]:  # Rule Name set: a rule row
            lines.append(",".join(_quote(str(c)) for c in row))
        else:
            lines.append(",".join(_quote(str(c)) for c in row[:_N_METRIC_FIELDS]) + ",")
    return "\n".join(lines) + "\n"


def raw_csv(report: NcuReport) -> str:
    """The raw page as ``ncu --csv --page raw --print-units base`` prints it.

    One column per metric (sorted by name), a units row, then one row per kernel.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        The CSV text.
    """
    cols = list(report.raw.columns)
    lines = [",".join(_quote(c) for c in cols)]
    lines.append(",".join(_quote(report.raw_units.get(c, "")) for c in cols))
    for row in report.raw.itertuples(index=False, name=None):
        lines.append(",".join(_quote(str(c)) for c in row))
    return "\n".join(lines) + "\n"
