"""The ``ncu --import R --csv --page details|raw --print-units base`` pages, printed from our tables."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from engine.reports.ncu import DETAILS_COLUMNS, ID_COLUMNS, NVTX_COLUMNS, format_number

if TYPE_CHECKING:
    from engine.reports.ncu import NcuReport

_N_METRIC_FIELDS = len(ID_COLUMNS) + 4  # a metric row stops after "Metric Value"


def _nvtx(report: NcuReport) -> dict[int, tuple[str, str]] | None:
    """Kernel ID -> its NVTX cells when the report was collected with ``--nvtx``, else None."""
    cells: dict[int, tuple[str, str]] = getattr(report, "nvtx", None) or {}
    return cells or None


def _with_nvtx(cells: list[str], nvtx: dict[int, tuple[str, str]] | None, kernel_id: object,
               launch: bool = True) -> list[str]:
    """``cells`` with the identity columns as ncu prints them.

    The two NVTX columns come after "Host Name" for a report collected with ``--nvtx``; "Block
    Size" and "Grid Size" are left out when ``launch`` is False (a report of range results).
    ``kernel_id`` is None for the header row and "" for the raw page's units row.
    """
    if not launch:
        cells = [*cells[:7], *cells[9:]]
    if nvtx is None:
        return cells
    if kernel_id is None:
        extra = list(NVTX_COLUMNS)
    elif kernel_id == "":
        extra = ["", ""]
    else:
        extra = list(nvtx.get(int(str(kernel_id)), ("", "")))
    return [*cells[:4], *extra, *cells[4:]]


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


#: ``--print-units auto`` (ncu's default): the units it scales, and their prefixes by powers of 1000.
_AUTO_PREFIXES = {
    "byte": ("", "K", "M", "G", "T", "P"),
    "hz": ("", "K", "M", "G"),
}
_AUTO_TIME = (("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9))
PRINT_UNITS = ("base", "auto")


def auto_unit(unit: str, value: float) -> tuple[str, str] | None:
    """A base-unit value as ``ncu --print-units auto`` prints it: (scaled unit, printed value).

    Bytes (also per second, per block, ...) and hertz get the largest SI prefix that keeps the
    value at 1 or more (``30,998,528 byte`` -> ``31.00 Mbyte``; ``1,941,243,489.58 hz`` ->
    ``1.94 Ghz``); nanoseconds become us, ms or s the same way. Other units are printed unscaled.

    Args:
        unit: The base unit (``byte/s``, ``hz``, ``ns``, ...).
        value: The value in that unit.

    Returns:
        The scaled unit and the value's text, or None when ncu leaves the value as it is.
    """
    if math.isnan(value) or math.isinf(value):
        return None
    if unit == "ns":
        name, factor = "ns", 1.0
        for n, f in _AUTO_TIME:
            if abs(value) >= f:
                name, factor = n, f
        return (name, format_number(value / factor)) if factor != 1.0 else None
    head, sep, tail = unit.partition("/")
    prefixes = _AUTO_PREFIXES.get(head)
    if prefixes is None:
        return None
    k = 0
    while k + 1 < len(prefixes) and abs(value) >= 1000.0 ** (k + 1):
        k += 1
    if k == 0:
        return None
    return prefixes[k] + head + sep + tail, format_number(value / 1000.0**k)


def details_csv(report: NcuReport, print_units: str = "base") -> str:
    """The details page as ``ncu --csv --page details --print-units base|auto`` prints it.

    Metric rows carry the identity, section and metric columns and end with an empty unquoted field;
    rule rows carry all twenty columns. A report without rule results has no rule columns at all.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.
        print_units: ``base`` (values in base units, as with ``--print-units base``) or ``auto``
            (ncu's default: bytes, hertz and nanoseconds scaled, see :func:`auto_unit`).

    Returns:
        The CSV text, one line per row, newline line ends.

    Raises:
        ValueError: ``print_units`` is neither ``base`` nor ``auto``.
    """
    if print_units not in PRINT_UNITS:
        raise ValueError(f"print_units must be one of {PRINT_UNITS}, not {print_units!r}")
    # ncu prints the header with the first section it meets; a report profiled without any section
    # (an empty --section-folder) prints an empty page, not even the header
    sections = getattr(report, "sections", None)
    if getattr(report, "source", "") == "ncu-rep" and sections and not any(sections.values()):
        return ""
    auto = print_units == "auto"
    n_id = len(ID_COLUMNS)
    table = report.detail_rows()
    # ncu adds the five rule columns only when the report holds rule results (a result may hold
    # one without a message, which prints no row); metric rows then end with one empty unquoted
    # field, otherwise after "Metric Value".
    with_rules = bool(getattr(report, "rule_columns", False)) or any(row[n_id + 4] != "" for row in table)
    header = DETAILS_COLUMNS if with_rules else DETAILS_COLUMNS[:_N_METRIC_FIELDS]
    end = "," if with_rules else ""
    nvtx = _nvtx(report)
    launch = bool(getattr(report, "launch_columns", True))
    lines = [",".join(_quote(c) for c in _with_nvtx(list(header), nvtx, None, launch))]
    for row in table:
        if row[n_id + 4]:  # Rule Name set: a rule row
            rule = _with_nvtx([str(c) for c in row[:-1]], nvtx, row[0], launch)
            lines.append(",".join(_quote(c) for c in rule))
            continue
        cells = [str(c) for c in row[:_N_METRIC_FIELDS]]
        if auto:
            scaled = auto_unit(cells[n_id + 2], float(row[-1]))
            if scaled is not None:
                cells[n_id + 2], cells[n_id + 3] = scaled
        lines.append(",".join(_quote(c) for c in _with_nvtx(cells, nvtx, row[0], launch)) + end)
    return "\n".join(lines) + "\n"


def raw_csv(report: NcuReport) -> str:
    """The raw page as ``ncu --csv --page raw --print-units base`` prints it.

    One column per metric (sorted by name), a units row, then one row per kernel.

    Args:
        report: A report read by :func:`engine.reports.ncu.read_ncu`.

    Returns:
        The CSV text.
    """
    cols, table = report.raw_table()
    nvtx = _nvtx(report)
    launch = bool(getattr(report, "launch_columns", True))
    lines = [",".join(_quote(c) for c in _with_nvtx(cols, nvtx, None, launch))]
    raw_units = report.raw_units
    units = [raw_units.get(c, "") for c in cols]
    lines.append(",".join(_quote(c) for c in _with_nvtx(units, nvtx, "", launch)))
    for row in table:
        lines.append(",".join(_quote(c) for c in _with_nvtx([str(c) for c in row], nvtx, row[0], launch)))
    return "\n".join(lines) + "\n"
